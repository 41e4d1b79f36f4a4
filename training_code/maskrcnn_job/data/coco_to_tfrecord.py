"""COCO-format annotations + images -> sharded TFRecords that Model Garden's Mask R-CNN reads.

Input: COCO 2017's layout (<coco>/{train2017,val2017}/*.jpg, <coco>/annotations/instances_*.json)
or a labeling tool's COCO export (data/exports.py: CVAT's, Label Studio's, one annotations file).
Output: the `train` channel, as data/layout.py defines it (shards, the val annotations, the split
record, dataset_info.json last, and a report of what --skip-invalid dropped).

Records follow Model Garden's own converter (official/vision/data/create_coco_tf_record.py,
the feature keys of data/layout.py): PNG instance masks, normalized boxes, and `image/source_id` =
the COCO image id, which the evaluation maps back to the annotation file. Category ids become
1..K in the order of the original ids (the model has K + 1 outputs, not the largest id + 1: a
tool's ids may be sparse or start anywhere); dataset_info.json keeps each original as `source_id`.
The val annotations the evaluation reads number their annotations 1..N too, each with the
export's own id as `source_id`: Label Studio numbers them from 0, and COCOeval takes a matched
ground-truth id of 0 for "matched nothing" (pycocotools cocoeval.py, COCOeval.evaluateImg stores
the matched gt['id'] in dtMatches, COCOeval.accumulate counts a detection as true positive where
that is non-zero; faster-coco-eval the same), which scores perfect detections below AP 1.

Labeling tools' traps (docs/staging.md): CVAT writes every mask as a crowd (iscrowd=1, RLE;
cvat-ai/cvat#7030), which Model Garden's parser leaves out of training, so a split whose every
annotation is a crowd is refused unless `crowd_as_instances` trains crowds as instances. The tools
annotate images as displayed, after their EXIF orientation (cvat-ai/cvat#1059, Label Studio
HumanSignal/label-studio#6608) while TensorFlow decodes the stored pixels: an image with an EXIF
orientation is turned upright (Pillow's ImageOps.exif_transpose) and re-encoded, so pixels and
annotations agree. Both tools export a box drawn with the rectangle tool with `"segmentation": []`
(maskrcnn_contract/labeling.py): such an export is refused unless `boxes_without_mask` says to
leave them out (counted and named in the notes) or to train each with its box filled as its mask.
Invalid input fails with counts per problem and examples, or with --skip-invalid is dropped and
reported: annotations are checked before anything is written, and every image is decoded once
in the worker processes (a truncated or corrupt file, a size other than the annotation file's,
a channel count other than 1, 3 or 4), so a bad image fails here, naming its file, not hours into
training. Shards are written under temporary names and renamed only once the split is complete.

Speed (benchmarks/converter_speed.py): no process imports TensorFlow or Model Garden (records
and their TFRecord framing come from maskrcnn_job/data/tf_records.py; masks and images go through
Pillow and pycocotools); the workers return records ready to append to a shard.
"""

import argparse
import collections
import contextlib
import dataclasses
import glob
import hashlib
import io
import json
import math
import multiprocessing
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
from PIL import Image, ImageOps
from pycocotools import mask as mask_api
from tqdm import tqdm

from maskrcnn_contract.labeling import (
    BOX_AS_MASK,
    BOXES_WITHOUT_MASK,
    BOXES_WITHOUT_MASK_CHOICES,
    LEAVE_OUT,
    REFUSE,
    check_boxes_without_mask,
)

from maskrcnn_job.data import exports, layout, tf_records

DEFAULT_SHARD_MB = 150
_TMP_SUFFIX = ".incomplete"


class ConversionError(ValueError):
    """The input dataset is invalid; the message has counts per problem and examples."""


@dataclasses.dataclass
class Problem:
    reason: str
    image_id: Optional[int]
    annotation_id: Optional[int] = None
    detail: str = ""


@dataclasses.dataclass
class SplitResult:
    split: str
    num_images: int
    num_instances: int
    shards: List[str]
    problems: List[Problem]
    rotated: int = 0                 # images turned upright by their EXIF orientation
    crowds: int = 0                  # crowd annotations (trained as instances when asked)
    without_annotations: int = 0     # images kept with no instance (background only)
    per_category: Dict[int, int] = dataclasses.field(default_factory=dict)  # source id -> count
    # Boxes without a mask (boxes_without_mask): left out (each named), or filled (counted).
    boxes_left_out: List[Problem] = dataclasses.field(default_factory=list)
    boxes_as_masks: int = 0


