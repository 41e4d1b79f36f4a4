"""The evaluation report (maskrcnn_job/evaluation): its numbers against pycocotools' COCOeval, the
reference, and constructed cases whose confusion matrix and thresholds are known exactly.

"Every class of the demo's model": the demo's dataset (maskrcnn_local/synthetic_coco.py's hard
set: 6 classes in look-alike pairs, real-shaped images for a 128 px input, the demo's 50
validation images) with detections made from its ground truth
(maskrcnn_local/synthetic_detections.py: shifted masks, look-alike swaps, duplicates, false
detections, scores that rank them as a model would). A trained demo model costs ~15 minutes
of this machine; the numbers the report reads from COCO's arrays do not depend on where the
detections come from, and the job run of test_evaluation_job.py checks the same equalities on a
real (short-trained) model's detections. Seconds.
"""

import contextlib
import copy
import io
import json
import os

import numpy as np
import pytest
from PIL import Image

from maskrcnn_job.evaluation import coco as coco_evaluation
from maskrcnn_job.evaluation import report
from tests.paths import REPO

STATS = ("AP", "AP50", "AP75", "APs", "APm", "APl")
EVALUATORS = [coco_evaluation.PYCOCOTOOLS] + (
    [coco_evaluation.FASTER_COCO_EVAL] if coco_evaluation.installed(coco_evaluation.FASTER_COCO_EVAL)
    else [])


def _coco(dataset):
    from pycocotools.coco import COCO

    coco = COCO()
    coco.dataset = copy.deepcopy(dataset)
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


@pytest.fixture(scope="module")
def demo_like(tmp_path_factory):
    """(ground truth dataset, detections) on the demo's classes and image size."""
    from maskrcnn_local import synthetic_coco, synthetic_detections

    out = tmp_path_factory.mktemp("demo-coco")
    datasets = synthetic_coco.generate(str(out), num_train=1, num_val=50, image_size=128)
    gt = datasets["val"]
    return gt, synthetic_detections.perturbed(_coco(gt), seed=0)


def _evaluate(gt, detections, evaluator=coco_evaluation.PYCOCOTOOLS, category_ids=None):
    coco_gt = _coco(gt)
    coco_dt = coco_evaluation.load_results(coco_gt, detections)
    return {kind: coco_evaluation.run(coco_gt, coco_dt, kind, evaluator=evaluator,
                                      category_ids=category_ids, print_function=None)
            for kind in coco_evaluation.IOU_TYPES}


@pytest.mark.parametrize("evaluator", EVALUATORS)
def test_per_class_ap_is_cocoeval_restricted_to_the_class_and_their_mean_the_summary(
        demo_like, evaluator):
    gt, detections = demo_like
    evaluations = _evaluate(gt, detections, evaluator)
    names = report.category_names(evaluations["segm"].params.catIds, gt["categories"])
    built = report.build(evaluations, names)
    assert [c["name"] for c in built["categories"]] == [
        "circle", "square", "triangle", "ellipse", "rectangle", "star"]
    for kind, coco_eval in evaluations.items():
        rows = built["tasks"][kind]["per_class"]
        for row in rows:
            # The reference: pycocotools' COCOeval with params.catIds = [c].
            alone = _evaluate(gt, detections, coco_evaluation.PYCOCOTOOLS, [row["id"]])[kind]
            for stat, value in zip(STATS, alone.stats):
                expected = None if value == -1 else value
                assert row[stat] == pytest.approx(expected, abs=1e-12), (kind, row["name"], stat)
        assert all(row["AP"] is not None and row["AP"] > 0 for row in rows)
        for index, stat in enumerate(STATS):
            values = [row[stat] for row in rows if row[stat] is not None]
            # A size range without ground truth (COCO's "large" on small images) is -1, null here.
            mean = np.mean(values) if values else -1
            assert mean == pytest.approx(coco_eval.stats[index], abs=1e-12), (kind, stat)
            summary = built["tasks"][kind]["summary"][stat]
            assert (summary if values else -1) == pytest.approx(coco_eval.stats[index])


