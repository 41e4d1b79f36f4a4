"""The evaluation report: per class, what COCO's 12 summary numbers average away.

    report = build({"bbox": bbox_eval, "segm": segm_eval}, names, step=1200)
    files = write(report, out_dir)          # report.json and the pictures (plots.py)

From the COCOeval objects of one evaluation (after evaluate() and accumulate(), by pycocotools or
faster-coco-eval: coco.py), for boxes and for masks:
- per class: AP, AP50, AP75, APs, APm, APl and AR (100 detections), read from COCO's own
  accumulated precision and recall arrays, the numbers its summarize() averages: the mean over
  the classes that have a value is the summary figure (tested, with COCOeval restricted to each
  class, params.catIds = [c], for every class);
- per class, the precision-recall curves at IoU 0.5 and 0.75 (COCO's interpolated precision at its
  101 recall thresholds, and the score at each);
- per class, the score threshold that maximizes F1 at IoU 0.5 (COCO's matching: same class, best
  IoU first, crowds ignored, 100 detections an image), with the precision and recall there, and the
  same over all classes together: what the endpoint's `score_threshold` should be;
- a confusion matrix: each image's detections at or above a score threshold (the endpoint's
  default, 0.3) matched to the ground truth class-agnostically (IoU >= 0.5, greedy by score, COCO's
  matching with crowd regions ignored), rows the true class, columns the predicted one, a
  `background` row for false detections and column for missed instances; and the most frequent
  confusions.
The schema of report.json is SCHEMA, documented in docs/evaluation.md. Values COCO leaves
undefined (-1: a class without ground truth in that size range) are null.
"""

import json
import math
import os
import re
import shutil
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from pycocotools import mask as mask_api

from maskrcnn_contract import metrics as metric_names

# The file, its places and its table are the contract's: the launcher reads them back too.
from maskrcnn_contract.evaluation_report import (  # noqa: F401
    MODEL_REPORT_DIR,
    OUTPUT_REPORT_DIR,
    REPORT_FILE,
    SCHEMA,
    picture_names,
    read,
    table,
)

TASKS = ("bbox", "segm")
TASK_NAMES = {"bbox": "box", "segm": "mask"}
MATCH_IOU = 0.5        # the confusion matrix's and the thresholds' matching
PR_IOUS = (0.5, 0.75)  # the curves
AREAS = {"all": "AP", "small": "APs", "medium": "APm", "large": "APl"}
MAX_DETECTIONS = 100   # COCO's AP figures' maxDets
BACKGROUND = "background"
# The confusion matrix counts what the endpoint answers with its default threshold
# (maskrcnn_job/serving/endpoint_handler.py DEFAULT_SCORE_THRESHOLD).
DEFAULT_CONFUSION_SCORE = 0.3
TOP_CONFUSIONS = 5
CURVE_DECIMALS = 5


# --- class names ----------------------------------------------------------------------------------

def category_names(category_ids: Sequence[int], dataset_categories: Optional[Sequence[Dict]] = None,
                   annotation_categories: Optional[Sequence[Dict]] = None) -> Dict[int, str]:
    """{category id: name} for the ids COCOeval scores: from the dataset's categories
    (dataset_info.json) by `id`, or by `source_id` when the dataset renumbered its categories and
    the evaluation still uses the original ids; else the annotation file's name; else the id."""
    names = {}
    by_id = {int(c["id"]): c["name"] for c in dataset_categories or []}
    by_source = {int(c["source_id"]): c["name"] for c in dataset_categories or []
                 if c.get("source_id") is not None}
    from_file = {int(c["id"]): c["name"] for c in annotation_categories or []}
    ids = [int(i) for i in category_ids]
    # One mapping for all ids: by id when it names every one, else by source id if that does.
    mapping = by_id if set(ids) <= set(by_id) or not set(ids) <= set(by_source) else by_source
    for category_id in ids:
        names[category_id] = (mapping.get(category_id) or from_file.get(category_id)
                              or str(category_id))
    return names


# --- COCO's arrays --------------------------------------------------------------------------------

def _value(array: np.ndarray) -> Optional[float]:
    """COCOeval.summarize's mean: over the entries > -1; None where there is none (COCO's -1)."""
    valid = array[array > -1]
    return float(np.mean(valid)) if valid.size else None


def _iou_index(params, iou: float) -> int:
    found = np.where(np.abs(np.asarray(params.iouThrs) - iou) < 1e-9)[0]
    if not found.size:
        raise ValueError(f"IoU {iou} is not one of COCOeval's thresholds {list(params.iouThrs)}")
    return int(found[0])


