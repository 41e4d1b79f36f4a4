"""The exported model on images: pictures of its predictions and a COCO results file.

    python -m maskrcnn_local.predict MODEL IMAGE_OR_DIRECTORY... [--out build/predictions]
        [--annotations instances_val2017.json] [--compare N] [--score-threshold 0.3]

MODEL is what the training job wrote: its model directory (1/ and code/), the version directory
1/, or the model.tar.gz SageMaker uploaded. Each image goes through the SavedModel's
`serving_bytes` signature and the endpoint's own post-processing
(maskrcnn_job/serving/endpoint_handler.py), so the pictures show what the endpoint would answer.
Writes, under --out:
- <image name>.png: the image with masks, boxes, class names and scores drawn on it;
- detections.json: COCO results (image_id, category_id, bbox, score, RLE segmentation), which
  pycocotools' COCO.loadRes reads;
- with --annotations (the images' COCO annotation file, for their ids and ground truth) and
  --compare N: ground_truth_vs_predictions.png, ground truth left and predictions right for the
  first N images;
- with --annotations: evaluation/, the evaluation report of these detections on these images
  (report.json: per-class AP, precision-recall curves, confusion matrix, score thresholds; its
  pictures), as the training job writes it (docs/evaluation.md).
"""

import argparse
import contextlib
import io
import json
import os
import tarfile
import tempfile
from typing import Dict, List, Optional, Sequence

import numpy as np
from PIL import Image, ImageOps

from maskrcnn_job.serving import endpoint_handler, export
from maskrcnn_local import drawing

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
COMPARISON_FILE = "ground_truth_vs_predictions.png"
RESULTS_FILE = "detections.json"
REPORT_DIR = "evaluation"


class PredictError(ValueError):
    """Bad input to predict: the message names the value."""


def _model_paths(model: str, scratch: str):
    """(SavedModel directory, categories or None) for any of the accepted forms of MODEL."""
    if os.path.isfile(model) and model.endswith((".tar.gz", ".tgz")):
        with tarfile.open(model) as archive:
            archive.extractall(scratch, filter="data")
        model = scratch
    if not os.path.isdir(model):
        raise PredictError(f"model {model!r} is neither a directory nor a model.tar.gz")
    if os.path.isfile(os.path.join(model, "saved_model.pb")):
        saved_model, model_dir = model, os.path.dirname(os.path.abspath(model))
    else:
        saved_model = os.path.join(model, export.SERVING_VERSION)
        model_dir = model
        if not os.path.isfile(os.path.join(saved_model, "saved_model.pb")):
            raise PredictError(f"model {model!r} holds no SavedModel (no saved_model.pb in it or "
                               f"in {export.SERVING_VERSION}/): pass the job's model directory")
    categories_file = os.path.join(model_dir, export.CODE_DIR, "categories.json")
    categories = None
    if os.path.isfile(categories_file):
        with open(categories_file, encoding="utf-8") as f:
            categories = json.load(f)
    return saved_model, categories


def image_files(paths: Sequence[str]) -> List[str]:
    """Images named, and the images in directories named, sorted within each directory; each
    one checked to decode, so that a bad file is named here and not by TensorFlow's decoder."""
    found = []
    for path in paths:
        if os.path.isdir(path):
            inside = sorted(os.path.join(path, n) for n in os.listdir(path)
                            if n.lower().endswith(IMAGE_SUFFIXES))
            if not inside:
                raise PredictError(f"directory {path!r} holds no {'/'.join(IMAGE_SUFFIXES)} image")
            found += inside
        elif os.path.isfile(path):
            found.append(path)
        else:
            raise PredictError(f"image {path!r} does not exist")
    if not found:
        raise PredictError("no image given: name image files or directories of them")
    for path in found:
        _check_decodes(path)
    return found


def _check_decodes(path: str) -> None:
    if os.path.getsize(path) == 0:
        raise PredictError(f"image {path!r} is empty")
    try:
        with Image.open(path) as image:
            image_format = image.format
            image.load()
    except Exception as error:  # noqa: BLE001  (Pillow raises OSError, SyntaxError, ValueError...)
        raise PredictError(f"image {path!r} cannot be decoded ({type(error).__name__}: "
                           f"{error}); the model takes JPEG or PNG files") from None
    if image_format not in ("JPEG", "PNG"):
        raise PredictError(f"image {path!r} is {image_format}; the model takes JPEG or PNG files")


