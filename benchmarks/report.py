"""docs/benchmarks.md from the JSON files of one `make bench` run (benchmarks/results.py).

    python benchmarks/report.py [RESULTS_DIR] [--baseline DIR] [--out docs/benchmarks.md]

One section per file found in RESULTS_DIR (build/bench/results): demo_accuracy.json,
cpu_scaling.json, converter_speed.json, coco_eval_speed.json, large_images.json. Each section is
one file, so one script's run: it starts with that run's date, machine and command, and a smoke
run's section says that its figures mean nothing. Files measured on different machines are
refused. With --baseline, a
first section sets the key figures of an earlier run's files (kept in benchmarks/baselines/) beside
this run's, and marks a step time more than 10% slower. The page says nothing that is not in the
files or in the scripts. With --evaluation-doc, docs/evaluation.md's example is the demo's run's
evaluation report (printed by the contract's table). Standard library and the contract only.
"""

import argparse
import json
import os
import sys

import results

REPO = results.REPO
STRATEGIES = ("horovod", "multi_worker_mirrored", "parameter_server")
HOROVOD_ONE_HOST = (("horovod-1x1", 1, 1), ("horovod-1x2", 1, 2), ("horovod-2x1", 2, 1))
NONE = "–"
# A step time slower than the baseline's by more than this is marked for an explanation.
SLOWER_MARK = 0.10


class ReportError(ValueError):
    pass


def _cell(row: dict, key: str, fmt: str) -> str:
    return fmt.format(row[key]) if row.get(key) is not None else NONE


def _table(header: list, rows: list) -> list:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def _run_line(record: dict) -> list:
    lines = [f"Measured {record['date']} on {record['machine']}, in {record['seconds'] / 60:.1f} "
             f"min, by `{record['command']}`."]
    if record.get("smoke"):
        lines += ["", "**Smoke run: it only checked that the path works. These figures mean "
                      "nothing.**"]
    return lines


def _dataset(dataset: dict) -> str:
    sizes = ""
    if "train_images" in dataset:
        sizes = (f"{dataset['train_images']} training and {dataset['val_images']} validation "
                 f"images of {dataset['image_size']} px, ")
    return (f"{sizes}the {dataset['difficulty']} set of maskrcnn_local/synthetic_coco.py "
            f"(generator version {dataset['generator']})")


def demo_accuracy_section(record: dict) -> list:
    hps = record["hyperparameters"]
    lines = ["## `make demo`'s accuracy", ""] + _run_line(record) + [
        "",
        f"`python -m maskrcnn_local.local_run --draw 0`: what `make demo` trains, on "
        f"{_dataset(record['dataset'])}, {record['ranks']} Horovod ranks on one host. "
        "COCO evaluation of the validation images at each evaluation, read from the job's "
        "TensorBoard summaries; the last row is what local_run printed at the end.",
        "",
        "Hyperparameters: " + ", ".join(f"`{k}={v}`" for k, v in sorted(hps.items())) + ".",
        ""]
    per_image = record["global_batch"] / record["dataset"]["train_images"]
    rows = [[e["step"], f"{e['step'] * per_image:.1f}",
             _cell(e, "eval/segm_AP", "{:.3f}"), _cell(e, "eval/segm_AP50", "{:.3f}"),
             _cell(e, "eval/bbox_AP", "{:.3f}"), _cell(e, "eval/bbox_AP50", "{:.3f}")]
            for e in record["evaluations"]]
    final = record["final"]
    rows.append(["final (printed)", NONE] + [_cell(final, key, "{:.3f}") for key in (
        "eval/segm_AP", "eval/segm_AP50", "eval/bbox_AP", "eval/bbox_AP50")])
    lines += _table(["step", "epoch", "mask AP", "mask AP50", "box AP", "box AP50"], rows)
    lines += ["", f"The local run took {record['local_run_seconds'] / 60:.1f} min (dataset, "
                  "training, evaluations, export; `make demo` adds the synth summary and the "
                  "drawing)."]
    runs = record.get("runs") or []
    if len(runs) > 1:
        lines += ["", f"The same command run {len(runs)} times (the table above is the first run): "
                      "each run's final metrics, and their spread. Two ranks' thread scheduling "
                      "makes runs of one commit differ; a change in a later run inside this "
                      "range is not a regression.", ""]
        rows = [[n, _cell(run["final"], "eval/segm_AP", "{:.3f}"),
                 _cell(run["final"], "eval/segm_AP50", "{:.3f}"),
                 _cell(run["final"], "eval/bbox_AP", "{:.3f}"),
                 _cell(run["final"], "eval/bbox_AP50", "{:.3f}"),
                 f"{run['local_run_seconds'] / 60:.1f}"] for n, run in enumerate(runs, 1)]
        spread = record["spread"]
        for label, key, fmt in (("mean", "mean", "{:.3f}"),
                                ("standard deviation", "stdev", "{:.3f}"),
                                ("least", "min", "{:.3f}"), ("greatest", "max", "{:.3f}")):
            rows.append([label] + [_cell(spread.get(name, {}), key, fmt) for name in (
                "eval/segm_AP", "eval/segm_AP50", "eval/bbox_AP", "eval/bbox_AP50")] + [NONE])
        lines += _table(["run", "mask AP", "mask AP50", "box AP", "box AP50", "min"], rows)
    return lines


