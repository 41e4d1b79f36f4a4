"""pycocotools' COCOeval, the reference the job's own evaluation (faster-coco-eval) is held to:
an AP our code did not compute."""

import contextlib
import gzip
import io
import json


def read_detections(path) -> list:
    """The COCO results a job's evaluation wrote (detections.json.gz)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def stats(annotation_file, detections: list, kind: str, image_ids=None) -> list:
    """COCOeval's 12 summary figures of `detections` against `annotation_file`, on `image_ids`
    (all the file's images when None); `kind` "bbox" or "segm"."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints as it goes
        truth = COCO(str(annotation_file))
        evaluation = COCOeval(truth, truth.loadRes(detections), iouType=kind)
        if image_ids is not None:
            evaluation.params.imgIds = sorted(image_ids)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return [float(value) for value in evaluation.stats]