class Predictor:
    """The SavedModel's serving_bytes signature, answering as the endpoint does."""

    def __init__(self, saved_model_dir: str, categories: Optional[List[Dict]],
                 score_threshold: float):
        import tensorflow as tf

        self._tf = tf
        self._signature = tf.saved_model.load(saved_model_dir).signatures[
            endpoint_handler.SIGNATURE]
        # Keyed by the model's class ids (1..K); the answers and self.names by the dataset's own
        # (source_id, where categories.json has one).
        self._class_names = {int(c["id"]): c["name"] for c in categories or []}
        self.source_ids = {int(c["id"]): int(c.get("source_id", c["id"]))
                           for c in categories or []}
        self.names = {self.source_ids[i]: name for i, name in self._class_names.items()}
        self.score_threshold = score_threshold

    def tfs_prediction(self, image_bytes: bytes) -> Dict:
        """One instance of TensorFlow Serving's row-format answer: {output name: list}."""
        outputs = self._signature(inputs=self._tf.constant([image_bytes]))
        return {name: value.numpy()[0].tolist() for name, value in outputs.items()}

    def __call__(self, image_bytes: bytes) -> Dict:
        """The endpoint's JSON object for one image (endpoint_handler.detections)."""
        return endpoint_handler.detections(self.tfs_prediction(image_bytes), self.score_threshold,
                                          self._class_names, self.source_ids)


def pasted_instances(answer: Dict) -> List[Dict]:
    """The endpoint's detections with their 28x28 box masks pasted onto the image as booleans,
    by Model Garden's paste_instance_masks (what its COCO evaluator does)."""
    from official.vision.ops import mask_ops

    detections = answer["detections"]
    if not detections:
        return []
    height, width = answer["image_size"]
    boxes = np.array([d["bbox"] for d in detections], np.float32)
    masks = np.array([d["mask"] for d in detections], np.float32)
    pasted = mask_ops.paste_instance_masks(masks, boxes, height, width)
    return [dict(d, mask=m.astype(bool)) for d, m in zip(detections, pasted)]


def coco_results(image_id: int, instances: Sequence[Dict]) -> List[Dict]:
    from pycocotools import mask as mask_api

    results = []
    for instance in instances:
        rle = mask_api.encode(np.asfortranarray(instance["mask"].astype(np.uint8)))
        rle["counts"] = rle["counts"].decode("ascii")
        results.append({"image_id": image_id, "category_id": instance["category_id"],
                        "bbox": instance["bbox"], "score": instance["score"],
                        "segmentation": rle})
    return results


def ground_truth_instances(coco, image_id: int) -> List[Dict]:
    """The image's annotations as drawing instances; crowd regions included, as COCO shows them."""
    return [{"bbox": a["bbox"], "category_id": a["category_id"], "mask": coco.annToMask(a) > 0}
            for a in coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))]


def image_ids(files: Sequence[str], coco=None) -> List[int]:
    """The COCO image id of each file in the results: the annotation file's (`coco`), else the
    file name's digits when every name is a distinct number, else 1..N in order."""
    if coco is None:
        # COCO's file names are their ids (000000139.jpg); otherwise number them.
        stems = [os.path.splitext(os.path.basename(f))[0] for f in files]
        if all(s.isdigit() for s in stems) and len(set(stems)) == len(stems):
            return [int(s) for s in stems]
        return list(range(1, len(files) + 1))
    by_name = {img["file_name"]: img["id"] for img in coco.dataset["images"]}
    missing = [os.path.basename(f) for f in files if os.path.basename(f) not in by_name]
    if missing:
        raise PredictError(f"images not in the annotations file: {missing[:3]}"
                           f"{' ...' if len(missing) > 3 else ''}")
    return [by_name[os.path.basename(f)] for f in files]