# docs/evaluation.md's example table lies between these lines; `make bench` rewrites it from the
# demo's run (--evaluation-doc), so the example is a run's, with its date.
EXAMPLE_BEGIN = "<!-- make bench: the demo's evaluation report (benchmarks/report.py) -->"
EXAMPLE_END = "<!-- end of make bench's example -->"


def evaluation_example(record: dict) -> list:
    """The lines between EXAMPLE_BEGIN and EXAMPLE_END: the demo's last evaluation report, as
    the job prints it (the contract's table)."""
    from maskrcnn_contract import evaluation_report

    report = record["evaluation_report"]
    smoke = " (a smoke run: its figures mean nothing)" if record.get("smoke") else ""
    return [f"This one is the end of the demo's run in `make bench` of {record['date']}{smoke} "
            f"({report['step']} steps on the {record['dataset']['difficulty']} synthetic set, "
            f"{report['images']} validation images, {report['evaluator']}; "
            "[benchmarks.md](benchmarks.md), \"`make demo`'s accuracy\", for the run-to-run "
            "spread):", "", "```"] + evaluation_report.table(report) + ["```"]


def write_evaluation_example(path: str, record: dict) -> None:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.count(EXAMPLE_BEGIN) != 1 or text.count(EXAMPLE_END) != 1:
        raise ReportError(f"{path}: expected one {EXAMPLE_BEGIN!r} and one {EXAMPLE_END!r}")
    head, rest = text.split(EXAMPLE_BEGIN)
    _, tail = rest.split(EXAMPLE_END)
    with open(path, "w", encoding="utf-8") as f:
        f.write(head + EXAMPLE_BEGIN + "\n" + "\n".join(evaluation_example(record)) + "\n"
                + EXAMPLE_END + tail)


def _strategy_table(figures: dict, budget: int) -> list:
    rows: list = [
        ("images/s, 1 worker (1 host)", "images_per_sec_1", "{:.1f}"),
        ("images/s, 2 workers (2 emulated hosts x 1 process)", "images_per_sec_2", "{:.1f}"),
        ("scaling efficiency (2 workers / twice 1 worker)", "scaling_efficiency", "{:.2f}"),
        ("a worker's step, 2 workers (s)", "step_s_2", "{:.3f}"),
        ("one step's communication alone, 2 workers (ms)", "comm_ms_2", "{:.0f}"),
        ("communication share of a worker's step, 2 workers", "comm_share_2", "{:.0%}"),
        ("communication share, 1 worker", "comm_share_1", "{:.0%}"),
        (f"steps in {budget} s of training (images per step)", None, None),
        (f"mask AP after {budget} s of training", "ap_segm_AP", "{:.3f}"),
        (f"box AP after {budget} s of training", "ap_bbox_AP", "{:.3f}"),
        ("whole AP run (start-up, training, evaluation, export; s)", "ap_run_s", "{:.0f}"),
    ]
    if not budget:  # no AP runs
        rows = [row for row in rows if row[1] is not None and not row[1].startswith("ap_")]
    out = []
    for label, key, fmt in rows:
        if key is None:
            cells = [f"{figures[d]['ap_steps']} ({figures[d]['images_per_step_2']})"
                     if "ap_steps" in figures.get(d, {}) else NONE for d in STRATEGIES]
        else:
            cells = [_cell(figures.get(d, {}), key, fmt) for d in STRATEGIES]
        if key == "comm_share_1":  # one synchronous worker communicates with nobody
            cells = [c if d == "parameter_server" else NONE for c, d in zip(cells, STRATEGIES)]
        out.append([label] + cells)
    return _table(["2 workers on this machine"] + [f"`{d}`" for d in STRATEGIES], out)