def _close(a, b, path=""):
    """`a` and `b` equal, numbers within 1e-12 (a report's curves: its 5 printed decimals)."""
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), path
        for key in a:
            _close(a[key], b[key], f"{path}/{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for index, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}/{index}")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, abs=1e-12), path
    else:
        assert a == b, path


def test_faster_coco_eval_gives_pycocotools_stats_and_every_per_class_figure(demo_like):
    """The job prefers faster-coco-eval (installed with the training image and here): its 12
    stats per task, per-class AP and recall from its arrays, PR curves, thresholds and confusion
    matrix, i.e. the whole report, are pycocotools' (the reference) on the demo's classes."""
    assert coco_evaluation.default_evaluator() == coco_evaluation.FASTER_COCO_EVAL
    gt, detections = demo_like
    built = {}
    for evaluator in (coco_evaluation.PYCOCOTOOLS, coco_evaluation.FASTER_COCO_EVAL):
        evaluations = _evaluate(gt, detections, evaluator)
        names = report.category_names(evaluations["segm"].params.catIds, gt["categories"])
        built[evaluator] = report.build(evaluations, names)
        built[evaluator]["stats"] = {kind: [float(v) for v in e.stats]
                                     for kind, e in evaluations.items()}
    _close(built[coco_evaluation.PYCOCOTOOLS], built[coco_evaluation.FASTER_COCO_EVAL])


def test_the_matching_is_cocos_at_iou_0_5(demo_like):
    """Every detection kept, each class's true positives are COCO's recall at IoU 0.5 (area all,
    100 detections): the thresholds' and the confusion matrix's matching is COCOeval's."""
    gt, detections = demo_like
    for kind, coco_eval in _evaluate(gt, detections).items():
        images = report._images(coco_eval, kind)  # pylint: disable=protected-access
        for k, category_id in enumerate(coco_eval.params.catIds):
            found = ground_truth = 0
            for image in images:
                _, gt_of, on_crowd = image.matched(np.flatnonzero(image.dt_class == category_id),
                                                   np.flatnonzero(image.gt_class == category_id),
                                                   report.MAX_DETECTIONS)
                found += int(np.count_nonzero((gt_of >= 0) & ~on_crowd))
                ground_truth += int(np.count_nonzero((image.gt_class == category_id)
                                                     & ~image.gt_crowd))
            assert found / ground_truth == pytest.approx(
                coco_eval.eval["recall"][0, k, 0, -1], abs=1e-12), (kind, category_id)


def test_results_load_as_model_gardens_wrapper_loads_them(demo_like):
    from official.vision.evaluation import coco_utils

    gt, detections = demo_like
    wrapper = coco_utils.COCOWrapper(eval_type="mask", gt_dataset=copy.deepcopy(gt))
    theirs = wrapper.loadRes(predictions=[dict(d, id=i + 1) for i, d in enumerate(detections)])
    ours = coco_evaluation.load_results(_coco(gt), detections)
    assert len(ours.dataset["annotations"]) == len(theirs.dataset["annotations"])
    for a, b in zip(ours.dataset["annotations"], theirs.dataset["annotations"]):
        assert a["area"] == pytest.approx(float(b["area"])) and a["id"] == b["id"]
        assert {k: v for k, v in a.items() if k != "area"} == {
            k: v for k, v in b.items() if k != "area"}


# --- constructed cases ---------------------------------------------------------------------------

CATEGORIES = [{"id": 1, "name": "circle"}, {"id": 2, "name": "square"},
              {"id": 3, "name": "triangle"}, {"id": 4, "name": "ellipse"}]


def _polygon(x, y, w, h):
    return [[x, y, x + w, y, x + w, y + h, x, y + h]]


def _mask_rle(x, y, w, h, size=100):
    from pycocotools import mask as mask_api

    mask = np.zeros((size, size), np.uint8)
    mask[y:y + h, x:x + w] = 1
    rle = mask_api.encode(np.asfortranarray(mask))
    rle["counts"] = rle["counts"].decode("ascii")
    return rle