def contiguous_ids(categories: List[Dict]) -> Dict[int, int]:
    """{original category id: 1..K}, in the order of the original ids."""
    ids = [c["id"] for c in categories]
    if len(set(ids)) != len(ids):
        raise ConversionError(f"category ids repeat: {sorted(ids)}")
    return {source: index for index, source in enumerate(sorted(ids), start=1)}


def renumbered(dataset: Dict, ids: Dict[int, int], crowd_as_instances: bool = False,
               boxes_without_mask: str = REFUSE) -> Dict:
    """The COCO dict with the contiguous category ids (and crowds made instances when asked), as
    the channel's val annotations: COCOeval then compares with the records' labels. Annotations
    are numbered 1..N, each keeping the export's id as `source_id` (an id of 0 would count as
    "matched nothing" in COCOeval); boxes without a mask are left out or filled as the records."""
    annotations: List[Dict] = []
    for ann in dataset.get("annotations") or []:
        if _box_only(ann):
            if boxes_without_mask != BOX_AS_MASK:
                continue  # left out (a split that holds any is refused under REFUSE)
            ann = _filled(ann)
        ann = dict(ann, category_id=ids.get(ann.get("category_id"), ann.get("category_id")),
                   id=len(annotations) + 1, source_id=ann.get("id"))
        if crowd_as_instances:
            ann["iscrowd"] = 0
        annotations.append(ann)
    return {**dataset, "annotations": annotations,
            "categories": [dict(c, id=ids[c["id"]]) for c in dataset["categories"]]}


def _segmentation_rle(segmentation, height: int, width: int):
    """The annotation's mask as one RLE; raises ValueError naming what is malformed."""
    if isinstance(segmentation, list):
        if not segmentation:
            raise ValueError("empty polygon list")
        for polygon in segmentation:
            if (not isinstance(polygon, list) or len(polygon) < 6 or len(polygon) % 2
                    or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in polygon)):
                raise ValueError("polygon needs an even number (>= 6) of finite coordinates")
        return mask_api.merge(mask_api.frPyObjects(segmentation, height, width))
    if isinstance(segmentation, dict) and "counts" in segmentation and "size" in segmentation:
        if list(segmentation["size"]) != [height, width]:
            raise ValueError(f"RLE size {segmentation['size']} != image size {[height, width]}")
        counts = segmentation["counts"]
        if isinstance(counts, list):  # uncompressed RLE (COCO crowd annotations)
            if sum(counts) != height * width or any(c < 0 for c in counts):
                raise ValueError("uncompressed RLE counts do not cover the image")
            return mask_api.frPyObjects(segmentation, height, width)
        if isinstance(counts, str):
            rle = {"size": [height, width], "counts": counts.encode("ascii")}
            if int(mask_api.decode(rle).size) != height * width:
                raise ValueError("compressed RLE does not decode to the image size")
            return rle
    raise ValueError("segmentation is neither polygons nor RLE")


BOX_WITHOUT_MASK = "box without a mask"


def _box_only(ann: Dict) -> bool:
    """A box drawn with a rectangle tool: no segmentation, or an empty list, as CVAT's (Datumaro's
    coco exporter, _InstancesExporter.convert_instance) and Label Studio's COCO export
    (label_studio_sdk Converter.convert_to_coco, `rectanglelabels`) write it."""
    return ann.get("segmentation") in (None, [])


def _filled(ann: Dict) -> Dict:
    """The annotation with its box as its mask (a polygon on the box's corners); as it is when
    its box is malformed (validate reports that)."""
    bbox = ann.get("bbox")
    if not (isinstance(bbox, list) and len(bbox) == 4
            and all(isinstance(v, (int, float)) and math.isfinite(v) for v in bbox)):
        return ann
    x, y, w, h = bbox
    return dict(ann, segmentation=[[x, y, x + w, y, x + w, y + h, x, y + h]])


def _check_box(ann: Dict, image: Dict, category_ids) -> Optional[Tuple[str, str]]:
    """Returns (problem, detail) when the annotation's category or box is invalid, else None."""
    if ann.get("category_id") not in category_ids:
        return "unknown category id", f"category_id {ann.get('category_id')!r}"
    bbox = ann.get("bbox")
    if not (isinstance(bbox, list) and len(bbox) == 4
            and all(isinstance(v, (int, float)) and math.isfinite(v) for v in bbox)):
        return "malformed bbox", f"bbox {bbox!r}"
    x, y, w, h = bbox
    if w <= 0 or h <= 0:
        return "empty bbox", f"bbox {bbox}"
    # COCO has boxes that overshoot the border by a fraction of a pixel; more than 1 px is wrong.
    if x < -1 or y < -1 or x + w > image["width"] + 1 or y + h > image["height"] + 1:
        return "bbox outside image", f"bbox {bbox}, image {image['width']}x{image['height']}"
    return None