def _horovod_table(timing: dict) -> list:
    rows = []
    for name, ranks, threads in HOROVOD_ONE_HOST:
        if name not in timing:
            continue
        r = timing[name]
        comm = (NONE, NONE) if ranks == 1 else (f"{1000 * r['comm_s']:.0f}",
                                                 f"{r['comm_s'] / r['step_s']:.0%}")
        rows.append([f"{ranks} x {threads}", f"{r['step_s']:.3f}", f"{r['images_per_sec']:.1f}",
                     comm[0], comm[1],
                     f"{r['parse_images_per_sec_per_rank']:.0f} / "
                     f"{r['input_images_per_sec_per_rank']:.0f}",
                     f"{r['images_per_sec'] / ranks:.1f}"])
    if not rows:
        return []
    lines = ["", "Horovod on one host (`mpirun`, shared memory), ranks x intra-op threads:", ""]
    lines += _table(["ranks x intra-op threads", "step (s)", "images/s (all ranks)",
                     "allreduce alone (ms)", "allreduce share of step",
                     "input pipeline alone, images/s per rank (first pass decode+parse / from "
                     "cache)", "model consumes, images/s per rank"], rows)
    if all(name in timing for name, _, _ in HOROVOD_ONE_HOST):
        one, both, two = (timing[name]["images_per_sec"] for name, _, _ in HOROVOD_ONE_HOST)
        lines += ["", f"Scaling efficiency, 2 ranks x 1 thread against twice 1 rank x 1 thread: "
                      f"{two / (2 * one):.2f}; 2 ranks x 1 thread against 1 rank x 2 threads "
                      f"(the same cores): {two / both:.2f}."]
    return lines


def cpu_scaling_section(record: dict) -> list:
    settings, timing = record["settings"], record["timing"]
    budget = settings["budget"]
    some = next(iter(timing.values()), None)
    lines = ["## Training on CPU: the three distributions side by side", ""] + _run_line(record)
    model = ""
    if some:
        model = (f" The model: {some['parameters'] / 1e6:.1f}M trainable parameters "
                 f"({some['parameters'] * 4 / 1e6:.0f} MB of fp32 gradients per step).")
    hps = ", ".join(f"`{h}`" for h in record["common_hyperparameters"] + settings["hp"])
    env = ", ".join(f"`{k}={v}`" for k, v in sorted(settings["env"].items()))
    lines += [
        "",
        "Every run is `python -m maskrcnn_local.local_run` with the demo's model (ResNet-18-FPN, "
        f"compact heads), on {_dataset(record['dataset'])}. Hyperparameters of every run: {hps}"
        + (f"; environment: {env}" if env else "") + "." + model,
        "The timing runs put `benchmarks/step_timing.py` in place of `train.py`: the job's own "
        "entry point, trainer, backend, input pipeline and step; under `parameter_server` the "
        "job's own supervisor, PS and worker tasks. Each: "
        f"{settings['warmup']} warm-up steps, then {settings['steps']} steps in chunks of "
        f"{settings['chunk']}, the median chunk.",
        ""]
    lines += _strategy_table(record["figures"], budget)
    lines += [
        "",
        "- Placement. 1 worker: one host, one process of 1 intra-op thread (Horovod `mpirun -np "
        "1`; MWMS one worker; PS its chief, one worker and one PS on the host). 2 workers: 2 "
        "emulated hosts (`local_run --hosts 2`, the real SageMaker toolkit), one process of 1 "
        "thread per host for all three, talking TCP over the emulated network. Horovod's ranks "
        "also run one inter-op thread; the strategies set the intra-op threads only "
        "([distribution.md](distribution.md), \"Threads\"), so a lone MWMS worker or a lone PS "
        "host's tasks can use every core: the 2-worker rows, where each strategy has the same "
        "cores for 2 workers, are the comparison.",
        "- Communication alone: what one step moves, timed with nothing else running, as a "
        "share of a worker's step: `horovod` one grouped allreduce of gradient-shaped tensors; "
        "`multi_worker_mirrored` the strategy's all-reduce of the same; `parameter_server` one "
        "worker reading every trainable variable from the PS tasks and sending a gradient-shaped "
        "update back. The share is what a step would lose if nothing overlapped it.",
    ]
    if budget:
        ap_hps = ", ".join(f"`{h}`" for h in record["ap_hyperparameters"])
        lines.append(
            f"- AP after {budget} s: each strategy trains `train.py` itself on the 2 emulated "
            f"hosts for as many steps as its measured images/s make of {budget} s, then "
            f"evaluates the validation images once ({ap_hps}, the steps as `max_steps`).")
    lines += _horovod_table(timing)
    lines += _usage_table(timing)
    return lines