def _gt(annotations):
    images = [{"id": i, "width": 100, "height": 100, "file_name": f"{i}.jpg"} for i in (1, 2, 3)]
    rows = []
    for index, (image_id, category_id, box, crowd) in enumerate(annotations):
        rows.append({"id": index + 1, "image_id": image_id, "category_id": category_id,
                     "bbox": list(box), "area": box[2] * box[3], "iscrowd": crowd,
                     "segmentation": _polygon(*box)})
    return {"images": images, "categories": CATEGORIES, "annotations": rows}


def _det(image_id, category_id, box, score):
    return {"image_id": image_id, "category_id": category_id, "bbox": [float(v) for v in box],
            "score": score, "segmentation": _mask_rle(*box)}


A, B, C, D, E, F = (10, 10, 30, 30), (50, 50, 40, 40), (5, 60, 30, 30), (60, 5, 30, 30), \
    (10, 10, 20, 20), (50, 50, 30, 30)
CONSTRUCTED_GT = _gt([
    (1, 1, A, 0),   # a circle, found as an ellipse (its look-alike)
    (1, 2, B, 0),   # a square, found as a square
    (1, 3, C, 1),   # a crowd of triangles: a detection on it is neither right nor wrong
    (2, 3, A, 0),   # a triangle nobody found
    (2, 4, B, 0),   # an ellipse found twice: the second is a false detection
    (3, 1, E, 0),   # a circle taken by a higher-scoring "square", the circle detection left over
])
CONSTRUCTED_DETECTIONS = [
    _det(1, 4, A, 0.9), _det(1, 2, B, 0.8), _det(1, 3, C, 0.7),
    _det(1, 3, D, 0.6),   # nothing there: a false triangle
    _det(1, 1, D, 0.2),   # below the confusion matrix's score threshold: not counted
    _det(2, 4, B, 0.95), _det(2, 4, B, 0.5),
    _det(3, 2, E, 0.85), _det(3, 1, E, 0.4), _det(3, 2, F, 0.35),  # F: nothing there
]


@pytest.mark.parametrize("kind", ["bbox", "segm"])
def test_the_confusion_matrix_of_a_constructed_case(kind):
    evaluations = _evaluate(CONSTRUCTED_GT, CONSTRUCTED_DETECTIONS)
    names = report.category_names([1, 2, 3, 4], CATEGORIES)
    confusion = report.build(evaluations, names)["tasks"][kind]["confusion"]
    assert confusion["labels"] == ["circle", "square", "triangle", "ellipse", "background"]
    assert confusion["score_threshold"] == 0.3 and confusion["iou"] == 0.5
    # Rows: ground truth; columns: predicted; background row: false, column: missed.
    assert confusion["matrix"] == [
        # circle square triangle ellipse background
        [0, 1, 0, 1, 0],   # circle: one as ellipse (image 1), one taken by a square (image 3)
        [0, 1, 0, 0, 0],   # square: found
        [0, 0, 0, 0, 1],   # triangle: missed (image 2); the crowd is no row
        [0, 0, 0, 1, 0],   # ellipse: found once
        [1, 1, 1, 1, 0],   # false: the leftover circle, square F, triangle D, ellipse duplicate
    ]
    assert confusion["ignored_on_crowds"] == 1
    assert confusion["most_confused"][:2] == [
        {"ground_truth": "circle", "predicted": "ellipse", "count": 1, "share": 0.5},
        {"ground_truth": "circle", "predicted": "square", "count": 1, "share": 0.5}]