def predict(model: str, images: Sequence[str], out_dir: str, annotations: Optional[str] = None,
            compare: int = 0, score_threshold: float = endpoint_handler.DEFAULT_SCORE_THRESHOLD
            ) -> Dict[str, str]:
    """Writes the pictures and the results; returns {"results": path, "comparison": path or
    absent, "images": out_dir}."""
    if not 0.0 <= score_threshold <= 1.0:
        raise PredictError(f"--score-threshold {score_threshold} is outside [0, 1]")
    if compare and not annotations:
        raise PredictError("--compare needs --annotations: the ground truth comes from there")
    files = image_files(images)
    coco = None
    if annotations:
        from pycocotools.coco import COCO

        if not os.path.isfile(annotations):
            raise PredictError(f"annotations {annotations!r} do not exist")
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools' "loading annotations"
            coco = COCO(annotations)
    ids = image_ids(files, coco)
    with tempfile.TemporaryDirectory() as scratch:
        saved_model, categories = _model_paths(model, scratch)
        if categories is None and coco is not None:
            categories = coco.dataset["categories"]
        predictor = Predictor(saved_model, categories, score_threshold)
        os.makedirs(out_dir, exist_ok=True)
        results, pairs = [], []
        for index, (path, image_id) in enumerate(zip(files, ids)):
            with open(path, "rb") as f:
                encoded = f.read()
            instances = pasted_instances(predictor(encoded))
            results += coco_results(image_id, instances)
            # Upright, as the model answered it (serving/orientation.py) and people see it.
            image = ImageOps.exif_transpose(Image.open(path))
            name = os.path.splitext(os.path.basename(path))[0]
            drawn = drawing.draw_instances(image, instances, predictor.names,
                                           title=f"predicted ({len(instances)})")
            drawn.save(os.path.join(out_dir, f"{name}.png"))
            if index < compare:
                truth = ground_truth_instances(coco, image_id)
                # Named by the annotation file's own categories (its ids may be the model's).
                assert coco is not None  # --compare needs --annotations
                truth_names = {int(c["id"]): c["name"] for c in coco.dataset["categories"]}
                pairs.append((drawing.draw_instances(image, truth, truth_names,
                                                     title=f"ground truth ({len(truth)})"), drawn))
    written = {"images": out_dir, "results": os.path.join(out_dir, RESULTS_FILE)}
    with open(written["results"] + ".tmp", "w", encoding="utf-8") as f:
        json.dump(results, f)
    os.replace(written["results"] + ".tmp", written["results"])
    if pairs:
        written["comparison"] = os.path.join(out_dir, COMPARISON_FILE)
        drawing.grid(pairs).save(written["comparison"])
    if coco is not None:
        written["report"] = evaluation_report(coco, results, ids, categories,
                                              os.path.join(out_dir, REPORT_DIR))
    return written


def evaluation_report(coco, results: List[Dict], image_ids: Sequence[int],
                      categories: Optional[List[Dict]], out_dir: str) -> str:
    """The evaluation report of `results` on the images `image_ids` of `coco` (the ground truth)
    into `out_dir`, as the job writes it (maskrcnn_job/evaluation); returns report.json's path."""
    from maskrcnn_job.evaluation import coco as coco_evaluation
    from maskrcnn_job.evaluation import report

    coco_dt = coco_evaluation.load_results(coco, results)
    evaluator = coco_evaluation.default_evaluator()
    evaluations = {kind: coco_evaluation.run(coco, coco_dt, kind, image_ids, evaluator,
                                             print_function=None)
                   for kind in coco_evaluation.IOU_TYPES}
    names = report.category_names(evaluations["segm"].params.catIds, categories,
                                  coco.dataset.get("categories"))
    built = report.build(evaluations, names, evaluator=coco_evaluation.describe(evaluator))
    return report.write(built, out_dir)["report"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="the job's model directory, its 1/, or model.tar.gz")
    parser.add_argument("images", nargs="+", help="image files or directories of them")
    parser.add_argument("--out", default="build/predictions", help="output directory")
    parser.add_argument("--annotations",
                        help="the images' COCO annotation file (ids, ground truth)")
    parser.add_argument("--compare", type=int, default=0,
                        help="draw ground truth beside predictions for the first N images")
    parser.add_argument("--score-threshold", type=float,
                        default=endpoint_handler.DEFAULT_SCORE_THRESHOLD)
    args = parser.parse_args(argv)
    try:
        written = predict(args.model, args.images, args.out, args.annotations, args.compare,
                          args.score_threshold)
    except PredictError as error:
        parser.error(str(error))
    print(f"pictures: {written['images']}")
    print(f"COCO results: {written['results']}")
    if "comparison" in written:
        print(f"ground truth vs predictions: {written['comparison']}")
    if "report" in written:
        from maskrcnn_job.evaluation import report

        print("\n".join(report.table(report.read(written["report"]))))
        print(f"evaluation report: {written['report']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