def _check_annotation(ann: Dict, image: Dict, category_ids) -> Optional[Tuple[str, str]]:
    """Returns (problem, detail) when the annotation is invalid, else None."""
    invalid = _check_box(ann, image, category_ids)
    if invalid:
        return invalid
    try:
        rle = _segmentation_rle(ann.get("segmentation"), image["height"], image["width"])
    except (ValueError, TypeError) as error:
        return "bad segmentation", str(error)
    if int(mask_api.area(rle)) == 0:
        return "empty segmentation", "the mask covers no pixel"
    return None


def validate(dataset: Dict, image_dir: str, boxes_without_mask: str = REFUSE
             ) -> Tuple[List[Tuple[Dict, List[Dict]]], List[Problem], List[Problem]]:
    """Checks the whole split before anything is written.

    Returns (image, valid annotations) pairs sorted by image id, every problem found, and the
    boxes without a mask (of a valid category and box); with `boxes_without_mask` BOX_AS_MASK
    each of them is also among the valid annotations, its box filled as its mask.
    """
    check_boxes_without_mask(boxes_without_mask)
    boxes: List[Problem] = []
    problems: List[Problem] = []
    categories = dataset.get("categories") or []
    category_ids = {c["id"] for c in categories}
    if not categories:
        raise ConversionError("the annotation file has no categories")
    images = sorted(dataset.get("images") or [], key=lambda im: im["id"])
    if not images:
        raise ConversionError("the annotation file has no images")
    if not dataset.get("annotations"):
        raise ConversionError("the annotation file has no annotations")
    by_image = collections.defaultdict(list)
    image_ids = {im["id"] for im in images}
    for ann in dataset["annotations"]:
        if ann.get("image_id") not in image_ids:
            problems.append(Problem("unknown image id", ann.get("image_id"), ann.get("id")))
        else:
            by_image[ann["image_id"]].append(ann)
    kept = []
    for image in images:
        if not (isinstance(image.get("height"), int) and isinstance(image.get("width"), int)
                and image["height"] > 0 and image["width"] > 0):
            problems.append(Problem("bad image size", image["id"],
                                    detail=f"{image.get('width')}x{image.get('height')}"))
            continue
        if not os.path.isfile(os.path.join(image_dir, image["file_name"])):
            problems.append(Problem("missing image file", image["id"],
                                    detail=os.path.join(image_dir, image["file_name"])))
            continue
        valid = []
        for ann in sorted(by_image[image["id"]], key=lambda a: a["id"]):
            if _box_only(ann) and not _check_box(ann, image, category_ids):
                boxes.append(Problem(BOX_WITHOUT_MASK, image["id"], ann.get("id"),
                                     image["file_name"]))
                if boxes_without_mask != BOX_AS_MASK:
                    continue
                ann = _filled(ann)
            invalid = _check_annotation(ann, image, category_ids)
            if invalid:
                problems.append(Problem(invalid[0], image["id"], ann.get("id"), invalid[1]))
            else:
                valid.append(ann)
        kept.append((image, valid))
    return kept, problems, boxes


_FORMATS = {"JPEG": "jpeg", "PNG": "png"}  # what Model Garden's decoder reads