def test_the_threshold_of_best_f1_on_a_constructed_score_distribution():
    def best(scores, true_positive, ground_truth, ignored=None):
        scores = np.array(scores, float)
        ignored = np.zeros(len(scores), bool) if ignored is None else np.array(ignored, bool)
        return report.best_f1(scores, np.array(true_positive, bool), ignored, ground_truth)

    # F1 = 2 TP / (TP + FP + ground truth): 0.4, 0.667, 0.571, 0.75, 0.667, 0.6 from 0.9 down.
    found = best([0.5, 0.9, 0.7, 0.8, 0.6, 0.4], [0, 1, 0, 1, 1, 0], 4)
    assert found == {"score_threshold": 0.6, "f1": 0.75, "precision": 0.75, "recall": 0.75,
                     "true_positives": 3, "false_positives": 1, "ground_truth": 4}
    # A threshold keeps every detection scoring at least it: equal scores go together (0.7 keeps
    # the false one too: F1 0.8, not the 1.0 of the true one alone).
    found = best([0.9, 0.7, 0.7], [1, 1, 0], 2)
    assert (found["score_threshold"], found["f1"], found["precision"], found["recall"]) == (
        0.7, 0.8, pytest.approx(2 / 3), 1.0)
    # Equal F1 (2/3 at 0.9 and at 0.6): the higher threshold. A detection on a crowd counts
    # neither way.
    assert best([0.9, 0.8, 0.7, 0.6], [1, 0, 0, 1], 2)["score_threshold"] == 0.9
    assert best([0.9, 0.8], [1, 1], 1, ignored=[1, 0]) == {
        "score_threshold": 0.8, "f1": 1.0, "precision": 1.0, "recall": 1.0,
        "true_positives": 1, "false_positives": 0, "ground_truth": 1}
    # Nothing found: no threshold; no ground truth: undefined.
    assert best([0.9], [0], 3)["score_threshold"] is None
    assert best([0.9], [0], 0)["f1"] is None


def test_thresholds_per_class_and_over_all_classes_of_the_constructed_case():
    # A dataset renumbered from an export's ids {3, 17, 55, 1000}: every class keeps its own.
    exported = {1: 3, 2: 17, 3: 55, 4: 1000}
    built = report.build(_evaluate(CONSTRUCTED_GT, CONSTRUCTED_DETECTIONS),
                         report.category_names([1, 2, 3, 4], CATEGORIES), source_ids=exported)
    assert [(c["id"], c["source_id"]) for c in built["categories"]] == sorted(exported.items())
    assert [(row["id"], row["source_id"]) for row in built["tasks"]["segm"]["per_class"]] == \
        sorted(exported.items())
    rows = {row["name"]: row["best_f1"] for row in built["tasks"]["bbox"]["per_class"]}
    # circle: image 3's circle detection (0.4) is its one true positive; image 1's (0.2) is false.
    assert (rows["circle"]["score_threshold"], rows["circle"]["true_positives"],
            rows["circle"]["false_positives"], rows["circle"]["recall"]) == (0.4, 1, 0, 0.5)
    # square: 0.85 (image 3, on the circle: false), 0.8 (true), 0.35 (false): best keeps 0.8.
    assert rows["square"]["score_threshold"] == 0.8 and rows["square"]["f1"] == pytest.approx(2 / 3)
    # triangle: the crowd's detection is ignored, D is false, the one triangle missed.
    assert rows["triangle"]["score_threshold"] is None and rows["triangle"]["f1"] == 0.0
    assert rows["ellipse"]["score_threshold"] == 0.95 and rows["ellipse"]["precision"] == 1.0
    overall = built["tasks"]["bbox"]["best_f1_all_classes"]
    assert overall["ground_truth"] == 5 and overall["true_positives"] >= 3


def test_class_names_come_from_the_dataset_whatever_its_ids():
    dataset = [{"id": 1, "name": "person", "source_id": 1},
               {"id": 2, "name": "stop sign", "source_id": 13}]
    assert report.category_names([1, 2], dataset) == {1: "person", 2: "stop sign"}
    assert report.category_names([1, 13], dataset) == {1: "person", 13: "stop sign"}
    assert report.category_names([7], dataset, [{"id": 7, "name": "kite"}]) == {7: "kite"}
    assert report.category_names([8], []) == {8: "8"}