def _usage_table(timing: dict) -> list:
    """The one-host timing runs' CPU time and page faults (every process is local_run's
    descendant there), whole runs, start-up included."""
    rows = [[f"`{name}`", f"{r['cpu_user_s']:.0f}", f"{r['cpu_sys_s']:.1f}",
             f"{r['cpu_sys_s'] / (r['cpu_user_s'] + r['cpu_sys_s']):.0%}",
             f"{r['minor_faults'] / 1e6:.2f}"]
            for name, r in timing.items() if r.get("hosts") == 1 and "cpu_sys_s" in r]
    if not rows:
        return []
    return ["", "What each one-host timing run's processes used, the whole run (start-up, "
                "warm-up and timed steps):", ""] + _table(
        ["run", "user CPU (s)", "kernel CPU (s)", "kernel share", "minor page faults (M)"], rows)


def converter_speed_section(record: dict) -> list:
    lines = ["## COCO converter speed", ""] + _run_line(record) + [
        "",
        f"`benchmarks/converter_speed.py`: {record['images']} synthetic images of "
        f"{record['image_size']} px (the {record['dataset']['difficulty']} set, generator "
        f"version {record['dataset']['generator']}) converted by Model Garden's "
        "`create_coco_tf_record --include_masks` and by `maskrcnn_job.data.coco_to_tfrecord`, "
        f"{record['workers']} processes each, each a fresh process timed from start to exit; "
        + (f"{record['repeats']} alternating runs each, the median." if record["repeats"] > 1
           else "one run each."),
        ""]
    rows = []
    for key, label in (("model_garden", "Model Garden `create_coco_tf_record`"),
                       ("ours", "ours, every annotation validated and every image decoded")):
        r = record[key]
        rows.append([label, f"{r['seconds']:.1f} s", f"{r['cpu_seconds']:.1f} s",
                     f"{r['tfrecord_mb']:.1f} MB"])
    lines += _table(["converter", "wall time", "CPU time", "output"], rows)
    all_seconds = record["all_seconds"]
    lines += ["", f"Speed ratio (Model Garden's time / ours): **{record['speed_ratio']:.2f}x**. "
                  "Every run's wall time: Model Garden "
                  + ", ".join(f"{s:.1f}" for s in all_seconds["model_garden"]) + " s; ours "
                  + ", ".join(f"{s:.1f}" for s in all_seconds["ours"]) + " s."]
    return lines


def _number(value, fmt: str = "{:.3f}") -> str:
    return NONE if value is None else fmt.format(value)


