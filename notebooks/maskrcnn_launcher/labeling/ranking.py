"""Which images to label next: each image of a predictions run scored by how unsure the model is of
what it found there, most worth labeling first.

    ranked = ranking.rank(predictions.read(folder), report)  # report: optional, a report.json
    ranking.write(ranked, folder)                           # ranking.json, ranking.csv

Per detection d (class c, score s, box, mask):
    H(d) = -s log2 s - (1 - s) log2 (1 - s)     the binary entropy of its score: 1 at s = 0.5
    D(d) = 1 - IoU(its box, the bounding box of its mask): box and mask disagree on its
           extent; 1 for an empty mask, none without a mask
    w(c) = 1 - AP(c), the class's AP in the evaluation report (mask AP, else box AP); 1 without a
           report, and for a class the report has no AP for (no ground truth: never measured)
    u(d) = w(c) * max(H(d), D(d))
Per image: score = the max of u over its detections (ties: the larger sum of u, then the file
name); an image without detections scores 0 and ranks after every image with one. Why each part,
and the sources: docs/labeling.md, "What to label next".
"""

import csv
import dataclasses
import json
import math
import os
from typing import Dict, List, Optional, Tuple

from maskrcnn_contract import evaluation_report

from maskrcnn_launcher.labeling.predictions import Predictions, box_pixels

SCHEMA = "maskrcnn-labeling-ranking/1"
RANKING_JSON = "ranking.json"
RANKING_CSV = "ranking.csv"
DECIMALS = 4
# The report's task whose per-class AP weighs the classes, the first present: masks are what
# the labelers draw.
REPORT_TASKS = ("segm", "bbox")


@dataclasses.dataclass(frozen=True)
class Row:
    """One image's place in the ranking and why: the parts are those of its deciding detection
    (the one of highest u), None for an image without detections."""

    rank: int
    file_name: str
    image_id: int
    score: float                              # max u over the image's detections
    entropy: Optional[float]                  # H of the deciding detection
    box_mask_disagreement: Optional[float]    # D of it (None: it has no mask)
    class_weight: Optional[float]             # w of its class
    category: Optional[str]                   # its class
    detection_score: Optional[float]          # its score
    uncertainty_sum: float                    # the sum of u over the image's detections
    detections: int
    weakest_class: Optional[str]              # the image's detected class of highest w (a report)
    weakest_class_ap: Optional[float]         # its AP (None: none in the report, or no report)


COLUMNS = tuple(field.name for field in dataclasses.fields(Row))


@dataclasses.dataclass
class Ranking:
    """A predictions run ranked, most worth labeling first."""

    model: str
    source: str
    score_threshold: float        # the run's: what lies below it was never seen
    weights: Optional[str]        # "segm AP" or "bbox AP" of the report, None without one
    rows: List[Row]

    def top(self, n: int) -> List[Row]:
        """The first n rows; n from 1 to the images ranked."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(self.rows):
            raise ValueError(f"top {n!r}: must be a whole number from 1 to {len(self.rows)} "
                             "(the images ranked)")
        return self.rows[:n]


def entropy(score: float) -> float:
    """The binary entropy of a score, in bits: 0 at 0 and 1, 1 at 0.5."""
    if score <= 0.0 or score >= 1.0:
        return 0.0
    return -score * math.log2(score) - (1.0 - score) * math.log2(1.0 - score)


def box_mask_disagreement(detection: Dict, image: Dict) -> Optional[float]:
    """1 - IoU of the detection's box (the whole pixels it covers, as its mask was pasted) and the
    bounding box of its mask's pixels; 1 for a mask without pixels, None without a mask. `image`:
    the run's image it was found in (file_name, height, width)."""
    segmentation = detection.get("segmentation")
    if not segmentation:
        return None
    from pycocotools import mask as mask_utils

    height, width = image["height"], image["width"]
    if list(segmentation["size"]) != [height, width]:
        raise ValueError(f"{image['file_name']}: a detection's mask is "
                         f"{segmentation['size'][0]} x {segmentation['size'][1]}, the image "
                         f"{height} x {width}")
    left, top, right, bottom = box_pixels(detection["bbox"], height, width)[:4]
    mx, my, mw, mh = (float(v) for v in mask_utils.toBbox(
        {"size": segmentation["size"], "counts": segmentation["counts"].encode("ascii")}))
    across = max(0.0, min(right, mx + mw) - max(left, mx))
    down = max(0.0, min(bottom, my + mh) - max(top, my))
    union = (right - left) * (bottom - top) + mw * mh - across * down
    return 1.0 - (across * down / union if union > 0 else 0.0)