def test_the_report_is_written_read_back_and_its_pictures_are_images(demo_like, tmp_path):
    gt, detections = demo_like
    evaluations = _evaluate(gt, detections)
    built = report.build(evaluations, report.category_names([1, 2, 3, 4, 5, 6], gt["categories"]),
                         step=1200, evaluator="pycocotools", timing={"inference_s": 1.0})
    files = report.write(built, str(tmp_path / "step-1200"))
    assert set(files) == {"report", "bbox_pr_curves", "bbox_confusion_matrix", "segm_pr_curves",
                          "segm_confusion_matrix"}
    back = report.read(str(tmp_path / "step-1200"))
    assert back["schema"] == report.SCHEMA and back["step"] == 1200
    assert back["files"] == {k: v.rsplit("/", 1)[1] for k, v in files.items() if k != "report"}
    assert back["timing"]["inference_s"] == 1.0 and back["timing"]["pictures_s"] > 0
    ignored = ("files", "timing")
    assert ({k: v for k, v in json.loads(json.dumps(built)).items() if k not in ignored}
            == {k: v for k, v in back.items() if k not in ignored})
    for kind, path in files.items():
        if kind != "report":
            with Image.open(path) as image:
                assert image.format == "PNG" and min(image.size) >= 400, kind
    lines = report.table(back)
    assert lines[0].startswith("class") and len(lines) == 1 + 6 + 2
    assert lines[-1].startswith("most confused (masks scoring >= 0.3, IoU >= 0.5): ")
    curve = back["tasks"]["segm"]["per_class"][0]["pr_curves"]["0.50"]
    assert len(curve["precision"]) == len(back["tasks"]["segm"]["recall_thresholds"]) == 101
    worst = report.worst_class_metrics(back)
    assert worst["eval/segm_AP_worst_class"] == min(
        row["AP"] for row in back["tasks"]["segm"]["per_class"])
    with pytest.raises(ValueError, match="schema"):
        (tmp_path / "other.json").write_text(json.dumps({"schema": "other"}))
        report.read(str(tmp_path / "other.json"))


# The training toolkit's failure scan (sagemaker-training's process.watch, in .venv-dlc as in the
# image) over the log lines on stdin: what it quotes into a failed job's FailureReason.
TOOLKIT_FAILURE_SCAN = r"""
import asyncio, contextlib, io, json, sys
from sagemaker_training import process

class Stream:
    def __init__(self, data):
        self.data = data
    async def read(self, size):
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk

with contextlib.redirect_stdout(io.StringIO()):
    quoted = asyncio.run(process.watch(Stream(sys.stdin.buffer.read()), 1))
print(json.dumps(quoted))
"""


