"""COCO evaluation by pycocotools (the reference) and by faster-coco-eval, side by side.

    .venv/bin/python benchmarks/coco_eval_speed.py [--work-dir build/bench/demo]
        [--results-dir build/bench/results] [--synthetic-images 1000] [--repeats 3] [--smoke]

Two sets of detections, each evaluated (COCOeval's evaluate, accumulate, summarize: bbox, then
segm) by both evaluators through maskrcnn_job/evaluation/coco.py, as the job evaluates:
- the demo's model: the SavedModel that benchmarks/demo_accuracy.py's run left in <work-dir>
  (what `make demo` trains) on its validation images, through `maskrcnn_local.predict` (the
  endpoint's post-processing, every detection kept as the job's evaluation keeps them);
  skipped, and said so, when that run is absent;
- a larger synthetic case: --synthetic-images validation images of the demo's set with detections
  made from their ground truth (maskrcnn_local/synthetic_detections.py), for the time at scale.
For each: both evaluators' 12 stats per task and per-class AP, AP50, AP75, APs, APm, APl, AR100
(maskrcnn_job/evaluation/report.py reads them from COCO's arrays), their largest absolute
difference, whether they are equal to the printed precision (3 decimals), and each evaluator's
wall time, the least of --repeats runs. The demo run's own COCOeval time and its share of the
run come from its report (timing.coco_eval_s) and demo_accuracy.json. Writes
<results-dir>/coco_eval_speed.json (benchmarks/results.py; `make bench` renders it into
docs/benchmarks.md). Needs faster-coco-eval installed; --smoke: 20 synthetic images, one repeat.
"""

import argparse
import contextlib
import copy
import io
import json
import os
import subprocess
import sys
import time

import results

TASKS = ("bbox", "segm")
PER_CLASS = ("AP", "AP50", "AP75", "APs", "APm", "APl", "AR100")
PRINTED_DECIMALS = 3


def _coco(dataset: dict):
    from pycocotools.coco import COCO

    coco = COCO()
    coco.dataset = copy.deepcopy(dataset)
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def evaluate(dataset: dict, detections: list, evaluator: str, repeats: int) -> dict:
    """{task: {"stats": 12 floats, "per_class": {name: {stat: value}}, "seconds": least}}."""
    from maskrcnn_job.evaluation import coco as coco_evaluation
    from maskrcnn_job.evaluation import report

    coco_gt = _coco(dataset)
    coco_dt = coco_evaluation.load_results(coco_gt, detections)
    names = {int(c["id"]): c["name"] for c in dataset["categories"]}
    image_ids = sorted(coco_gt.getImgIds())
    out = {}
    for task in TASKS:
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            coco_eval = coco_evaluation.run(coco_gt, coco_dt, task, image_ids, evaluator,
                                            print_function=None)
            seconds.append(time.perf_counter() - started)
        out[task] = {"stats": [float(v) for v in coco_eval.stats],
                     "per_class": {names[row["id"]]: {s: row[s] for s in PER_CLASS}
                                   for row in report.per_class_ap(coco_eval)},
                     "seconds": min(seconds), "all_seconds": [round(s, 4) for s in seconds]}
    return out


def _values(task: dict) -> list:
    return task["stats"] + [row[s] for row in task["per_class"].values() for s in PER_CLASS]


def compare(reference: dict, other: dict) -> dict:
    """Largest absolute difference over stats and per-class figures (None = COCO's -1 on both
    sides; None on one side only is a difference), and equality at the printed precision."""
    difference, equal = 0.0, True
    for task in TASKS:
        for a, b in zip(_values(reference[task]), _values(other[task])):
            if (a is None) != (b is None):
                return {"max_abs_difference": None, "equal_at_printed_precision": False}
            if a is None:
                continue
            difference = max(difference, abs(a - b))
            equal &= round(a, PRINTED_DECIMALS) == round(b, PRINTED_DECIMALS)
    return {"max_abs_difference": difference, "equal_at_printed_precision": bool(equal)}