def _max_dets_index(params) -> int:
    return list(params.maxDets).index(MAX_DETECTIONS) if MAX_DETECTIONS in params.maxDets else -1


def per_class_ap(coco_eval) -> List[Dict]:
    """For each class of params.catIds: AP, AP50, AP75, APs, APm, APl, AR100, from
    eval["precision"] [T, R, K, A, M] and eval["recall"] [T, K, A, M] as summarize() reads them."""
    params = coco_eval.params
    precision, recall = coco_eval.eval["precision"], coco_eval.eval["recall"]
    m = _max_dets_index(params)
    areas = list(params.areaRngLbl)
    t50, t75 = _iou_index(params, 0.5), _iou_index(params, 0.75)
    rows = []
    for k, category_id in enumerate(params.catIds):
        row: Dict[str, Any] = {"id": int(category_id)}
        for area, stat in AREAS.items():
            row[stat] = _value(precision[:, :, k, areas.index(area), m])
        everything = precision[:, :, k, areas.index("all"), m]
        row["AP50"] = _value(everything[t50])
        row["AP75"] = _value(everything[t75])
        row["AR100"] = _value(recall[:, k, areas.index("all"), m])
        rows.append(row)
    return rows


def _curves(coco_eval, k: int) -> Dict[str, Optional[Dict]]:
    params = coco_eval.params
    m, a = _max_dets_index(params), list(params.areaRngLbl).index("all")
    curves: Dict[str, Optional[Dict]] = {}
    for iou in PR_IOUS:
        t = _iou_index(params, iou)
        precision = coco_eval.eval["precision"][t, :, k, a, m]
        scores = coco_eval.eval["scores"][t, :, k, a, m]
        if (precision <= -1).all():
            curves[f"{iou:.2f}"] = None
            continue
        curves[f"{iou:.2f}"] = {
            "precision": [round(float(v), CURVE_DECIMALS) for v in precision],
            "score": [round(float(v), CURVE_DECIMALS) for v in scores]}
    return curves


# --- matching -------------------------------------------------------------------------------------

def _geometry(annotation: Dict, iou_type: str, image: Dict):
    if iou_type == "bbox":
        return [float(v) for v in annotation["bbox"]]
    segmentation = annotation["segmentation"]
    height, width = image["height"], image["width"]
    if isinstance(segmentation, list):  # polygons
        return mask_api.merge(mask_api.frPyObjects(segmentation, height, width))
    if isinstance(segmentation["counts"], list):  # uncompressed RLE
        return mask_api.frPyObjects(segmentation, height, width)
    return segmentation


def match(ious: np.ndarray, gt_ignore: np.ndarray, gt_crowd: np.ndarray,
          threshold: float = MATCH_IOU) -> np.ndarray:
    """COCOeval.evaluateImg's greedy matching of detections (rows of `ious`, sorted by score,
    highest first) to ground truth (columns, the ignored ones last): each detection takes the
    unmatched ground truth of highest IoU >= threshold, a regular one before an ignored one;
    crowds can be matched again. Returns, per detection, the column it matched or -1."""
    num_dt, num_gt = ious.shape if ious.size else (len(ious), len(gt_ignore))
    gt_taken = np.zeros(num_gt, bool)
    matched = -np.ones(num_dt, int)
    for d in range(num_dt):
        best, m = min(threshold, 1 - 1e-10), -1
        for g in range(num_gt):
            if gt_taken[g] and not gt_crowd[g]:
                continue
            if m > -1 and not gt_ignore[m] and gt_ignore[g]:
                break
            if ious[d, g] < best:
                continue
            best, m = ious[d, g], g
        if m > -1:
            matched[d] = m
            gt_taken[m] = True
    return matched


