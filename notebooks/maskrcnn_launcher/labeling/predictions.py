"""A predictions run: what the model found in a set of images, in COCO's own formats.

A predictions run below `s3://<bucket>/<output prefix>predictions/<name>/` (or a local folder)
holds
- PREDICTIONS_FILE: COCO's results format (what pycocotools' `COCO.loadRes` and every COCO tool
  read): one object per detection, {"image_id", "category_id" (the source dataset's own id),
  "bbox" [x, y, width, height] in image pixels, "score", "segmentation" (a compressed RLE of the
  image's size, pycocotools' `mask.encode` with `counts` as text)}, plus "category_name";
- IMAGES_FILE: a COCO file without annotations ({"info", "images", "categories"}): each image's
  id, `file_name` (its key relative to the input prefix), height and width, and the dataset's
  categories, so `COCO(IMAGES_FILE).loadRes(PREDICTIONS_FILE)` loads the run;
- SUMMARY_FILE: the counts (`Predictions.summary`), the images that failed and why.

The detections are the serving handler's answers (training_code/maskrcnn_job/serving/
endpoint_handler.py: a 28 x 28 mask of probabilities over each box), each mask pasted into the
image at its box as Model Garden pastes one (`mask_of`) and kept where its probability is at least
MASK_THRESHOLD.
"""

import dataclasses
import json
import math
import os
from typing import Dict, List

PREDICTIONS_FILE = "predictions.json"
IMAGES_FILE = "images.json"
SUMMARY_FILE = "summary.json"
MASK_THRESHOLD = 0.5


@dataclasses.dataclass
class Predictions:
    """One predictions run, as read from or written to its folder."""

    images: List[Dict]           # COCO images: id, file_name, height, width
    categories: List[Dict]       # the dataset's: id, name
    results: List[Dict]          # COCO results (the module's docstring)
    model: str                   # what predicted: the training job, or the model package version
    source: str                  # the input prefix (s3://...) or folder
    score_threshold: float       # detections below it were not kept
    failed: List[Dict] = dataclasses.field(default_factory=list)  # {"file_name", "reason"}

    def category_names(self) -> Dict[int, str]:
        return {int(c["id"]): c["name"] for c in self.categories}

    def by_image(self) -> Dict[int, List[Dict]]:
        """{image id: its detections, highest score first}, every image present."""
        found: Dict[int, List[Dict]] = {image["id"]: [] for image in self.images}
        for result in self.results:
            found[result["image_id"]].append(result)
        for detections in found.values():
            detections.sort(key=lambda r: -r["score"])
        return found

    def summary(self) -> Dict:
        """Images, detections per class, images with none, failed images."""
        names = self.category_names()
        per_class = {name: 0 for name in names.values()}
        for result in self.results:
            per_class[names[result["category_id"]]] += 1
        found = self.by_image()
        empty = [image["file_name"] for image in self.images if not found[image["id"]]]
        return {"model": self.model, "source": self.source,
                "score_threshold": self.score_threshold,
                "images": len(self.images) + len(self.failed),
                "images_predicted": len(self.images), "detections": len(self.results),
                "detections_per_class": per_class, "images_without_detections": empty,
                "failed_images": list(self.failed)}

    def write(self, folder: str) -> List[str]:
        """The run's three files in `folder`; their paths."""
        os.makedirs(folder, exist_ok=True)
        files = {PREDICTIONS_FILE: self.results,
                 IMAGES_FILE: {"info": {"description": f"predictions of {self.model}",
                                        "model": self.model, "source": self.source,
                                        "score_threshold": self.score_threshold},
                               "images": self.images, "categories": self.categories},
                 SUMMARY_FILE: self.summary()}
        paths = []
        for name, content in files.items():
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(content, f)
            paths.append(path)
        return paths


def read(folder: str) -> Predictions:
    """The run written in `folder` by `Predictions.write`."""
    def load(name):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            return json.load(f)
    images, summary = load(IMAGES_FILE), load(SUMMARY_FILE)
    return Predictions(images=images["images"], categories=images["categories"],
                       results=load(PREDICTIONS_FILE), model=images["info"]["model"],
                       source=images["info"]["source"],
                       score_threshold=images["info"]["score_threshold"],
                       failed=summary["failed_images"])