def coco_eval_speed_section(record: dict) -> list:
    versions = record["versions"]
    lines = ["## COCO evaluation: pycocotools and faster-coco-eval", ""] + _run_line(record) + [
        "",
        "`benchmarks/coco_eval_speed.py`: the same detections evaluated by "
        f"{versions['pycocotools']} (the reference) and {versions['faster-coco-eval']} through "
        "`maskrcnn_job/evaluation/coco.py`, as the job evaluates: COCOeval's evaluate, accumulate "
        "and summarize, boxes then masks; the wall time is the least of "
        f"{record['repeats']} runs. Compared: the 12 summary numbers per task and, per class, AP, "
        "AP50, AP75, APs, APm, APl and AR100 ([evaluation.md](evaluation.md)). The demo's model's "
        "detections are every detection `maskrcnn_local.predict` gets on the demo's validation "
        "images; the synthetic ones are made from the ground truth of a larger validation set of "
        "the same kind (`maskrcnn_local/synthetic_detections.py`), for the time at scale.", ""]
    rows = []
    for case in record["cases"]:
        seconds = case["seconds"]
        difference = case["max_abs_difference"]
        rows.append([case["name"], case["images"], case["detections"],
                     _number(case["pycocotools"]["segm"]["stats"][0]),
                     _number(case["faster_coco_eval"]["segm"]["stats"][0]),
                     _number(case["pycocotools"]["bbox"]["stats"][0]),
                     _number(case["faster_coco_eval"]["bbox"]["stats"][0]),
                     _number(difference, "{:.1e}"),
                     "yes" if case["equal_at_printed_precision"] else "**no**",
                     f"{seconds['pycocotools']:.3f} s", f"{seconds['faster-coco-eval']:.3f} s",
                     f"{case['speedup']:.1f}x"])
    lines += _table(["detections of", "images", "detections", "mask AP (pycocotools)",
                     "mask AP (faster)", "box AP (pycocotools)", "box AP (faster)",
                     "largest difference", "equal to 3 decimals", "pycocotools", "faster-coco-eval",
                     "speed-up"], rows)
    demo = record.get("demo_run") or {}
    if demo.get("share_of_run") is not None:
        lines += ["", f"In the demo's run, its last evaluation's COCOeval took "
                      f"{demo['last_evaluation_coco_eval_s']:.2f} s (inference "
                      f"{_number(demo.get('last_evaluation_inference_s'), '{:.1f}')} s); at "
                      f"{demo['evaluations']} evaluations that is about "
                      f"{demo['share_of_run']:.1%} of its {demo['run_seconds'] / 60:.1f} min."]
    return lines


def _path_cell(figures: dict) -> str:
    if "failed" in figures:
        return f"failed: {figures['failed']}"
    cell = f"{figures['seconds']:.1f} s, {figures['peak_rss_mb']:,.0f} MB"
    if figures.get("detections") is not None:
        cell += f" ({figures['detections']} detections)"
    return cell


def large_images_section(record: dict) -> list:
    lines = ["## Large images: conversion and predictions", ""] + _run_line(record) + [
        "",
        "`benchmarks/large_images.py`: one JPEG of each size holding the shapes the model "
        f"(`{_shown(record['model'])}`) "
        "was trained on, each path in a fresh process: the converter, `predict` (at score "
        "threshold 0: every detection the model returns pasted onto the whole image, then drawn) "
        "and predict-batch's local path (the masks pasted one at a time, then the "
        "pre-annotations, the ranking and the contact sheet). Each cell is the process's wall "
        "time and peak resident memory, its imports and the model's load included: the "
        "smallest image's row is the floor the others add to.",
        ""]
    rows = []
    for row in record["rows"]:
        megapixels = row["width"] * row["height"] / 1e6
        rows.append([f"{row['width']} x {row['height']} ({megapixels:.1f} MP)",
                     f"{row['jpeg_mb']:.2f} MB", _path_cell(row["convert"]),
                     _path_cell(row["predict"]), _path_cell(row["predict_batch"])])
    return lines + _table(["image", "JPEG", "converter", "`predict`", "predict-batch (local)"],
                          rows)


SECTIONS = (("demo_accuracy", demo_accuracy_section), ("cpu_scaling", cpu_scaling_section),
            ("converter_speed", converter_speed_section),
            ("coco_eval_speed", coco_eval_speed_section),
            ("large_images", large_images_section))