def demo_case(work_dir: str):
    """(dataset, detections, the demo run's report timing) of the demo run's model on its
    validation images, or None when the run left no model."""
    model = os.path.join(work_dir, "opt_ml", "model")
    annotations = os.path.join(work_dir, "coco-synthetic", "annotations", "instances_val2017.json")
    if not (os.path.isdir(os.path.join(model, "1")) and os.path.isfile(annotations)):
        return None
    out = os.path.join(work_dir, "coco_eval_speed")
    command = [sys.executable, "-m", "maskrcnn_local.predict", model,
               os.path.join(work_dir, "coco-synthetic", "val2017"), "--annotations", annotations,
               "--out", out, "--score-threshold", "0"]  # every detection, as the job evaluates
    print("running:", " ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"predict failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with open(annotations, encoding="utf-8") as f:
        dataset = json.load(f)
    with open(os.path.join(out, "detections.json"), encoding="utf-8") as f:
        detections = json.load(f)
    timing = None
    job_report = os.path.join(model, "code", "evaluation", "report.json")
    if os.path.isfile(job_report):
        with open(job_report, encoding="utf-8") as f:
            timing = json.load(f).get("timing")
    return dataset, detections, timing


def synthetic_case(images: int, scratch: str):
    from maskrcnn_local import synthetic_coco, synthetic_detections

    dataset = synthetic_coco.generate(scratch, num_train=1, num_val=images, image_size=128)["val"]
    return dataset, synthetic_detections.perturbed(_coco(dataset), seed=0)


def measure(name: str, dataset: dict, detections: list, repeats: int) -> dict:
    from maskrcnn_job.evaluation import coco as coco_evaluation

    by = {e: evaluate(dataset, detections, e, repeats)
          for e in (coco_evaluation.PYCOCOTOOLS, coco_evaluation.FASTER_COCO_EVAL)}
    reference, faster = by[coco_evaluation.PYCOCOTOOLS], by[coco_evaluation.FASTER_COCO_EVAL]
    case: dict = {"name": name, "images": len(dataset["images"]), "detections": len(detections),
            "pycocotools": reference, "faster_coco_eval": faster,
            "seconds": {e: round(sum(by[e][t]["seconds"] for t in TASKS), 4) for e in by}}
    case.update(compare(reference, faster))
    case["speedup"] = case["seconds"]["pycocotools"] / case["seconds"]["faster-coco-eval"]
    _print(case)
    return case


def _cell(value) -> str:
    return "    -" if value is None else f"{value:.3f}"


def _print(case: dict) -> None:
    from maskrcnn_contract.metrics import COCO_STATS

    ref, fast = case["pycocotools"], case["faster_coco_eval"]
    print(f"\n{case['name']}: {case['images']} images, {case['detections']} detections "
          "(pycocotools | faster-coco-eval)")
    for task in TASKS:
        print(f"  {task}: " + "  ".join(f"{s} {_cell(a)}|{_cell(b)}" for s, a, b in zip(
            COCO_STATS, ref[task]["stats"], fast[task]["stats"])))
        for name, row in ref[task]["per_class"].items():
            other = fast[task]["per_class"][name]
            print(f"    {name:<10} " + "  ".join(f"{s} {_cell(row[s])}|{_cell(other[s])}"
                                                for s in PER_CLASS[:3]))
    difference = case["max_abs_difference"]
    print(f"  max abs difference {difference if difference is None else f'{difference:.2e}'}; "
          f"equal to {PRINTED_DECIMALS} decimals: {case['equal_at_printed_precision']}")
    print(f"  wall time (bbox + segm, least of runs): pycocotools "
          f"{case['seconds']['pycocotools']:.3f} s, faster-coco-eval "
          f"{case['seconds']['faster-coco-eval']:.3f} s, speed-up {case['speedup']:.1f}x")


def _demo_share(results_dir: str, timing: dict) -> dict:
    """The demo run's COCOeval time (its last evaluation's report) and its share of the run."""
    if not timing or "coco_eval_s" not in timing:
        return {}
    share = {"last_evaluation_coco_eval_s": round(sum(timing["coco_eval_s"].values()), 3),
             "last_evaluation_inference_s": timing.get("inference_s")}
    accuracy = os.path.join(results_dir, "demo_accuracy.json")
    if os.path.isfile(accuracy):
        with open(accuracy, encoding="utf-8") as f:
            record = json.load(f)
        evaluations = len(record.get("evaluations", []))
        run_seconds = record.get("local_run_seconds")
        if evaluations and run_seconds:
            share.update(evaluations=evaluations, run_seconds=run_seconds,
                         share_of_run=share["last_evaluation_coco_eval_s"] * evaluations
                         / run_seconds)
    return share


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default=os.path.join("build", "bench", "demo"),
                        help="benchmarks/demo_accuracy.py's work directory (%(default)s)")
    parser.add_argument("--results-dir", default=results.DEFAULT_RESULTS_DIR)
    parser.add_argument("--synthetic-images", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="20 synthetic images, one run")
    args = parser.parse_args(argv)
    from maskrcnn_job.evaluation import coco as coco_evaluation

    if not coco_evaluation.installed(coco_evaluation.FASTER_COCO_EVAL):
        print("faster-coco-eval is not installed: nothing to compare", file=sys.stderr)
        return 2
    if args.smoke:
        args.synthetic_images, args.repeats = 20, 1
    started = time.time()
    figures = {"repeats": args.repeats,
               "versions": {e: coco_evaluation.describe(e) for e in coco_evaluation.EVALUATORS},
               "cases": []}
    demo = None if args.smoke else demo_case(args.work_dir)
    if demo is None:
        print(f"no demo run's model in {args.work_dir} (benchmarks/demo_accuracy.py): "
              "the demo's case is skipped")
    else:
        dataset, detections, timing = demo
        accuracy = os.path.join(args.results_dir, "demo_accuracy.json")
        smoke_trained = False
        if os.path.isfile(accuracy):
            with open(accuracy, encoding="utf-8") as f:
                smoke_trained = json.load(f).get("smoke")
        name = "the demo's model" + (" (a smoke run's: 2 epochs)" if smoke_trained else "")
        figures["cases"].append(measure(name, dataset, detections, args.repeats))
        figures["demo_run"] = _demo_share(args.results_dir, timing)
    scratch = os.path.join(args.work_dir + "-coco-eval-speed")
    dataset, detections = synthetic_case(args.synthetic_images, scratch)
    figures["cases"].append(measure("synthetic detections", dataset, detections, args.repeats))
    figures["equal_at_printed_precision"] = all(c["equal_at_printed_precision"]
                                                for c in figures["cases"])
    path = results.write(args.results_dir, "coco_eval_speed", started, args.smoke, figures)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
