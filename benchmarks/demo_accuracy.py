"""`make demo`'s accuracy: the local run with the demo's settings, and each of its evaluations.

    .venv/bin/python benchmarks/demo_accuracy.py [--work-dir build/bench/demo]
        [--results-dir build/bench/results] [--smoke]

Runs `python -m maskrcnn_local.local_run --draw 0` (what `make demo` runs, without the drawing)
in its own work directory, its output kept in <work-dir>/local_run.log. Then reads each COCO
evaluation the job made from its TensorBoard summaries (eval/* at the step it ran, in
<work-dir>/opt_ml/output/tensorboard) and the final metrics local_run prints, and writes
them to <results-dir>/demo_accuracy.json (benchmarks/results.py; `make bench` renders it into
docs/benchmarks.md). Figures only: nothing is asserted. --smoke checks the path (a tiny dataset,
2 epochs: the figures mean nothing).
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

import results

SMOKE_ARGS = ["--train-images", "16", "--val-images", "8", "--image-size", "64",
              "--hp", "epochs=2", "--hp", "lr_decay_epochs=1.5", "--hp", "eval_every_epochs=1"]
SHOWN = ("eval/segm_AP", "eval/segm_AP50", "eval/bbox_AP", "eval/bbox_AP50")
_FINAL = re.compile(r"^(eval/\w+): (\S+)$", re.M)


def _evaluations(tensorboard_dir: str) -> list:
    """[{"step": N, "eval/segm_AP": ..., ...}] from the chief's summaries, by step."""
    import tensorflow as tf

    by_step = {}
    for path in sorted(glob.glob(os.path.join(tensorboard_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag in SHOWN:
                    by_step.setdefault(event.step, {"step": event.step})[value.tag] = float(
                        tf.make_ndarray(value.tensor))
    return [by_step[step] for step in sorted(by_step)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default=os.path.join("build", "bench", "demo"),
                        help="local_run's work directory (%(default)s)")
    parser.add_argument("--results-dir", default=results.DEFAULT_RESULTS_DIR,
                        help="where demo_accuracy.json goes (%(default)s)")
    parser.add_argument("--smoke", action="store_true",
                        help="check the path only: tiny dataset, 2 epochs")
    args = parser.parse_args(argv)
    from maskrcnn_local import local_run, synthetic_coco

    run_args = ["--work-dir", args.work_dir, "--draw", "0"] + (SMOKE_ARGS if args.smoke else [])
    settings = local_run.parse_args(run_args)
    command = [sys.executable, "-m", "maskrcnn_local.local_run"] + run_args
    started = time.time()
    print("running:", " ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.time() - started
    os.makedirs(args.work_dir, exist_ok=True)
    log = os.path.join(args.work_dir, "local_run.log")
    with open(log, "w", encoding="utf-8") as f:
        f.write(result.stdout + result.stderr)
    if result.returncode != 0:
        print(f"local_run failed ({result.returncode}), log {log}:\n{result.stdout[-4000:]}\n"
              f"{result.stderr[-3000:]}", file=sys.stderr)
        return 1
    # What local_run prints once the job has ended, after its "local run finished" line.
    printed = result.stdout.rsplit("local run finished", 1)[-1]
    final = {name: float(value) for name, value in _FINAL.findall(printed)}
    opt_ml = os.path.join(args.work_dir, "opt_ml")
    evaluations = _evaluations(os.path.join(opt_ml, "output", "tensorboard"))
    # What the job was given, as SageMaker would have given it.
    with open(os.path.join(opt_ml, "input", "config", "hyperparameters.json"),
              encoding="utf-8") as f:
        hps = json.load(f)
    figures = {
        "hyperparameters": hps, "ranks": settings.ranks,
        "global_batch": int(hps["images_per_gpu"]) * settings.ranks,
        "dataset": {"train_images": settings.train_images, "val_images": settings.val_images,
                    "image_size": settings.image_size, "difficulty": settings.difficulty,
                    "generator": synthetic_coco.VERSION},
        "evaluations": evaluations, "final": final, "local_run_seconds": round(seconds, 1)}
    for evaluation in evaluations:
        print(f"step {evaluation['step']}: " + ", ".join(
            f"{name} {evaluation[name]:.3f}" for name in SHOWN if name in evaluation))
    path = results.write(args.results_dir, "demo_accuracy", started, args.smoke, figures)
    print(f"local_run took {seconds / 60:.1f} min; figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
