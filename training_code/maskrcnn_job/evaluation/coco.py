"""COCOeval, by pycocotools or by faster-coco-eval, on the same ground truth and detections.

pycocotools' COCOeval is the reference: its Python per-image loop is most of an evaluation's
time. faster-coco-eval (PyPI `faster-coco-eval`) implements the same COCOeval in C++ and fills
the same `eval["precision"]` [T, R, K, A, M], `eval["recall"]` and `eval["scores"]` arrays and the
same 12 `stats`; benchmarks/coco_eval_speed.py holds both to the printed precision on the demo's
model and measures the speed-up:
docs/benchmarks.md, "COCO evaluation: pycocotools and faster-coco-eval".
The job uses faster-coco-eval when it is installed (the training image and the local environment
install it, training_code/image-requirements.txt), else pycocotools, and names which in the log
and the report.

Both run on the ground truth and detections loaded once by pycocotools (Model Garden's
COCOWrapper: detections' areas are their masks'): faster-coco-eval's own COCO objects are built
over the very same annotation dictionaries, so both evaluate the same inputs.
"""

import contextlib
import importlib.metadata
import io
from typing import Callable, Optional, Sequence

PYCOCOTOOLS = "pycocotools"
FASTER_COCO_EVAL = "faster-coco-eval"
EVALUATORS = (FASTER_COCO_EVAL, PYCOCOTOOLS)  # the job's order of preference
IOU_TYPES = ("bbox", "segm")


def installed(name: str) -> bool:
    try:
        if name == FASTER_COCO_EVAL:
            import faster_coco_eval  # noqa: F401
        else:
            import pycocotools.cocoeval  # noqa: F401
    except ImportError:
        return False
    return True


def default_evaluator() -> str:
    """faster-coco-eval when installed, else pycocotools."""
    return next(name for name in EVALUATORS if name == PYCOCOTOOLS or installed(name))


def describe(name: str) -> str:
    """'<name> <version>', as the report records it."""
    try:
        return f"{name} {importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return name


def load_results(coco_gt, results: Sequence[dict]):
    """The detections as a pycocotools COCO object over `coco_gt`'s images and categories, as
    Model Garden's COCOWrapper(eval_type="mask").loadRes loads them (the job's evaluation): each
    detection's area is its mask's, ids numbered from 1; an empty list gives an empty result."""
    import copy

    from pycocotools import mask as mask_api
    from pycocotools.coco import COCO

    known = set(coco_gt.getImgIds())
    unknown = {r["image_id"] for r in results} - known
    if unknown:
        raise ValueError(f"results name images absent from the ground truth: {sorted(unknown)[:5]}")
    annotations = copy.deepcopy(list(results))
    for index, annotation in enumerate(annotations):
        annotation["area"] = float(mask_api.area(annotation["segmentation"]))
        annotation["id"] = index + 1
    coco_dt = COCO()
    coco_dt.dataset = {"images": copy.deepcopy(coco_gt.dataset["images"]),
                       "categories": copy.deepcopy(coco_gt.dataset["categories"]),
                       "annotations": annotations}
    with contextlib.redirect_stdout(io.StringIO()):
        coco_dt.createIndex()
    return coco_dt


def _faster_coco(dataset: dict):
    from faster_coco_eval import COCO

    coco = COCO()
    coco.print_function = _quiet
    coco.dataset = dataset
    coco.createIndex()
    return coco


def _quiet(*_args, **_kwargs) -> None:
    pass


def run(coco_gt, coco_dt, iou_type: str, image_ids: Optional[Sequence[int]] = None,
        evaluator: Optional[str] = None, category_ids: Optional[Sequence[int]] = None,
        print_function: Optional[Callable[[str], None]] = print):
    """A COCOeval of `iou_type` ('bbox' or 'segm') after evaluate(), accumulate() and
    summarize(): its `eval` arrays, `stats`, `params`, `cocoGt` and `cocoDt` are read by the
    report. `coco_gt` and `coco_dt` are pycocotools COCO objects; `image_ids` the images that
    count (every evaluated image, also those without a detection); `category_ids` restricts the
    evaluation to those classes (params.catIds). COCO's summary table goes to `print_function`
    (None: nowhere)."""
    if iou_type not in IOU_TYPES:
        raise ValueError(f"iou_type {iou_type!r}: expected one of {IOU_TYPES}")
    evaluator = evaluator or default_evaluator()
    if evaluator == FASTER_COCO_EVAL:
        from faster_coco_eval import COCOeval_faster

        coco_eval = COCOeval_faster(_faster_coco(coco_gt.dataset), _faster_coco(coco_dt.dataset),
                                    iouType=iou_type, print_function=print)
    elif evaluator == PYCOCOTOOLS:
        from pycocotools.cocoeval import COCOeval

        coco_eval = COCOeval(coco_gt, coco_dt, iouType=iou_type)
    else:
        raise ValueError(f"evaluator {evaluator!r}: expected one of {EVALUATORS}")
    if image_ids is not None:
        coco_eval.params.imgIds = sorted(int(i) for i in image_ids)
    if category_ids is not None:
        coco_eval.params.catIds = sorted(int(c) for c in category_ids)
    # pycocotools prints its progress and summary with print(): sent where asked.
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        coco_eval.evaluate()
        coco_eval.accumulate()
        coco_eval.summarize()
    if print_function is not None and captured.getvalue():
        print_function(captured.getvalue().rstrip("\n"))
    return coco_eval
