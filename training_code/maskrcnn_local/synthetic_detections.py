"""Detections made from ground truth, seeded: the evaluation's tests and benchmark without a model.

    detections = synthetic_detections.perturbed(coco_gt, seed=0)

Each non-crowd ground-truth instance is found (FOUND), its mask shifted by up to SHIFT_PX pixels
in x and y (so its IoU with the truth varies, and some fall below 0.5), its box the shifted
mask's; a found instance is reported as its look-alike class now and then (SWAPPED: circle and
ellipse, square and rectangle, triangle and star in maskrcnn_local/synthetic_coco.py's hard set;
another class for other ids), and now and then twice (DUPLICATED). False detections are added:
FALSE_PER_IMAGE per image on average, a filled box somewhere in the image. Scores are drawn so
that correct detections tend to score higher than swaps, duplicates and false ones, as a trained
model's do. The results are COCO results (image_id, category_id, bbox, score, RLE segmentation
with text counts), what the job's evaluator and `predict` produce.
"""

from typing import Dict, List

import numpy as np
from pycocotools import mask as mask_api

FOUND = 0.85
SWAPPED = 0.15
DUPLICATED = 0.1
FALSE_PER_IMAGE = 0.8
SHIFT_PX = 3
# maskrcnn_local/synthetic_coco.py's look-alike pairs (hard set).
LOOK_ALIKES = {1: 4, 4: 1, 2: 5, 5: 2, 3: 6, 6: 3}


def _shifted(mask: np.ndarray, dx: int, dy: int) -> np.ndarray:
    out = np.zeros_like(mask)
    height, width = mask.shape
    src = mask[max(0, -dy):height - max(0, dy), max(0, -dx):width - max(0, dx)]
    out[max(0, dy):max(0, dy) + src.shape[0], max(0, dx):max(0, dx) + src.shape[1]] = src
    return out


def _result(image_id: int, category_id: int, mask: np.ndarray, score: float) -> Dict:
    rle = mask_api.encode(np.asfortranarray(mask.astype(np.uint8)))
    rle["counts"] = rle["counts"].decode("ascii")
    return {"image_id": int(image_id), "category_id": int(category_id),
            "bbox": [float(v) for v in mask_api.toBbox(rle)], "score": float(score),
            "segmentation": rle}


def perturbed(coco_gt, seed: int = 0) -> List[Dict]:
    """COCO results for every image of `coco_gt` (a pycocotools COCO), seeded."""
    rng = np.random.default_rng(seed)
    category_ids = sorted(coco_gt.getCatIds())
    results = []
    for image_id in sorted(coco_gt.getImgIds()):
        image = coco_gt.imgs[image_id]
        height, width = image["height"], image["width"]
        for ann in coco_gt.loadAnns(coco_gt.getAnnIds(imgIds=[image_id])):
            if ann.get("iscrowd", 0) or rng.random() >= FOUND:
                continue
            mask = coco_gt.annToMask(ann)
            copies = 2 if rng.random() < DUPLICATED else 1
            for copy in range(copies):
                dx, dy = (int(v) for v in rng.integers(-SHIFT_PX, SHIFT_PX + 1, size=2))
                shifted = _shifted(mask, dx, dy)
                if not shifted.any():
                    continue
                category = ann["category_id"]
                swapped = rng.random() < SWAPPED
                if swapped:
                    others = [c for c in category_ids if c != category]
                    category = LOOK_ALIKES.get(category, others[int(rng.integers(len(others)))])
                score = rng.beta(2, 3) if swapped or copy else rng.beta(5, 2)
                results.append(_result(image_id, category, shifted, score))
        for _ in range(int(rng.poisson(FALSE_PER_IMAGE))):
            w, h = (int(v) for v in rng.integers(4, max(5, min(width, height) // 3), size=2))
            x, y = int(rng.integers(0, width - w)), int(rng.integers(0, height - h))
            mask = np.zeros((height, width), np.uint8)
            mask[y:y + h, x:x + w] = 1
            category = category_ids[int(rng.integers(len(category_ids)))]
            results.append(_result(image_id, category, mask, rng.beta(1.5, 4)))
    return results