def box_pixels(bbox, height: int, width: int):
    """The whole pixels a box [x, y, w, h] covers, clipped to the image: (x0, y0, x1, y1), x1 and y1
    exclusive; the drawing's rounding (floor of the corner, ceiling of the size)."""
    x, y, w, h = bbox
    x0, y0 = int(math.floor(x)), int(math.floor(y))
    x1, y1 = x0 + max(1, int(math.ceil(w))), y0 + max(1, int(math.ceil(h)))
    return max(0, x0), max(0, y0), min(width, x1), min(height, y1)


def _cells(first: int, last: int, start: float, size: float, cells: int):
    """For the pixels first..last-1 of one axis: the mask cell (of the mask padded with one cell of
    zeros) just below each pixel's centre, and the centre's fraction of the way to the next."""
    import numpy as np

    # The mask's n cells spread evenly over the box, cell k's centre at start + (k + 0.5) * size
    # / n (ROIAlign's sampling), shifted by the one cell of padding.
    t = np.clip((np.arange(first, last) + 0.5 - start) * cells / size + 0.5, 0, cells + 1)
    low = np.minimum(np.floor(t).astype(int), cells)
    return low, t - low


def mask_of(detection: Dict, height: int, width: int):
    """The image-sized 0/1 mask (numpy uint8, height x width) of one of the handler's detections:
    at each pixel's centre the box's probabilities interpolated bilinearly (zero beyond the mask,
    so a mask of ones keeps exactly the pixels whose centres the box holds), kept at MASK_THRESHOLD
    or more. Model Garden's paste_instance_masks_v2 (official/vision/ops/mask_ops.py), without
    OpenCV's 1/32-pixel sampling grid (tests/launcher/test_mask_paste.py)."""
    import numpy as np

    probabilities = np.pad(np.asarray(detection["mask"], dtype=np.float64), 1)
    rows, cols = probabilities.shape[0] - 2, probabilities.shape[1] - 2
    x, y, w, h = (float(v) for v in detection["bbox"])
    full = np.zeros((height, width), dtype=np.uint8)
    left, top = max(0, math.floor(x)), max(0, math.floor(y))
    right, bottom = min(width, math.ceil(x + w)), min(height, math.ceil(y + h))
    if w <= 0 or h <= 0 or right <= left or bottom <= top:
        return full
    r, fr = _cells(top, bottom, y, h, rows)
    c, fc = _cells(left, right, x, w, cols)
    fr = fr[:, None]
    value = ((1 - fr) * ((1 - fc) * probabilities[r][:, c] + fc * probabilities[r][:, c + 1])
             + fr * ((1 - fc) * probabilities[r + 1][:, c] + fc * probabilities[r + 1][:, c + 1]))
    full[top:bottom, left:right] = value >= MASK_THRESHOLD
    return full


def rle(mask) -> Dict:
    """COCO's compressed RLE of a 0/1 mask, `counts` as text (JSON-ready)."""
    import numpy as np
    from pycocotools import mask as mask_utils

    encoded = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in encoded["size"]], "counts": encoded["counts"].decode("ascii")}


def decoded(segmentation: Dict):
    """The 0/1 mask (numpy uint8, height x width) of a result's RLE segmentation."""
    from pycocotools import mask as mask_utils

    return mask_utils.decode({"size": segmentation["size"],
                              "counts": segmentation["counts"].encode("ascii")})


def results_of(answer: Dict, image_id: int) -> List[Dict]:
    """The COCO results of one of the serving handler's answers for image `image_id`."""
    height, width = answer["image_size"]
    results = []
    for detection in answer["detections"]:
        result = {"image_id": image_id, "category_id": detection["category_id"],
                  "bbox": list(detection["bbox"]), "score": detection["score"]}
        if "category_name" in detection:
            result["category_name"] = detection["category_name"]
        if detection.get("mask"):
            result["segmentation"] = rle(mask_of(detection, height, width))
        results.append(result)
    return results

