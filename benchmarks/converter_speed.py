"""COCO -> TFRecord speed: this project's converter next to Model Garden's own, on the same input.

    .venv/bin/python benchmarks/converter_speed.py [--images 2000] [--size 256] [--workers 2]
        [--repeats 3] [--results-dir build/bench/results] [--smoke]

Generates a synthetic COCO split (seeded), then converts it twice, each as a fresh process timed
wall-clock from start to exit (interpreter and imports included, as a staging job pays them):
- Model Garden: `python -m official.vision.data.create_coco_tf_record --include_masks`
  with --num_processes WORKERS;
- ours: `python -m maskrcnn_job.data.coco_to_tfrecord --workers WORKERS --splits train`, which also
  validates every annotation and decodes every image once.
Each runs --repeats times, alternating (so that a busy moment hits both), and the median counts.
Prints both times, CPU seconds, and the speed ratio (Model Garden's time / ours), and writes them
to <results-dir>/converter_speed.json (benchmarks/results.py; `make bench` renders it into
docs/benchmarks.md). Figures only: nothing is asserted. --smoke checks the path (50 images, one
run each: the figures mean nothing).
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import results

DIFFICULTY = "easy"


def _timed(command, env) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.time() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}"
                           f"\n{result.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": seconds, "cpu_seconds": cpu}


def _tfrecord_bytes(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(directory)
               for f in files if ".tfrecord" in f)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work-dir", default=None, help="kept if given; a temporary one if not")
    parser.add_argument("--results-dir", default=results.DEFAULT_RESULTS_DIR,
                        help="where converter_speed.json goes (%(default)s)")
    parser.add_argument("--smoke", action="store_true",
                        help="check the path only: 50 images, one run each")
    args = parser.parse_args(argv)
    if args.smoke:
        args.images, args.repeats = 50, 1
    from maskrcnn_local import synthetic_coco

    started = time.time()

    work = args.work_dir or tempfile.mkdtemp(prefix="converter-bench-")
    coco = os.path.join(work, "coco")
    if not os.path.exists(os.path.join(coco, "annotations", "instances_train2017.json")):
        shutil.rmtree(coco, ignore_errors=True)
        # The easy set: polygons, as most of COCO's masks are.
        synthetic_coco.generate(coco, args.images, 1, args.size, difficulty=DIFFICULTY)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    outputs = {name: os.path.join(work, name) for name in ("model_garden", "ours")}
    commands = {
        "model_garden": [
            sys.executable, "-m", "official.vision.data.create_coco_tf_record", "--logtostderr",
            f"--image_dir={coco}/train2017",
            f"--object_annotations_file={coco}/annotations/instances_train2017.json",
            f"--output_file_prefix={outputs['model_garden']}/train", "--num_shards=4",
            "--include_masks=True", f"--num_processes={args.workers}"],
        "ours": [
            sys.executable, "-m", "maskrcnn_job.data.coco_to_tfrecord", coco, outputs["ours"],
            "--splits", "train", "--workers", str(args.workers)],
    }
    runs: dict = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, command in commands.items():
            shutil.rmtree(outputs[name], ignore_errors=True)
            os.makedirs(outputs[name])
            runs[name].append(_timed(command, env))
    garden, ours = (sorted(runs[n], key=lambda r: r["seconds"])[len(runs[n]) // 2]
                    for n in ("model_garden", "ours"))
    figures = {
        "images": args.images, "image_size": args.size, "workers": args.workers,
        "repeats": args.repeats,
        "dataset": {"difficulty": DIFFICULTY, "generator": synthetic_coco.VERSION},
        "all_seconds": {n: [round(r["seconds"], 2) for r in runs[n]] for n in runs},
        "cores": os.cpu_count(),
        "model_garden": dict(garden, tfrecord_mb=round(_tfrecord_bytes(outputs["model_garden"])
                                                       / 1e6, 1)),
        "ours": dict(ours, tfrecord_mb=round(_tfrecord_bytes(outputs["ours"]) / 1e6, 1)),
        "speed_ratio": round(garden["seconds"] / ours["seconds"], 2),
    }
    print(f"medians of {args.repeats} runs each:")
    print(f"Model Garden create_coco_tf_record: {garden['seconds']:.1f} s "
          f"({garden['cpu_seconds']:.1f} CPU s)")
    print(f"ours (validated, every image decoded): {ours['seconds']:.1f} s "
          f"({ours['cpu_seconds']:.1f} CPU s)")
    print(f"speed ratio (Model Garden time / ours): {figures['speed_ratio']:.2f}x "
          f"({args.images} images of {args.size} px, {args.workers} processes)")
    path = results.write(args.results_dir, "converter_speed", started, args.smoke, figures)
    print(f"figures: {path}")
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