class _Image:
    """One image's ground truth and detections, with their IoUs (all classes against all)."""

    def __init__(self, image: Dict, gts: List[Dict], dts: List[Dict], iou_type: str):
        self.gt_class = np.array([g["category_id"] for g in gts], int)
        self.gt_crowd = np.array([bool(g.get("iscrowd", 0)) for g in gts], bool)
        self.dt_class = np.array([d["category_id"] for d in dts], int)
        self.dt_score = np.array([d["score"] for d in dts], float)
        if gts and dts:
            self.ious = np.asarray(mask_api.iou([_geometry(d, iou_type, image) for d in dts],
                                                [_geometry(g, iou_type, image) for g in gts],
                                                [int(c) for c in self.gt_crowd]), float)
        else:
            self.ious = np.zeros((len(dts), len(gts)))

    def matched(self, dt_index: np.ndarray, gt_index: np.ndarray, max_dets: Optional[int] = None):
        """The detections `dt_index` (sorted by score here, COCO's stable sort, then cut at
        max_dets) against the ground truth `gt_index` (crowds last): the sorted detection
        indices, per detection the ground-truth index it matched or -1, and whether that one is a
        crowd (the detection is then ignored)."""
        dt_index = dt_index[np.argsort(-self.dt_score[dt_index], kind="mergesort")][:max_dets]
        gt_index = gt_index[np.argsort(self.gt_crowd[gt_index], kind="mergesort")]
        columns = match(self.ious[np.ix_(dt_index, gt_index)], self.gt_crowd[gt_index],
                        self.gt_crowd[gt_index])
        gt_of = np.array([gt_index[c] if c >= 0 else -1 for c in columns], int)
        on_crowd = np.array([c >= 0 and bool(self.gt_crowd[gt_index[c]]) for c in columns], bool)
        return dt_index, gt_of, on_crowd


def _images(coco_eval, iou_type: str) -> List[_Image]:
    image_ids = [int(i) for i in coco_eval.params.imgIds]
    category_ids = {int(c) for c in coco_eval.params.catIds}
    wanted = set(image_ids)
    gts: Dict[int, List[Dict]] = {i: [] for i in image_ids}
    dts: Dict[int, List[Dict]] = {i: [] for i in image_ids}
    for annotations, into in ((coco_eval.cocoGt.dataset["annotations"], gts),
                              (coco_eval.cocoDt.dataset["annotations"], dts)):
        for ann in annotations:
            if ann["image_id"] in wanted and ann["category_id"] in category_ids:
                into[ann["image_id"]].append(ann)
    images = {int(img["id"]): img for img in coco_eval.cocoGt.dataset["images"]}
    return [_Image(images[i], gts[i], dts[i], iou_type) for i in image_ids]


def best_f1(scores: np.ndarray, true_positive: np.ndarray, ignored: np.ndarray,
            ground_truth: int) -> Dict:
    """The score threshold (keep detections scoring >= it) of highest F1, from the detections'
    scores, whether each matched (true positive) and whether each is ignored (matched a crowd),
    and the number of ground-truth instances. F1 = 2 TP / (TP + FP + ground truth); between equal
    F1s the highest threshold. threshold None when no threshold finds anything."""
    order = np.argsort(-scores, kind="mergesort")
    scores, tp = scores[order], (true_positive & ~ignored)[order]
    fp = (~true_positive & ~ignored)[order]
    tp_sum, fp_sum = np.cumsum(tp), np.cumsum(fp)
    # A threshold keeps every detection scoring at least it: only the last of equal scores.
    ends: Any = np.flatnonzero(np.append(scores[1:] != scores[:-1], True)) if scores.size else []
    best: Dict[str, Any] = {"score_threshold": None, "f1": 0.0, "precision": 0.0, "recall": 0.0,
            "true_positives": 0, "false_positives": 0, "ground_truth": int(ground_truth)}
    if not ground_truth:
        return dict(best, f1=None, precision=None, recall=None)
    for i in ends:
        t, f = int(tp_sum[i]), int(fp_sum[i])
        f1 = 2 * t / (t + f + ground_truth)
        if t and f1 > best["f1"]:
            best = {"score_threshold": float(scores[i]), "f1": f1, "precision": t / (t + f),
                    "recall": t / ground_truth, "true_positives": t, "false_positives": f,
                    "ground_truth": int(ground_truth)}
    return best


