"""predict-batch on this machine, over a folder: every image through the model the way a Batch
Transform sends it (maskrcnn_local/batch_transform.py: one image per request through the
TensorFlow Serving container's path, the score threshold in the container's environment),
assembled as the launcher assembles a transform's answers and handed back to labeling the same way
(maskrcnn_launcher.labeling: predictions.json, images.json, summary.json; the pre-annotations, with
Label Studio's local files; the ranking and its contact sheet). The loop's local round
(docs/labeling.md, "The loop").

    python -m maskrcnn_local.predict_batch MODEL_DIR FOLDER [--out DIR] [--score-threshold X]
        [--top N] [--label-studio-root DIR]

MODEL_DIR: a job's model directory (1/ and code/, e.g. <work dir>/opt_ml/model of local_run).
FOLDER: the images, subfolders included (JPEG, PNG). --label-studio-root: Label Studio's
LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT, a folder above FOLDER (default: FOLDER's parent).
Exit status 2 with a message naming the bad value; 1 when no image could be predicted, naming each
and why (the run's summary.json lists them too; no hand-off is written). An image that fails
while others are predicted is named on stderr, and the run goes on, as the transform's.
"""

import argparse
import json
import os
import sys
from typing import Dict, List, Optional, Tuple

from maskrcnn_contract.evaluation_report import MODEL_REPORT_DIR, REPORT_FILE

from maskrcnn_job.serving import endpoint_handler
from maskrcnn_launcher.labeling import handoff, predictions
from maskrcnn_launcher.labeling.batch_plan import CONTENT_TYPE, IMAGE_SUFFIXES  # the transform's


class PredictBatchError(ValueError):
    """Bad input: the message names the value."""


class NothingPredicted(Exception):
    """Every image failed: `failed` names each and why ({"file_name", "reason"})."""

    def __init__(self, failed: List[Dict], out_dir: str):
        super().__init__(f"no image predicted: all {len(failed)} failed "
                         f"({os.path.join(out_dir, predictions.SUMMARY_FILE)} lists them)")
        self.failed = failed


def failure_lines(failed: List[Dict]) -> List[str]:
    return [f"  {item['file_name']}: {item['reason']}" for item in failed]


def image_names(folder: str) -> List[str]:
    """The images below `folder`, as paths relative to it ('/'-separated), sorted."""
    if not os.path.isdir(folder):
        raise PredictBatchError(f"folder {folder!r} does not exist")
    found = []
    for root, _, files in os.walk(folder):
        for name in files:
            if name.lower().endswith(IMAGE_SUFFIXES):
                found.append(os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/"))
    if not found:
        raise PredictBatchError(f"folder {folder!r} holds no {'/'.join(IMAGE_SUFFIXES)} image")
    return sorted(found)


def _model(model_dir: str) -> Tuple[List[Dict], Optional[Dict]]:
    """The model's categories (the dataset's own ids and names) and its evaluation report, if
    any."""
    code = os.path.join(model_dir, "code")
    categories_file = os.path.join(code, endpoint_handler.CATEGORIES_FILE)
    if not os.path.isfile(categories_file):
        raise PredictBatchError(f"model {model_dir!r}: no code/{endpoint_handler.CATEGORIES_FILE}"
                                " (pass the job's model directory: 1/ and code/)")
    with open(categories_file, encoding="utf-8") as f:
        categories = [{"id": int(c.get("source_id", c["id"])), "name": c["name"]}
                      for c in json.load(f)]
    report_file = os.path.join(model_dir, MODEL_REPORT_DIR, REPORT_FILE)
    report = None
    if os.path.isfile(report_file):
        with open(report_file, encoding="utf-8") as f:
            report = json.load(f)
    return categories, report


def run(model_dir: str, folder: str, out_dir: str,
        score_threshold: float = endpoint_handler.DEFAULT_SCORE_THRESHOLD,
        top: int = handoff.DEFAULT_TOP, local_files_root: Optional[str] = None,
        echo=print) -> Tuple[predictions.Predictions, handoff.Handoff]:
    """Predicts every image of `folder`; writes the run and its hand-off to `out_dir`."""
    if not 0 <= score_threshold <= 1:
        raise PredictBatchError(f"--score-threshold {score_threshold}: expected 0 to 1")
    if top < 1:
        raise PredictBatchError(f"--top {top}: expected at least 1")
    folder = os.path.abspath(folder)
    names = image_names(folder)
    categories, report = _model(model_dir)
    # TensorFlow and Model Garden load here, once every value has been checked.
    from maskrcnn_local import batch_transform

    served = batch_transform.serve(model_dir)
    environment = {endpoint_handler.SCORE_THRESHOLD_ENV: repr(float(score_threshold))}
    images: List[Dict]
    images, results, failed = [], [], []
    for number, name in enumerate(names, 1):
        with open(os.path.join(folder, name), "rb") as f:
            body = f.read()
        try:
            text, _ = batch_transform.answer(served, body, CONTENT_TYPE, environment=environment)
        except Exception as error:  # noqa: BLE001  (as the transform: an image fails, not the run)
            failed.append({"file_name": name, "reason": f"{type(error).__name__}: {error}"})
            continue
        answer = json.loads(text)
        height, width = answer["image_size"]
        image_id = len(images) + 1
        images.append({"id": image_id, "file_name": name, "height": int(height),
                       "width": int(width)})
        results += predictions.results_of(answer, image_id)
        if number % 50 == 0 or number == len(names):
            echo(f"predicted {number}/{len(names)} images")
    run_ = predictions.Predictions(images=images, categories=categories, results=results,
                                   model=os.path.abspath(model_dir), source=folder,
                                   score_threshold=float(score_threshold), failed=failed)
    run_.write(out_dir)
    if not images:
        raise NothingPredicted(failed, out_dir)

    def read_image(file_name: str) -> bytes:
        with open(os.path.join(folder, file_name), "rb") as f:
            return f.read()

    handed = handoff.write(run_, report, read_image, out_dir, top,
                           local_files_root or os.path.dirname(folder))
    return run_, handed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m maskrcnn_local.predict_batch",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("folder")
    parser.add_argument("--out", default="build/predictions-batch")
    parser.add_argument("--score-threshold", type=float,
                        default=endpoint_handler.DEFAULT_SCORE_THRESHOLD)
    parser.add_argument("--top", type=int, default=handoff.DEFAULT_TOP)
    parser.add_argument("--label-studio-root")
    args = parser.parse_args(argv)
    try:
        run_, handed = run(args.model_dir, args.folder, args.out, args.score_threshold, args.top,
                           args.label_studio_root)
    except NothingPredicted as error:
        print("\n".join([f"error: {error}:"] + failure_lines(error.failed)), file=sys.stderr)
        return 1
    except (PredictBatchError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = run_.summary()
    print(f"{summary['images_predicted']} of {summary['images']} images predicted, "
          f"{summary['detections']} detections at score >= {summary['score_threshold']}")
    if run_.failed:
        print("\n".join([f"{len(run_.failed)} image(s) failed:"] + failure_lines(run_.failed)),
              file=sys.stderr)
    for line in handoff.next_steps(handed, os.path.abspath(args.out)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