def test_a_report_that_cannot_be_written_is_one_warning_line_the_failure_scan_reads_past(
        demo_like, tmp_path, monkeypatch):
    """The report is secondary: when it cannot be written (here a full disk), rank 0 logs one
    warning line with the cause and where it was raised, and no traceback; the evaluation's
    metrics go on. A job that fails later has its own failure quoted by the toolkit's scan
    (docs/aws-rules.md SM-9), not this warning."""
    import logging
    import subprocess

    from maskrcnn_job.training import evaluation

    gt, detections = demo_like
    evaluations = _evaluate(gt, detections)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "write", full_disk)
    # The report's part of the Evaluator alone (no model, no ranks).
    evaluator = object.__new__(evaluation.Evaluator)
    evaluator._categories, evaluator._source_ids = gt["categories"], None  # noqa: SLF001
    evaluator._report_root, evaluator._coco_gt = str(tmp_path), _coco(gt)  # noqa: SLF001
    evaluator.last_report = {"report": {}, "files": {}}
    logged = io.StringIO()
    handler = logging.StreamHandler(logged)
    # job.py's format on rank 0.
    handler.setFormatter(logging.Formatter(
        "%(asctime)s rank 0 %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger(evaluation.__name__)
    logger.addHandler(handler)
    try:
        assert evaluator._write_report(  # noqa: SLF001
            evaluations, 8, coco_evaluation.PYCOCOTOOLS, {"inference_s": 1.0}, []) == {}
    finally:
        logger.removeHandler(handler)
    assert evaluator.last_report is None  # nothing to copy beside the model
    # A failure after it: the toolkit's scan quotes from the job's own failure line.
    failure = ("Exception in the training job, rank 0 on algo-1: RuntimeError: the real cause\n"
               "Traceback (most recent call last):\n")
    scanned = subprocess.run(
        [os.path.join(REPO, ".venv-dlc", "bin", "python"), "-c", TOOLKIT_FAILURE_SCAN],
        input=(logged.getvalue() + failure).encode(), capture_output=True, timeout=120)
    assert scanned.returncode == 0, scanned.stderr.decode()[-2000:]
    quoted = json.loads(scanned.stdout)
    assert quoted.startswith(failure.splitlines()[0]), \
        f"the failure scan quotes the report's warning, not the job's failure: {quoted[:400]!r}"
    lines = logged.getvalue().splitlines()
    assert len(lines) == 1, f"more than the warning line: {lines[:4]}"
    here = os.path.basename(__file__)
    assert lines[0].split(" rank 0 ", 1)[1] == (
        "WARNING maskrcnn_job.training.evaluation: evaluation report of step 8 not written, "
        "training goes on without it: OS error: [Errno 28] No space left on device at "
        f"{here}:{full_disk.__code__.co_firstlineno + 1}")


def test_the_metric_lines_fit_sagemakers_limit():
    from maskrcnn_contract import metrics

    assert len(metrics.METRIC_DEFINITIONS) <= metrics.MAX_METRIC_DEFINITIONS == 40
    assert set(metrics.PER_CLASS_METRICS) <= set(metrics.ALL_METRICS)
    assert set(report.worst_class_metrics(
        {"tasks": {"bbox": {"per_class": [{"AP": 0.5}]},
                   "segm": {"per_class": [{"AP": None}, {"AP": 0.25}]}}})) == set(
        metrics.PER_CLASS_METRICS)


def test_ground_truth_fed_back_as_the_models_outputs_scores_ap_1_on_images_of_several_sizes(
        tmp_path):
    """The job's mapping of the model's outputs back to each image (training/evaluation.py
    _to_coco_results, through Model Garden's coco_utils): the ground truth of real-shaped images
    (several sizes, landscape and portrait, none of the model's input size) put where the model
    answers it, its boxes in the resized image's pixels as Model Garden's resize scales them (the
    long side to the input size) and its masks as 28x28 crops over the boxes, comes back as
    detections that score box AP 1.0 and mask AP50 1.0 by pycocotools against the generator's own
    annotation file. (Boxes left in the resized pixels: box AP near 0.)"""
    from pycocotools import mask as mask_api

    from maskrcnn_job.training.evaluation import _to_coco_results
    from maskrcnn_local import synthetic_coco

    size = 128
    dataset = synthetic_coco.generate(str(tmp_path), num_train=1, num_val=12, image_size=size,
                                      seed=7)["val"]
    assert len({(im["width"], im["height"]) for im in dataset["images"]}) > 3
    results = []
    for image in dataset["images"]:
        height, width = image["height"], image["width"]
        scale = size / max(height, width)  # Model Garden's resize_and_crop_image, no jitter
        instances = [a for a in dataset["annotations"]
                     if a["image_id"] == image["id"] and not a["iscrowd"]]
        boxes, masks = [], []
        for ann in instances:
            x, y, w, h = ann["bbox"]
            boxes.append([y * scale, x * scale, (y + h) * scale, (x + w) * scale])
            binary = mask_api.decode(mask_api.frPyObjects(ann["segmentation"], height, width))
            crop = binary[int(y):int(y + h), int(x):int(x + w)].astype(np.float32)
            masks.append(np.asarray(Image.fromarray(crop).resize((28, 28), Image.BILINEAR)))
        outputs = {"detection_boxes": np.array([boxes], np.float32),
                   "detection_classes": np.array([[a["category_id"] for a in instances]]),
                   "detection_scores": np.ones((1, len(instances)), np.float32),
                   "detection_masks": np.array([masks], np.float32)}
        labels = {"groundtruths": {"source_id": np.array([image["id"]])},
                  "image_info": np.array([[[height, width], [height * scale, width * scale],
                                           [scale, scale], [0, 0]]], np.float32)}
        results += _to_coco_results(outputs, labels)
    evaluations = _evaluate(dataset, results)
    assert evaluations["bbox"].stats[0] == pytest.approx(1.0)
    assert evaluations["segm"].stats[1] == pytest.approx(1.0)
