"""What a large image costs: the converter (`maskrcnn_job.data.coco_to_tfrecord`), `predict` and
predict-batch's local path (`maskrcnn_local.predict_batch`) on one photo-like image of each size,
each path in a fresh process: its wall time, the path's own time (imports and model load left
out), CPU time and peak memory (resident set, the process's high-water mark).

    .venv/bin/python benchmarks/large_images.py --model DIR [--sizes 640x480,1920x1080,...]
        [--work-dir build/bench/large-images] [--results-dir build/bench/results] [--smoke]

--model: a model directory the job wrote (1/ and code/); `make bench` passes the demo's
(demo_accuracy.py's first run). The image of each size holds the shapes the model was trained
on (maskrcnn_local/synthetic_coco.py's real layout: an RGB JPEG, with its annotation file). The
predictions are asked at score threshold 0: every detection the model returns above its
detection generator's own cut is pasted onto the whole image, by Model Garden's paste in
`predict` (an image-sized mask each, all at once) and one at a time in predict-batch. Each
figure includes what the process imported (TensorFlow for the predictions) and the model's load,
so the smallest image's row is the floor the others add to. Writes
<results-dir>/large_images.json (benchmarks/results.py). Figures only: nothing is asserted.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import results

DEFAULT_SIZES = "640x480,1920x1080,4032x3024,8000x6000"
SMOKE_SIZES = "320x240"
PATHS = ("convert", "predict", "predict_batch")


def _dataset(folder: str, width: int, height: int, model: str, seed: int) -> None:
    """One image of `width` x `height` with the shapes the model was trained on (synthetic_coco's
    real layout, one RGB JPEG of exactly that size) in <folder>/images, and its COCO annotation
    file <folder>/annotations.json."""
    import math

    from maskrcnn_local import synthetic_coco

    with open(os.path.join(model, "code", "run_info.json"), encoding="utf-8") as f:
        info = json.load(f)
    easy = [c["name"] for c in info["categories"]] == \
        [c["name"] for c in synthetic_coco.EASY_CATEGORIES]
    ratio = max(width, height) / info["image_size"]
    divisor = math.gcd(width, height)
    layout = synthetic_coco.RealLayout(long_side=(ratio, ratio),
                                       aspects=((width // divisor, height // divisor),),
                                       gray_fraction=0, png_fraction=0, exif_fraction=0)
    generated = os.path.join(folder, "generated")
    splits = synthetic_coco.generate(generated, num_train=1, num_val=1,
                                     image_size=info["image_size"],
                                     difficulty="easy" if easy else "hard", seed=seed, real=layout)
    val = splits["val"]
    image, = val["images"]
    assert (image["width"], image["height"]) == (width, height), image
    os.makedirs(os.path.join(folder, "images"), exist_ok=True)
    shutil.copy(os.path.join(generated, "val2017", image["file_name"]),
                os.path.join(folder, "images", image["file_name"]))
    with open(os.path.join(folder, "annotations.json"), "w", encoding="utf-8") as f:
        json.dump(val, f)


def _measure(path: str, folder: str, model: str) -> dict:
    """One path on the image in `folder`, in this process (run by main in a fresh one)."""
    started = time.time()
    images = os.path.join(folder, "images")
    out = os.path.join(folder, f"out-{path}")
    detections = None
    if path == "convert":
        from maskrcnn_job.data import coco_to_tfrecord

        began = time.time()
        coco_to_tfrecord.convert_split(os.path.join(folder, "annotations.json"), images, out,
                                       "train", progress=False)
    elif path == "predict":
        from maskrcnn_local import predict

        began = time.time()
        written = predict.predict(model, [os.path.join(images, name)
                                          for name in sorted(os.listdir(images))], out,
                                  score_threshold=0.0)
        with open(written["results"], encoding="utf-8") as f:
            detections = len(json.load(f))
    else:
        from maskrcnn_local import predict_batch

        began = time.time()
        run, _ = predict_batch.run(model, images, out, score_threshold=0.0,
                                   echo=lambda line: None)
        detections = len(run.results)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"seconds": round(time.time() - started, 2),
            "path_seconds": round(time.time() - began, 2),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": _peak_rss_mb(), "detections": detections}


def _peak_rss_mb() -> float:
    """This process's resident high-water mark since its exec (VmHWM): getrusage's ru_maxrss
    would also count the parent's memory at the fork (Linux carries the forked copy's mark over
    the exec)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmHWM in /proc/self/status")


def _size(text: str) -> tuple:
    width, height = (int(v) for v in text.lower().split("x"))
    return width, height


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="the job's model directory (1/ and code/)")
    parser.add_argument("--sizes", default=None, help=f"WxH,... ({DEFAULT_SIZES})")
    parser.add_argument("--work-dir", default=os.path.join("build", "bench", "large-images"))
    parser.add_argument("--results-dir", default=results.DEFAULT_RESULTS_DIR)
    parser.add_argument("--smoke", action="store_true", help=f"sizes {SMOKE_SIZES}: the path only")
    parser.add_argument("--measure", nargs=2, metavar=("PATH", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(_measure(args.measure[0], args.measure[1], args.model)))
        return 0
    if not args.model or not os.path.isfile(os.path.join(args.model, "code", "categories.json")):
        parser.error(f"--model {args.model!r}: expected the job's model directory "
                     "(1/ and code/categories.json)")
    try:
        sizes = [_size(s) for s in (args.sizes or (SMOKE_SIZES if args.smoke
                                                   else DEFAULT_SIZES)).split(",")]
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}: expected WIDTHxHEIGHT,...")
    # The launcher's package beside the job's, as predict_batch runs from notebooks/
    # (docs/labeling.md).
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join(
        p for p in (os.path.join(results.REPO, "notebooks"), os.environ.get("PYTHONPATH")) if p))
    started = time.time()
    rows = []
    for index, (width, height) in enumerate(sizes):
        folder = os.path.abspath(os.path.join(args.work_dir, f"{width}x{height}"))
        shutil.rmtree(folder, ignore_errors=True)
        _dataset(folder, width, height, args.model, seed=index)
        image, = os.listdir(os.path.join(folder, "images"))
        row = {"width": width, "height": height,
               "jpeg_mb": round(os.path.getsize(os.path.join(folder, "images", image)) / 1e6, 2)}
        for path in PATHS:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--model",
                                   os.path.abspath(args.model), "--measure", path, folder],
                                  capture_output=True, text=True, env=env)
            if done.returncode != 0:
                row[path] = {"failed": done.stderr.strip().splitlines()[-1][:300]}
            else:
                row[path] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{width}x{height} {path}: {row[path]}", flush=True)
        rows.append(row)
    results.write(args.results_dir, "large_images", started, args.smoke,
                  {"model": os.path.abspath(args.model), "rows": rows})
    failed = [f"{row['width']}x{row['height']} {path}" for row in rows for path in PATHS
              if "failed" in row[path]]
    if failed:
        # A full run records what a size costs, out of memory included; a smoke run checks the
        # path, so a failure there is the script's.
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed and args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