def thresholds(images: List[_Image], category_ids: Sequence[int]) -> Dict:
    """{"per_class": {id: best_f1}, "all_classes": best_f1}: COCO's matching per class at IoU
    0.5, area all, 100 detections an image."""
    collected: Dict[int, Tuple[List[np.ndarray], List[np.ndarray], List[np.ndarray], int]] = {
        c: ([], [], [], 0) for c in category_ids}
    for image in images:
        for c in category_ids:
            dt_index, gt_of, on_crowd = image.matched(np.flatnonzero(image.dt_class == c),
                                                      np.flatnonzero(image.gt_class == c),
                                                      MAX_DETECTIONS)
            scores, tps, ignored, count = collected[c]
            scores.append(image.dt_score[dt_index])
            tps.append(gt_of >= 0)
            ignored.append(on_crowd)
            count += int(np.count_nonzero((image.gt_class == c) & ~image.gt_crowd))
            collected[c] = (scores, tps, ignored, count)
    pooled: Tuple[Any, ...]
    per_class, pooled = {}, ([], [], [], 0)
    for c, (scores, tps, ignored, count) in collected.items():
        arrays = [np.concatenate(x) if x else np.zeros(0) for x in (scores, tps, ignored)]
        arrays[1], arrays[2] = arrays[1].astype(bool), arrays[2].astype(bool)
        per_class[c] = best_f1(arrays[0], arrays[1], arrays[2], count)
        pooled = tuple(p + [a] for p, a in zip(pooled[:3], arrays)) + (pooled[3] + count,)
    arrays = [np.concatenate(x) if x else np.zeros(0) for x in pooled[:3]]
    return {"per_class": per_class,
            "all_classes": best_f1(arrays[0], arrays[1].astype(bool), arrays[2].astype(bool),
                                   pooled[3])}


def confusion(images: List[_Image], category_ids: Sequence[int], names: Dict[int, str],
              score_threshold: float = DEFAULT_CONFUSION_SCORE) -> Dict:
    """Rows: the true class, then `background` (false detections); columns: the predicted class,
    then `background` (missed instances). Each image's detections scoring >= score_threshold,
    matched class-agnostically (IoU >= 0.5, greedy by score, crowds ignored)."""
    index = {c: i for i, c in enumerate(category_ids)}
    size = len(category_ids) + 1
    matrix = np.zeros((size, size), int)
    on_crowds = 0
    for image in images:
        dt_index, gt_of, on_crowd = image.matched(
            np.flatnonzero(image.dt_score >= score_threshold), np.arange(len(image.gt_class)))
        for d, g, crowd in zip(dt_index, gt_of, on_crowd):
            column = index[int(image.dt_class[d])]
            if g < 0:
                matrix[-1, column] += 1
            elif crowd:
                on_crowds += 1
            else:
                matrix[index[int(image.gt_class[g])], column] += 1
        found = set(int(g) for g in gt_of if g >= 0)
        for g in np.flatnonzero(~image.gt_crowd):
            if int(g) not in found:
                matrix[index[int(image.gt_class[g])], -1] += 1
    labels = [names[c] for c in category_ids] + [BACKGROUND]
    confusions: List[Dict[str, Any]] = []
    for i in range(size - 1):
        row_total = int(matrix[i].sum())
        for j in range(size - 1):
            if i != j and matrix[i, j]:
                confusions.append({"ground_truth": labels[i], "predicted": labels[j],
                                   "count": int(matrix[i, j]),
                                   "share": float(matrix[i, j] / row_total)})
    confusions.sort(key=lambda c: (-c["count"], -c["share"], c["ground_truth"], c["predicted"]))
    return {"score_threshold": score_threshold, "iou": MATCH_IOU, "labels": labels,
            "matrix": matrix.tolist(), "ignored_on_crowds": on_crowds,
            "most_confused": confusions[:TOP_CONFUSIONS]}


# --- the report -----------------------------------------------------------------------------------

def _null(value: float) -> Optional[float]:
    return None if value is None or value <= -1 or math.isnan(value) else float(value)


def task_report(coco_eval, iou_type: str, names: Dict[int, str],
                confusion_score: float = DEFAULT_CONFUSION_SCORE,
                source_ids: Optional[Dict[int, int]] = None) -> Dict:
    source_ids = source_ids or {}
    category_ids = [int(c) for c in coco_eval.params.catIds]
    images = _images(coco_eval, iou_type)
    found = thresholds(images, category_ids)
    ground_truth = {c: 0 for c in category_ids}
    detections = {c: 0 for c in category_ids}
    for image in images:
        for c in image.gt_class[~image.gt_crowd]:
            ground_truth[int(c)] += 1
        for c in image.dt_class:
            detections[int(c)] += 1
    per_class = []
    for k, row in enumerate(per_class_ap(coco_eval)):
        c = row["id"]
        per_class.append(dict(row, source_id=source_ids.get(c, c), name=names[c],
                              instances=ground_truth[c],
                              detections=detections[c], best_f1=found["per_class"][c],
                              pr_curves=_curves(coco_eval, k)))
    return {
        "summary": {stat: _null(value)
                    for stat, value in zip(metric_names.COCO_STATS, coco_eval.stats)},
        "recall_thresholds": [round(float(r), CURVE_DECIMALS) for r in coco_eval.params.recThrs],
        "per_class": per_class,
        "best_f1_all_classes": found["all_classes"],
        "confusion": confusion(images, category_ids, names, confusion_score),
    }