def load(results_dir: str) -> dict:
    """{benchmark: record} of the files found; refuses none, and files of different machines."""
    records = {}
    for name, _ in SECTIONS:
        path = os.path.join(results_dir, f"{name}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                records[name] = json.load(f)
    if not records:
        raise ReportError(f"no benchmark results in {results_dir}: run `make bench`")
    machines = {record["machine"] for record in records.values()}
    if len(machines) > 1:
        raise ReportError(f"{results_dir} holds results of {len(machines)} machines "
                          f"({sorted(machines)}): one run's files only")
    return records


def _baseline_rows(before: dict, after: dict) -> list:
    """(label, before, after, format, is a time) of the figures both runs measured."""
    rows = []
    if "demo_accuracy" in before and "demo_accuracy" in after:
        for key, label in (("eval/segm_AP", "`make demo`'s final mask AP"),
                           ("eval/bbox_AP", "`make demo`'s final box AP")):
            rows.append((label, before["demo_accuracy"]["final"].get(key),
                         after["demo_accuracy"]["final"].get(key), "{:.3f}", False))
        rows.append(("`make demo`'s local run (min)",
                     before["demo_accuracy"]["local_run_seconds"] / 60,
                     after["demo_accuracy"]["local_run_seconds"] / 60, "{:.1f}", True))
    if "cpu_scaling" in before and "cpu_scaling" in after:
        old, new = before["cpu_scaling"]["timing"], after["cpu_scaling"]["timing"]
        for name, ranks, threads in HOROVOD_ONE_HOST:
            if name in old and name in new:
                rows.append((f"Horovod step, {ranks} x {threads} on one host (s)",
                             old[name]["step_s"], new[name]["step_s"], "{:.3f}", True))
        old, new = before["cpu_scaling"]["figures"], after["cpu_scaling"]["figures"]
        for strategy in STRATEGIES:
            if old.get(strategy, {}).get("step_s_2") and new.get(strategy, {}).get("step_s_2"):
                rows.append((f"`{strategy}` worker's step, 2 emulated hosts (s)",
                             old[strategy]["step_s_2"], new[strategy]["step_s_2"], "{:.3f}", True))
    if "converter_speed" in before and "converter_speed" in after:
        rows.append(("converter, ours (s)", before["converter_speed"]["ours"]["seconds"],
                     after["converter_speed"]["ours"]["seconds"], "{:.1f}", True))
    return rows


def baseline_section(before: dict, after: dict, baseline_dir: str) -> list:
    def machine(records: dict) -> str:
        return next(iter(records.values()))["machine"]

    lines = ["## Before and after", "",
             f"The key figures of the baseline in `{baseline_dir}` (measured on "
             f"{machine(before)}) beside this run's ({machine(after)}). A step time more than "
             f"{SLOWER_MARK:.0%} slower is marked; the text around this page says why.", ""]
    out = []
    for label, old, new, fmt, is_time in _baseline_rows(before, after):
        change = NONE
        if old and new is not None:
            change = f"{(new - old) / old:+.0%}"
            if is_time and new > old * (1 + SLOWER_MARK):
                change = f"**{change} slower**"
        out.append([label, _number(old, fmt), _number(new, fmt), change])
    return lines + _table(["figure", "baseline", "this run", "change"], out)


def render(records: dict, results_dir: str, baseline: tuple | None = None) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`benchmarks/report.py`, from the JSON files of one run in "
        f"`{results_dir}`): do not edit it by hand. Each section is one script's run, with its "
        "date, machine and command. The figures are CPU figures of this project's job on a "
        "small synthetic dataset: they compare settings on one machine and predict no GPU "
        "figure (published GPU figures: [training-recipe.md](training-recipe.md)).",
    ]
    if any(record.get("smoke") for record in records.values()):
        lines += ["", "**This page holds a smoke run (marked below): its figures mean nothing. "
                      "`make bench` replaces it with a real run.**"]
    if baseline:
        lines += [""] + baseline_section(baseline[0], records, baseline[1])
    for name, section in SECTIONS:
        if name in records:
            lines += [""] + section(records[name])
    return "\n".join(lines) + "\n"


def _shown(path: str) -> str:
    shown = os.path.abspath(path)
    return os.path.relpath(shown, REPO) if shown.startswith(REPO + os.sep) else shown


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir", nargs="?", default=results.DEFAULT_RESULTS_DIR)
    parser.add_argument("--baseline",
                        help="an earlier run's results directory, set beside this one")
    parser.add_argument("--out", default=os.path.join(REPO, "docs", "benchmarks.md"))
    parser.add_argument("--evaluation-doc",
                        help="also rewrite this page's example (docs/evaluation.md) from the "
                             "demo's evaluation report")
    args = parser.parse_args(argv)
    try:
        records = load(args.results_dir)
        baseline = (load(args.baseline), _shown(args.baseline)) if args.baseline else None
    except ReportError as error:
        print(f"report: {error}", file=sys.stderr)
        return 2
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(render(records, _shown(args.results_dir), baseline))
    print(f"{args.out}: {', '.join(records)}")
    if args.evaluation_doc:
        demo = records.get("demo_accuracy")
        if not demo or "evaluation_report" not in demo:
            print(f"report: {args.results_dir} holds no demo evaluation report for "
                  f"{args.evaluation_doc}", file=sys.stderr)
            return 2
        try:
            write_evaluation_example(args.evaluation_doc, demo)
        except ReportError as error:
            print(f"report: {error}", file=sys.stderr)
            return 2
        print(f"{args.evaluation_doc}: the demo's evaluation report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