def class_weights(predictions: Predictions, report: Optional[Dict]) -> Tuple[
        Dict[int, Tuple[float, Optional[float]]], Optional[str]]:
    """({category id: (w, AP)}, which AP) for the run's categories: w = 1 - AP from the report's
    mask AP (else box AP), 1 where the report has none for the class; all 1 without a report.
    Refuses a report of other classes (by the dataset's own id and name) or another schema."""
    if report is None:
        return {int(c["id"]): (1.0, None) for c in predictions.categories}, None
    if report.get("schema") != evaluation_report.SCHEMA:
        raise ValueError(f"evaluation report: schema {report.get('schema')!r}, expected "
                         f"{evaluation_report.SCHEMA!r}")
    task = next((t for t in REPORT_TASKS if t in report.get("tasks", {})), None)
    if task is None:
        raise ValueError(f"evaluation report: no task of {list(REPORT_TASKS)} in its tasks "
                         f"{sorted(report.get('tasks', {}))}")
    # The run's category ids are the dataset's own (the handler's source ids).
    reported = {int(c.get("source_id", c["id"])): (c["name"], entry.get("AP"))
                for c, entry in zip(report["categories"], report["tasks"][task]["per_class"])}
    weights = {}
    for category in predictions.categories:
        cid, name = int(category["id"]), category["name"]
        if cid not in reported:
            raise ValueError(
                f"the evaluation report has no class {name!r} (id {cid}); its classes: "
                + ", ".join(f"{n} ({i})" for i, (n, _) in sorted(reported.items()))
                + ": the report of another model or dataset?")
        reported_name, ap = reported[cid]
        if reported_name != name:
            raise ValueError(f"class id {cid} is {name!r} in the predictions but "
                             f"{reported_name!r} in the evaluation report")
        if ap is not None and not 0.0 <= ap <= 1.0:
            raise ValueError(f"evaluation report: {task} AP of {name!r} is {ap!r}, not in [0, 1]")
        weights[cid] = (1.0 if ap is None else 1.0 - ap, ap)
    return weights, f"{task} AP"


def _check(predictions: Predictions) -> None:
    names, images = predictions.category_names(), {image["id"] for image in predictions.images}
    for result in predictions.results:
        if result["category_id"] not in names:
            raise ValueError(f"a detection of image {result['image_id']} has category_id "
                             f"{result['category_id']!r}; the run's categories: {sorted(names)}")
        if result["image_id"] not in images:
            raise ValueError(f"a detection has image_id {result['image_id']!r}, not an image "
                             "of the run")
        if not 0.0 <= result["score"] <= 1.0:
            raise ValueError(f"a detection of image {result['image_id']} has score "
                             f"{result['score']!r}, not in [0, 1]")


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, DECIMALS)


@dataclasses.dataclass(frozen=True)
class _Doubt:
    """One detection's parts and u."""

    u: float
    entropy: float
    disagreement: Optional[float]
    weight: float
    detection: Dict


def _doubts(detections: List[Dict], image: Dict, weights) -> List[_Doubt]:
    doubts = []
    for d in detections:
        h = entropy(d["score"])
        disagreement = box_mask_disagreement(d, image)
        w = weights[d["category_id"]][0]
        doubts.append(_Doubt(w * max(h, 0.0 if disagreement is None else disagreement),
                             h, disagreement, w, d))
    return doubts


def rank(predictions: Predictions, report: Optional[Dict] = None) -> Ranking:
    """The run's images ranked by the module's measure, most worth labeling first; with an
    evaluation report (a report.json's content), its per-class AP weighs the classes."""
    _check(predictions)
    weights, weighed_by = class_weights(predictions, report)
    names = predictions.category_names()
    found = predictions.by_image()
    scored = []
    for image in predictions.images:
        doubts = _doubts(found[image["id"]], image, weights)
        total = sum((doubt.u for doubt in doubts), 0.0)
        fields = dict(file_name=image["file_name"], image_id=image["id"], score=0.0,
                      entropy=None, box_mask_disagreement=None, class_weight=None,
                      category=None, detection_score=None, uncertainty_sum=_round(total),
                      detections=len(doubts), weakest_class=None, weakest_class_ap=None)
        best = max(doubts, key=lambda doubt: doubt.u) if doubts else None
        if best is not None:
            fields.update(score=_round(best.u), entropy=_round(best.entropy),
                          box_mask_disagreement=_round(best.disagreement),
                          class_weight=_round(best.weight),
                          category=names[best.detection["category_id"]],
                          detection_score=best.detection["score"])
        if best is not None and report is not None:
            weakest = min({doubt.detection["category_id"] for doubt in doubts},
                          key=lambda cid: (-weights[cid][0], names[cid]))
            fields.update(weakest_class=names[weakest],
                          weakest_class_ap=_round(weights[weakest][1]))
        scored.append(((-(best.u if best else 0.0), -total, image["file_name"]), fields))
    scored.sort(key=lambda s: s[0])
    rows = [Row(rank=k + 1, **fields) for k, (_, fields) in enumerate(scored)]
    return Ranking(model=predictions.model, source=predictions.source,
                   score_threshold=predictions.score_threshold, weights=weighed_by, rows=rows)


def write(ranking: Ranking, folder: str) -> List[str]:
    """RANKING_JSON (the run, the weights, the rows in rank order) and RANKING_CSV (the rows, one
    per line, COLUMNS as its header; an empty cell for None) in `folder`; their paths."""
    os.makedirs(folder, exist_ok=True)
    rows = [dataclasses.asdict(row) for row in ranking.rows]
    json_path, csv_path = os.path.join(folder, RANKING_JSON), os.path.join(folder, RANKING_CSV)
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump({"schema": SCHEMA, "model": ranking.model, "source": ranking.source,
                   "score_threshold": ranking.score_threshold, "weights": ranking.weights,
                   "images": rows}, f, indent=1)
    with open(csv_path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)  # csv writes None as an empty cell
    return [json_path, csv_path]


def read(folder: str) -> Ranking:
    """The ranking `write` wrote in `folder`; refuses another schema."""
    path = os.path.join(folder, RANKING_JSON)
    with open(path, encoding="utf-8") as f:
        content = json.load(f)
    if content.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {content.get('schema')!r}, expected {SCHEMA!r}")
    return Ranking(model=content["model"], source=content["source"],
                   score_threshold=content["score_threshold"], weights=content["weights"],
                   rows=[Row(**row) for row in content["images"]])