def _image_problem(encoded: bytes, image: Dict) -> Optional[Tuple[str, str]]:
    """Decodes the image once; returns (problem, detail) when training could not use it. Its
    size is the displayed one, after its EXIF orientation, as the labeling tools annotate it."""
    try:
        with Image.open(io.BytesIO(encoded)) as decoded:
            size, bands, image_format = decoded.size, len(decoded.getbands()), decoded.format
            if exports.exif_orientation(decoded) in exports.QUARTER_TURNS:
                size = size[::-1]
            # JPEG: libjpeg's DCT scaling still reads every coefficient of the stream (a
            # truncated or corrupt one fails), and runs the inverse DCT at 1/8 size: half the time.
            decoded.draft(decoded.mode, (max(1, size[0] // 8), max(1, size[1] // 8)))
            decoded.load()
    except Exception as error:  # noqa: BLE001  (Pillow raises OSError, SyntaxError, ValueError...)
        return "undecodable image", f"{type(error).__name__}: {error}"
    if image_format not in _FORMATS:
        return "unsupported image format", f"{image_format}, not JPEG or PNG"
    if size != (image["width"], image["height"]):
        return ("image size differs from the annotation file",
                f"decoded {size[0]}x{size[1]}, annotated {image['width']}x{image['height']}")
    if bands not in (1, 3, 4):
        return "unsupported channel count", f"{bands} channels, not 1, 3 or 4"
    return None


def _mask_png(binary: np.ndarray) -> bytes:
    """As Model Garden's tfrecord_lib.encode_mask_as_png, with zlib's fastest level: 2.3x faster
    for masks ~50% larger, next to images 50-100x their size. pycocotools decodes to a
    column-major array; made row-major first, which Pillow copies 5x faster."""
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(binary)).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def _upright(encoded: bytes) -> Optional[bytes]:
    """The image turned as its EXIF orientation says, re-encoded in its format without the tag;
    None when it has no orientation to apply."""
    with Image.open(io.BytesIO(encoded)) as decoded:
        if exports.exif_orientation(decoded) == 1:
            return None
        image_format = decoded.format
        turned = ImageOps.exif_transpose(decoded)
        out = io.BytesIO()
        turned.save(out, format=image_format, **({"quality": 95} if image_format == "JPEG"
                                                  else {}))
    return out.getvalue()


def _encode_image(args: Tuple[Dict, List[Dict], str, Dict[int, Tuple[int, str]], bool]
                  ) -> Tuple[Optional[bytes], Optional[Problem], bool]:
    """One image -> (its tf.Example as a framed TFRecord record, None, whether it was turned
    upright), or (None, the problem with its file, False). `labels`: {original category id:
    (contiguous id, name)}."""
    image, annotations, image_dir, labels, crowd_as_instances = args
    path = os.path.join(image_dir, image["file_name"])
    with open(path, "rb") as f:
        encoded = f.read()
    invalid = _image_problem(encoded, image)
    if invalid:
        return None, Problem(invalid[0], image["id"], detail=f"{path}: {invalid[1]}"), False
    upright = _upright(encoded)
    if upright is not None:
        encoded = upright
    height, width = image["height"], image["width"]
    image_format = "png" if encoded[:4] == b"\x89PNG" else "jpeg"
    # Model Garden's tfrecord_lib.image_info_to_feature_dict, key for key.
    features = {
        layout.IMAGE_HEIGHT: tf_records.int64_feature([height]),
        layout.IMAGE_WIDTH: tf_records.int64_feature([width]),
        layout.IMAGE_FILENAME: tf_records.bytes_feature([image["file_name"].encode("utf8")]),
        layout.IMAGE_SOURCE_ID: tf_records.bytes_feature([str(image["id"]).encode("utf8")]),
        layout.IMAGE_KEY_SHA256: tf_records.bytes_feature(
            [hashlib.sha256(encoded).hexdigest().encode("utf8")]),
        layout.IMAGE_ENCODED: tf_records.bytes_feature([encoded]),
        layout.IMAGE_FORMAT: tf_records.bytes_feature([image_format.encode("utf8")]),
    }
    if annotations:
        boxes = np.array([a["bbox"] for a in annotations], dtype=np.float64)
        x0 = np.clip(boxes[:, 0], 0, width)
        y0 = np.clip(boxes[:, 1], 0, height)
        x1 = np.clip(boxes[:, 0] + boxes[:, 2], 0, width)
        y1 = np.clip(boxes[:, 1] + boxes[:, 3], 0, height)
        masks = [_mask_png(mask_api.decode(_segmentation_rle(a["segmentation"], height, width)))
                 for a in annotations]
        features.update({
            layout.BOX_XMIN: tf_records.float_feature(x0 / width),
            layout.BOX_XMAX: tf_records.float_feature(x1 / width),
            layout.BOX_YMIN: tf_records.float_feature(y0 / height),
            layout.BOX_YMAX: tf_records.float_feature(y1 / height),
            layout.CLASS_LABEL: tf_records.int64_feature(
                labels[a["category_id"]][0] for a in annotations),
            layout.CLASS_TEXT: tf_records.bytes_feature(
                labels[a["category_id"]][1].encode("utf8") for a in annotations),
            layout.IS_CROWD: tf_records.int64_feature(
                0 if crowd_as_instances else int(a.get("iscrowd", 0)) for a in annotations),
            layout.AREA: tf_records.float_feature(float(a["area"]) for a in annotations),
            layout.MASK: tf_records.bytes_feature(masks),
        })
    return tf_records.framed(tf_records.example(features)), None, upright is not None


@contextlib.contextmanager
def _encoded(items, image_dir: str, labels, crowd_as_instances: bool, workers: int):
    """(record, problem, turned) per item, in the items' order (shards are identical whatever the
    number of workers). Spawned workers: the parent may already hold TensorFlow's threads."""
    jobs = ((image, anns, image_dir, labels, crowd_as_instances) for image, anns in items)
    if workers <= 1:
        yield map(_encode_image, jobs)
        return
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        yield pool.imap(_encode_image, jobs, chunksize=16)


def _remove_split_outputs(tfrecord_dir: str, split: str) -> None:
    for path in glob.glob(os.path.join(tfrecord_dir, f"{split}-*")):
        os.remove(path)


CROWD_OPTION = "crowd_as_instances"


def _load_annotations(annotation_file: str) -> Dict:
    if not os.path.isfile(annotation_file):
        raise ConversionError(f"annotation file {annotation_file} does not exist")
    with open(annotation_file, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as error:
            raise ConversionError(f"{annotation_file} is not valid JSON: {error}") from None


def _refuse_all_crowds(annotation_file: str, items, crowd_as_instances: bool) -> None:
    """Model Garden's parser drops crowd annotations from training: a split of crowds only would
    train on nothing. CVAT's COCO 1.0 export marks every mask so (cvat-ai/cvat#7030)."""
    flags = [int(a.get("iscrowd", 0)) for _, anns in items for a in anns]
    if flags and all(flags) and not crowd_as_instances:
        raise ConversionError(
            f"{annotation_file}: all {len(flags)} annotations are crowds (iscrowd=1), which "
            "Model Garden's Mask R-CNN leaves out of training, so this split would train on "
            "nothing. CVAT's COCO 1.0 export marks every mask so (cvat-ai/cvat#7030): set "
            f"{CROWD_OPTION}=true (--crowd-as-instances) to train them as instances")


def _refuse_boxes(annotation_file: str, boxes: List[Problem], boxes_without_mask: str) -> None:
    """Boxes without a mask are refused unless the user chose what to do with them: never left
    out silently (Detectron2 drops them with a warning, detectron2/data/datasets/coco.py)."""
    if not boxes or boxes_without_mask != REFUSE:
        return
    example = boxes[0]
    raise ConversionError(
        f"{annotation_file}: {len(boxes)} annotation(s) are boxes without a mask (drawn with the "
        f"rectangle tool: \"segmentation\": [], e.g. annotation {example.annotation_id} of image "
        f"{example.image_id}, {example.detail}). Mask R-CNN needs a mask per instance. Choose: "
        f"{BOXES_WITHOUT_MASK}={LEAVE_OUT} (--boxes-without-mask {LEAVE_OUT}) leaves them out of "
        "training and evaluation, counted and named in the dataset's notes; "
        f"{BOXES_WITHOUT_MASK}={BOX_AS_MASK} (--boxes-without-mask {BOX_AS_MASK}) trains each "
        "with its box filled as its mask")


def convert_split(annotation_file: str, image_dir: str, tfrecord_dir: str, split: str,
                  shard_mb: float = DEFAULT_SHARD_MB, skip_invalid: bool = False,
                  workers: int = 1, progress: bool = True, dataset: Optional[Dict] = None,
                  crowd_as_instances: bool = False,
                  boxes_without_mask: str = REFUSE) -> SplitResult:
    """Writes <tfrecord_dir>/<split>-NNNNN-of-MMMMM.tfrecord; returns what was written.
    `dataset`: the annotations already read (and named by `annotation_file`), else read from it.
    `crowd_as_instances`: crowd annotations are trained as instances (else a split of crowds only
    is refused). `boxes_without_mask` (maskrcnn_contract.labeling): REFUSE a split with boxes
    without a mask, LEAVE_OUT them (listed in <split>-skipped.json), or train them BOX_AS_MASK."""
    if dataset is None:
        dataset = _load_annotations(annotation_file)
    if not os.path.isdir(image_dir):
        raise ConversionError(f"image directory {image_dir} does not exist")
    items, problems, boxes = validate(dataset, image_dir, boxes_without_mask)
    filled = len(boxes) if boxes_without_mask == BOX_AS_MASK else 0
    if filled:
        boxes = []  # trained, each with its box as its mask
    _refuse_boxes(annotation_file, boxes, boxes_without_mask)
    _refuse_invalid(annotation_file, problems, skip_invalid, len(items), "fix the input")
    _refuse_all_crowds(annotation_file, items, crowd_as_instances)
    ids = contiguous_ids(dataset["categories"])
    labels = {c["id"]: (ids[c["id"]], c["name"]) for c in dataset["categories"]}

    os.makedirs(tfrecord_dir, exist_ok=True)
    _remove_split_outputs(tfrecord_dir, split)
    shard_limit = shard_mb * 1e6
    temp_paths: List[str] = []
    writer, written = None, 0
    images = instances = rotated = crowds = empty = 0
    per_category: Dict[int, int] = collections.Counter()
    bad_images: List[Problem] = []
    try:
        with _encoded(items, image_dir, labels, crowd_as_instances, workers) as results:
            for (_image, anns), (record, problem, turned) in tqdm(
                    zip(items, results), total=len(items), desc=f"{split} -> TFRecord",
                    unit="img", disable=not progress):
                if problem:
                    bad_images.append(problem)
                if problem or (bad_images and not skip_invalid):
                    continue  # without --skip-invalid, go on only to report every bad image
                if writer is None or written >= shard_limit:
                    if writer:
                        writer.close()
                    temp_paths.append(os.path.join(
                        tfrecord_dir, f"{split}-{len(temp_paths):05d}.tfrecord{_TMP_SUFFIX}"))
                    writer, written = open(temp_paths[-1], "wb"), 0  # noqa: SIM115
                writer.write(record)
                written += len(record)
                images += 1
                instances += len(anns)
                rotated += turned
                crowds += sum(int(a.get("iscrowd", 0)) for a in anns)
                empty += not anns
                per_category.update(a["category_id"] for a in anns)
        if writer:
            writer.close()
            writer = None
        _refuse_invalid(annotation_file, bad_images, skip_invalid, images,
                        "fix or remove these images")
    except BaseException:
        if writer:
            writer.close()
        for path in temp_paths:
            if os.path.exists(path):
                os.remove(path)
        raise
    problems += bad_images
    # The split is complete: only now do shards get names that the training job matches.
    shards = []
    for index, temp in enumerate(temp_paths):
        final = os.path.join(tfrecord_dir, layout.shard_name(split, index, len(temp_paths)))
        os.replace(temp, final)
        shards.append(os.path.basename(final))
    if problems or boxes:
        report = {"annotation_file": annotation_file,
                  "counts": collections.Counter(p.reason for p in problems),
                  "skipped": [dataclasses.asdict(p) for p in problems]}
        if boxes:  # left out as the user chose (boxes_without_mask=leave_out), each named
            report[f"{BOXES_WITHOUT_MASK}_{LEAVE_OUT}"] = [dataclasses.asdict(p) for p in boxes]
        _write_json(os.path.join(tfrecord_dir, layout.skipped_report_name(split)), report)
    return SplitResult(split, images, instances, shards, problems, rotated, crowds, empty,
                       dict(per_category), boxes, filled)


def _refuse_invalid(annotation_file: str, problems: List[Problem], skip_invalid: bool,
                    kept: int, fix: str) -> None:
    """Fails with the problems (unless they are to be skipped), or when nothing is left."""
    if problems and not skip_invalid:
        raise ConversionError(_problem_summary(annotation_file, problems)
                              + f"\n{fix}, or pass --skip-invalid to drop these and write a "
                              "report")
    if not kept:
        raise ConversionError(f"{annotation_file}: no valid image left to convert")


def _problem_summary(annotation_file: str, problems: List[Problem]) -> str:
    counts = collections.Counter(p.reason for p in problems)
    lines = [f"{annotation_file}: {len(problems)} invalid record(s):"]
    for reason, count in counts.most_common():
        example = next(p for p in problems if p.reason == reason)
        lines.append(f"  {count} x {reason} (e.g. image {example.image_id}"
                     + (f", annotation {example.annotation_id}"
                        if example.annotation_id is not None else "")
                     + (f": {example.detail}" if example.detail else "") + ")")
    return "\n".join(lines)


def _write_json(path: str, payload, make_dirs: bool = False) -> None:
    if make_dirs:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + _TMP_SUFFIX, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1)
    os.replace(path + _TMP_SUFFIX, path)


def convert_sources(sources: List[exports.SplitSource], out_dir: str, name: str = "",
                    source: Optional[Dict] = None, crowd_as_instances: bool = False,
                    shard_mb: float = DEFAULT_SHARD_MB, skip_invalid: bool = False,
                    workers: int = 1, progress: bool = True,
                    boxes_without_mask: str = REFUSE) -> Dict[str, SplitResult]:
    """Converts the splits into the `train` channel layout (data/layout.py): the shards, the val
    annotations with the contiguous ids, the split record (`source`, when the export was split
    here) and dataset_info.json (the categories with their original ids, what the export was,
    and notes on what the user should know), last."""
    try:
        check_boxes_without_mask(boxes_without_mask)
    except ValueError as error:
        raise ConversionError(str(error)) from None
    channel = layout.Channel(out_dir)
    categories = sources[0].dataset.get("categories") or []
    for other in sources[1:]:
        theirs = other.dataset.get("categories") or []
        if sorted((c.get("id"), c.get("name")) for c in theirs) != \
                sorted((c.get("id"), c.get("name")) for c in categories):
            raise ConversionError(
                f"{other.annotation_file} and {sources[0].annotation_file} list other categories: "
                "the splits of one dataset share its classes")
    # Boxes without a mask are refused for the whole export at once, before anything is written.
    boxes = []
    for item in sources:
        names = {im.get("id"): im.get("file_name") for im in item.dataset.get("images") or []}
        boxes += [Problem(BOX_WITHOUT_MASK, a.get("image_id"), a.get("id"),
                          names.get(a.get("image_id"), ""))
                  for a in item.dataset.get("annotations") or [] if _box_only(a)]
    _refuse_boxes(", ".join(sorted({item.annotation_file for item in sources})), boxes,
                  boxes_without_mask)
    results = {}
    for item in sources:
        results[item.split] = convert_split(
            item.annotation_file, item.image_dir, channel.tfrecord_dir, item.split, shard_mb,
            skip_invalid, workers, progress, dataset=item.dataset,
            crowd_as_instances=crowd_as_instances, boxes_without_mask=boxes_without_mask)
    ids = contiguous_ids(categories)
    for item in sources:
        if item.split == layout.VAL:
            # The evaluation compares against the annotations, with the records' category ids.
            _write_json(channel.annotations(layout.VAL),
                        renumbered(item.dataset, ids, crowd_as_instances, boxes_without_mask),
                        make_dirs=True)
    if source and "split" in source:
        _write_json(os.path.join(channel.root, layout.ANNOTATIONS_DIR, layout.SPLIT_RECORD),
                    source["split"], make_dirs=True)
    channel.write_info(layout.DatasetInfo(
        num_classes=len(ids) + 1,
        categories=[{**{k: v for k, v in c.items() if k != "id"}, "id": ids[c["id"]],
                     "source_id": c["id"]} for c in sorted(categories, key=lambda c: c["id"])],
        splits={s: layout.SplitInfo(num_images=r.num_images, num_instances=r.num_instances,
                                    shards=r.shards, skipped=len(r.problems))
                for s, r in results.items()},
        name=name, source=_summary(source or {}),
        notes=list((source or {}).get("notes", [])) + notes(categories, results,
                                                            crowd_as_instances)))
    return results


def _summary(source: Dict) -> Dict:
    """dataset_info.json's `source`: the export's format and files, and how it was split (the
    images of each split are in annotations/split.json)."""
    summary = {k: v for k, v in source.items() if k not in ("split", "notes")}
    if "split" in source:
        summary["split"] = {k: v for k, v in source["split"].items() if k != "images"}
    return summary


def notes(categories: List[Dict], results: Dict[str, SplitResult],
          crowd_as_instances: bool) -> List[str]:
    """What the user should know of the converted dataset (dataset_info.json's `notes`)."""
    found = []
    counted: collections.Counter = collections.Counter()
    for result in results.values():
        counted.update(result.per_category)
    empty = [f"{c['name']} (id {c['id']})" for c in sorted(categories, key=lambda c: c["id"])
             if not counted[c["id"]]]
    if empty:
        found.append(f"{len(empty)} categor{'y has' if len(empty) == 1 else 'ies have'} no "
                     f"annotation, so the model cannot learn {'it' if len(empty) == 1 else 'them'}"
                     f": {', '.join(empty)}")
    for split, result in results.items():
        if result.without_annotations:
            found.append(f"{split}: {result.without_annotations} of {result.num_images} images "
                         "have no annotation (kept: background only)")
        if result.rotated:
            found.append(f"{split}: {result.rotated} image(s) turned upright by their EXIF "
                         "orientation, as the labeling tools display and annotate them")
        if result.crowds:
            found.append(f"{split}: {result.crowds} crowd annotation(s) (iscrowd=1) "
                         + ("trained as instances (crowd_as_instances=true)" if crowd_as_instances
                            else "left out of training, as Model Garden does"))
        if result.boxes_left_out:
            named = ", ".join(f"annotation {p.annotation_id} of image {p.image_id} ({p.detail})"
                              for p in result.boxes_left_out[:5])
            more = len(result.boxes_left_out) - 5
            found.append(f"{split}: {len(result.boxes_left_out)} box(es) without a mask left out "
                         f"of training and evaluation ({BOXES_WITHOUT_MASK}={LEAVE_OUT}): {named}"
                         + (f" and {more} more" if more > 0 else "") + ", all listed in "
                         f"{layout.TFRECORD_DIR}/{layout.skipped_report_name(split)}")
        if result.boxes_as_masks:
            found.append(f"{split}: {result.boxes_as_masks} box(es) without a mask trained with "
                         f"the box filled as the mask ({BOXES_WITHOUT_MASK}={BOX_AS_MASK})")
        if result.problems:
            found.append(f"{split}: {len(result.problems)} invalid record(s) skipped, listed in "
                         f"{layout.TFRECORD_DIR}/{layout.skipped_report_name(split)}")
    return found


def convert_coco_dir(coco_dir: str, out_dir: str, splits=layout.SPLITS, year: str = "2017",
                     shard_mb: float = DEFAULT_SHARD_MB, skip_invalid: bool = False,
                     workers: int = 1, progress: bool = True, name: str = "",
                     crowd_as_instances: bool = False,
                     boxes_without_mask: str = REFUSE) -> Dict[str, SplitResult]:
    """Converts a COCO-layout directory (`<split><year>/`,
    `annotations/instances_<split><year>.json`) into the `train` channel layout (data/layout.py)."""
    sources = []
    for split in splits:
        annotation_file = os.path.join(coco_dir, "annotations", f"instances_{split}{year}.json")
        sources.append(exports.SplitSource(split, _load_annotations(annotation_file),
                                           os.path.join(coco_dir, f"{split}{year}"),
                                           annotation_file))
    source = {"format": exports.COCO2017 if year == "2017" else exports.COCO,
              "files": [os.path.relpath(s.annotation_file, coco_dir) for s in sources]}
    return convert_sources(sources, out_dir, name, source, crowd_as_instances, shard_mb,
                           skip_invalid, workers, progress, boxes_without_mask)


def convert_export(export_path: str, out_dir: str, name: str = "",
                   val_fraction: float = 0.2, seed: int = 0, crowd_as_instances: bool = False,
                   shard_mb: float = DEFAULT_SHARD_MB, skip_invalid: bool = False,
                   workers: int = 1, progress: bool = True,
                   work_dir: Optional[str] = None,
                   boxes_without_mask: str = REFUSE) -> Dict[str, SplitResult]:
    """Converts a labeling tool's COCO export (a directory or a .zip, data/exports.py) into the
    `train` channel layout; an export with one annotations file is split by `val_fraction` and
    `seed`. Raises ConversionError (an exports.ExportError among them) naming what is wrong."""
    try:
        root = exports.prepare(export_path, work_dir or os.path.dirname(os.path.abspath(out_dir)))
        sources, record = exports.load(exports.find(root), val_fraction, seed)
    except exports.ExportError as error:
        raise ConversionError(str(error)) from None
    return convert_sources(sources, out_dir, name, record, crowd_as_instances, shard_mb,
                           skip_invalid, workers, progress, boxes_without_mask)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("coco_dir", help="COCO 2017's layout (train2017/, val2017/, "
                        "annotations/), or a labeling tool's COCO export (a directory or .zip)")
    parser.add_argument("out_dir", help="channel directory to write")
    parser.add_argument("--splits", default="train,val", help="comma-separated (train,val)")
    parser.add_argument("--name", default="", help="the dataset's name, for dataset_info.json")
    parser.add_argument("--val-fraction", type=float, default=0.2,
                        help="an export with one annotations file: the share of images for val")
    parser.add_argument("--split-seed", type=int, default=0, help="the seed of that split")
    parser.add_argument("--crowd-as-instances", action="store_true",
                        help=f"train crowd annotations as instances ({CROWD_OPTION})")
    parser.add_argument("--boxes-without-mask", choices=BOXES_WITHOUT_MASK_CHOICES,
                        default=REFUSE,
                        help="annotations that are boxes without a mask (a rectangle tool's, "
                        f"\"segmentation\": []): {REFUSE} the export (default), {LEAVE_OUT} "
                        f"(counted and named in the notes), or {BOX_AS_MASK} "
                        f"({BOXES_WITHOUT_MASK})")
    parser.add_argument("--shard-mb", type=float, default=DEFAULT_SHARD_MB,
                        help=f"target shard size in MB ({DEFAULT_SHARD_MB})")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="drop invalid images/annotations and write <split>-skipped.json")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="encoding processes (all cores)")
    args = parser.parse_args(argv)
    common = dict(shard_mb=args.shard_mb, skip_invalid=args.skip_invalid, workers=args.workers,
                  name=args.name, crowd_as_instances=args.crowd_as_instances,
                  boxes_without_mask=args.boxes_without_mask)
    try:
        if os.path.isfile(os.path.join(args.coco_dir, "annotations", "instances_train2017.json")):
            results = convert_coco_dir(args.coco_dir, args.out_dir,
                                       tuple(args.splits.split(",")), **common)
        else:
            results = convert_export(args.coco_dir, args.out_dir, val_fraction=args.val_fraction,
                                     seed=args.split_seed, **common)
    except ConversionError as error:
        raise SystemExit(f"error: {error}") from None
    for r in results.values():
        print(f"{r.split}: {r.num_images} images, {r.num_instances} instances, "
              f"{len(r.shards)} shard(s), {len(r.problems)} skipped")
    # The info as written: --splits may have converted one split, which read_info() refuses.
    with open(layout.Channel(args.out_dir).info_file, encoding="utf-8") as f:
        for note in layout.DatasetInfo.from_json(json.load(f)).notes:
            print(f"note: {note}")


if __name__ == "__main__":
    main()