def build(evaluations: Dict[str, Any], names: Dict[int, str], step: Optional[int] = None,
          evaluator: str = "", timing: Optional[Dict] = None,
          confusion_score: float = DEFAULT_CONFUSION_SCORE,
          source_ids: Optional[Dict[int, int]] = None) -> Dict:
    """The report of one evaluation: `evaluations` {"bbox": COCOeval, "segm": COCOeval} after
    accumulate() and summarize(), over the same images and detections; `names` {category id:
    name} (category_names); `source_ids` {category id: the id of the annotation file the dataset
    was converted from} (DatasetInfo.source_ids(); absent: the ids are the originals)."""
    first = next(iter(evaluations.values()))
    category_ids = [int(c) for c in first.params.catIds]
    source_ids = source_ids or {}
    return {
        "schema": SCHEMA,
        "step": step,
        "evaluator": evaluator,
        "images": len(first.params.imgIds),
        "detections": sum(1 for ann in first.cocoDt.dataset["annotations"]
                          if ann["image_id"] in set(first.params.imgIds)),
        "categories": [{"id": c, "source_id": source_ids.get(c, c), "name": names[c]}
                       for c in category_ids],
        "tasks": {task: task_report(coco_eval, task, names, confusion_score, source_ids)
                  for task, coco_eval in evaluations.items()},
        "timing": timing or {},
    }


def worst_class_metrics(report: Dict) -> Dict[str, float]:
    """The headline per-class metric lines: each task's lowest per-class AP."""
    values = {}
    for task, name in (("bbox", "eval/bbox_AP_worst_class"), ("segm", "eval/segm_AP_worst_class")):
        aps = [row["AP"] for row in report["tasks"].get(task, {}).get("per_class", [])
               if row["AP"] is not None]
        if aps:
            values[name] = min(aps)
    return values


def write(report: Dict, out_dir: str, pictures: bool = True) -> Dict[str, str]:
    """report.json and (pictures) the PNGs into `out_dir`, replaced whole; returns {kind: path}."""
    temporary = out_dir.rstrip("/") + ".incomplete"
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    files = {"report": REPORT_FILE}
    timing = dict(report.get("timing") or {})
    if pictures:
        from maskrcnn_job.evaluation import plots

        started = time.time()
        files.update(picture_names(report))
        for task in report["tasks"]:
            plots.pr_curves(report, task, os.path.join(temporary, files[f"{task}_pr_curves"]))
            plots.confusion_matrix(report, task,
                                   os.path.join(temporary, files[f"{task}_confusion_matrix"]))
        timing["pictures_s"] = round(time.time() - started, 3)
    report = dict(report, timing=timing,
                  files={k: v for k, v in files.items() if k != "report"})
    with open(os.path.join(temporary, REPORT_FILE), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(temporary, out_dir)
    return {kind: os.path.join(out_dir, name) for kind, name in files.items()}


# --- where people look ----------------------------------------------------------------------------

def _tag(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", name)


def write_summaries(writer, step: int, report: Dict,
                    files: Optional[Dict[str, str]] = None) -> None:
    """TensorBoard: each class's AP and AP50 per task (eval_per_class/<task>_AP/<class>), the
    best-F1 thresholds, and the pictures as images."""
    if writer is None:
        return
    import tensorflow as tf

    with writer.as_default(step=step):
        for task, task_report_ in report["tasks"].items():
            for row in task_report_["per_class"]:
                for stat in ("AP", "AP50"):
                    if row[stat] is not None:
                        tf.summary.scalar(f"eval_per_class/{task}_{stat}/{_tag(row['name'])}",
                                          row[stat])
                threshold = row["best_f1"]["score_threshold"]
                if threshold is not None:
                    tf.summary.scalar(f"eval_per_class/{task}_best_f1_score/{_tag(row['name'])}",
                                      threshold)
        for kind, path in (files or {}).items():
            if path.endswith(".png") and os.path.isfile(path):
                with open(path, "rb") as f:
                    image = tf.io.decode_png(f.read(), channels=3)
                tf.summary.image(f"eval_report/{kind}", image[tf.newaxis], max_outputs=1)
    writer.flush()
