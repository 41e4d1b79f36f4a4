"""`make demo`'s accuracy: the local run with the demo's settings, each of its evaluations, and
the spread of its final AP over repeated runs.

    .venv/bin/python benchmarks/demo_accuracy.py [--work-dir build/bench/demo] [--repeats 5]
        [--results-dir build/bench/results] [--smoke] [-- LOCAL_RUN_ARGS...]

Runs `python -m maskrcnn_local.local_run --draw 0` (what `make demo` runs, without the drawing)
--repeats times, the same command each time: the first in <work-dir>, the others in
<work-dir>-<n>, each run's output kept in its local_run.log (stderr: local_run.stderr.log). Two
ranks' thread scheduling makes the runs differ (the same commit has given mask AP 0.148 to 0.223),
so one run tells a newcomer nothing about a regression: the figures are each run's final metrics and
their mean, standard deviation, least and greatest. Of the first run it also reads each COCO
evaluation the job made from its TensorBoard summaries (eval/* at the step it ran, in
<work-dir>/opt_ml/output/tensorboard) and its last evaluation report (the model's
code/evaluation/report.json: docs/evaluation.md's example). Writes <results-dir>/demo_accuracy.json
(benchmarks/results.py; `make bench` renders it into docs/benchmarks.md and docs/evaluation.md).
Figures only: nothing is asserted. --smoke checks the path (a tiny dataset, 2 epochs, 2 runs: the
figures mean nothing).
"""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

import results

SMOKE_ARGS = ["--train-images", "16", "--val-images", "8", "--image-size", "64",
              "--hp", "epochs=2", "--hp", "lr_decay_epochs=1.5", "--hp", "eval_every_epochs=1",
              "--hp", "warmup_steps=2"]
# The demo's accuracy goal is a mean over 5 runs, with their spread.
REPEATS = 5
SMOKE_REPEATS = 2
SHOWN = ("eval/segm_AP", "eval/segm_AP50", "eval/bbox_AP", "eval/bbox_AP50")
_FINAL = re.compile(r"^(eval/\w+): (\S+)$", re.M)


def _evaluations(tensorboard_dir: str) -> list:
    """[{"step": N, "eval/segm_AP": ..., ...}] from the chief's summaries, by step."""
    import tensorflow as tf

    by_step: dict = {}
    for path in sorted(glob.glob(os.path.join(tensorboard_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag in SHOWN:
                    by_step.setdefault(event.step, {"step": event.step})[value.tag] = float(
                        tf.make_ndarray(value.tensor))
    return [by_step[step] for step in sorted(by_step)]


def _run(work_dir: str, extra: list) -> dict:
    """One local_run in `work_dir`: its final metrics (what it prints once the job has ended)
    and its seconds; raises with the log's tail if it fails."""
    run_args = ["--work-dir", work_dir, "--draw", "0"] + extra
    command = [sys.executable, "-m", "maskrcnn_local.local_run"] + run_args
    started = time.time()
    print("running:", " ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.time() - started
    os.makedirs(work_dir, exist_ok=True)
    log = os.path.join(work_dir, "local_run.log")
    with open(log, "w", encoding="utf-8") as f:
        f.write(result.stdout)
    with open(os.path.join(work_dir, "local_run.stderr.log"), "w", encoding="utf-8") as f:
        f.write(result.stderr)
    if result.returncode != 0:
        raise RuntimeError(f"local_run failed ({result.returncode}), log {log}:\n"
                           f"{result.stdout[-4000:]}\n{result.stderr[-3000:]}")
    printed = result.stdout.rsplit("local run finished", 1)[-1]
    final = {name: float(value) for name, value in _FINAL.findall(printed)}
    print(f"  {seconds / 60:.1f} min: " + ", ".join(
        f"{name} {final[name]:.3f}" for name in SHOWN if name in final), flush=True)
    return {"work_dir": os.path.relpath(work_dir), "final": final,
            "local_run_seconds": round(seconds, 1)}


def spread(runs: list) -> dict:
    """{metric: {mean, stdev, min, max}} of the runs' final metrics (stdev: the sample's, 0 for
    one run)."""
    out = {}
    for name in SHOWN:
        values = [run["final"][name] for run in runs if name in run["final"]]
        if values:
            out[name] = {"mean": statistics.fmean(values),
                         "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
                         "min": min(values), "max": max(values)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default=os.path.join("build", "bench", "demo"),
                        help="the first run's work directory (%(default)s); the others' are "
                             "<work-dir>-2, -3, ...")
    parser.add_argument("--results-dir", default=results.DEFAULT_RESULTS_DIR,
                        help="where demo_accuracy.json goes (%(default)s)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs of the same command (5; --smoke: 2)")
    parser.add_argument("--smoke", action="store_true",
                        help="check the path only: tiny dataset, 2 epochs")
    parser.add_argument("local_run_args", nargs="*", metavar="-- LOCAL_RUN_ARG",
                        help="more local_run arguments, after the demo's and --smoke's (a later "
                             "--hp wins): a run with any is marked a smoke run, not the demo's "
                             "(tests/training/test_evaluation_job.py runs its short run so)")
    args = parser.parse_args(argv)
    args.smoke = args.smoke or bool(args.local_run_args)
    repeats = args.repeats
    if repeats is None:
        repeats = SMOKE_REPEATS if args.smoke else REPEATS
    if repeats < 1:
        parser.error(f"--repeats {repeats}: at least 1")
    from maskrcnn_contract import evaluation_report

    from maskrcnn_local import local_run, synthetic_coco

    extra = (SMOKE_ARGS if args.smoke else []) + args.local_run_args
    settings = local_run.parse_args(["--work-dir", args.work_dir] + extra)
    started = time.time()
    try:
        runs = [_run(args.work_dir if n == 1 else f"{args.work_dir}-{n}", extra)
                for n in range(1, repeats + 1)]
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    opt_ml = os.path.join(args.work_dir, "opt_ml")
    evaluations = _evaluations(os.path.join(opt_ml, "output", "tensorboard"))
    # What the job was given, as SageMaker would have given it.
    with open(os.path.join(opt_ml, "input", "config", "hyperparameters.json"),
              encoding="utf-8") as f:
        hps = json.load(f)
    report = evaluation_report.read(
        os.path.join(opt_ml, "model", evaluation_report.MODEL_REPORT_DIR))
    figures = {
        "hyperparameters": hps, "ranks": settings.ranks,
        "global_batch": int(hps["images_per_gpu"]) * settings.ranks,
        "dataset": {"train_images": settings.train_images, "val_images": settings.val_images,
                    "image_size": settings.image_size, "difficulty": settings.difficulty,
                    "generator": synthetic_coco.VERSION},
        # The first run's, as before repeats were measured (the baseline's figures).
        "evaluations": evaluations, "final": runs[0]["final"],
        "local_run_seconds": runs[0]["local_run_seconds"],
        "evaluation_report": report,
        "runs": runs, "spread": spread(runs)}
    for evaluation in evaluations:
        print(f"step {evaluation['step']}: " + ", ".join(
            f"{name} {evaluation[name]:.3f}" for name in SHOWN if name in evaluation))
    for name, value in figures["spread"].items():
        print(f"{name} over {len(runs)} runs: mean {value['mean']:.3f}, stdev "
              f"{value['stdev']:.3f}, {value['min']:.3f} to {value['max']:.3f}")
    path = results.write(args.results_dir, "demo_accuracy", started, args.smoke, figures)
    print(f"{len(runs)} local runs took {(time.time() - started) / 60:.1f} min; figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
