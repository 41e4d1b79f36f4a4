"""COCO-format annotations + images -> sharded TFRecords that Model Garden's Mask R-CNN reads.

Input, COCO 2017's layout:  <coco>/{train2017,val2017}/*.jpg  <coco>/annotations/instances_*.json
Output: the `train` channel, as data/layout.py defines it (shards, the val annotations,
dataset_info.json last, and a report of what --skip-invalid dropped).

Records follow Model Garden's own converter (official/vision/data/create_coco_tf_record.py,
the feature keys of data/layout.py): PNG instance masks, normalized boxes, raw COCO category ids, and
`image/source_id` = the COCO image id, which the evaluation maps back to the annotation file.
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
import shutil
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
from PIL import Image
from pycocotools import mask as mask_api
from tqdm import tqdm

from maskrcnn_job.data import layout, tf_records

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


def _check_annotation(ann: Dict, image: Dict, category_ids) -> Optional[Tuple[str, str]]:
    """Returns (problem, detail) when the annotation is invalid, else None."""
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
    try:
        rle = _segmentation_rle(ann.get("segmentation"), image["height"], image["width"])
    except (ValueError, TypeError) as error:
        return "bad segmentation", str(error)
    if int(mask_api.area(rle)) == 0:
        return "empty segmentation", "the mask covers no pixel"
    return None


def validate(dataset: Dict, image_dir: str) -> Tuple[List[Tuple[Dict, List[Dict]]], List[Problem]]:
    """Checks the whole split before anything is written.

    Returns (image, valid annotations) pairs sorted by image id, and every problem found.
    """
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
            invalid = _check_annotation(ann, image, category_ids)
            if invalid:
                problems.append(Problem(invalid[0], image["id"], ann.get("id"), invalid[1]))
            else:
                valid.append(ann)
        kept.append((image, valid))
    return kept, problems


_FORMATS = {"JPEG": "jpeg", "PNG": "png"}  # what Model Garden's decoder reads


def _image_problem(encoded: bytes, image: Dict) -> Optional[Tuple[str, str]]:
    """Decodes the image once; returns (problem, detail) when training could not use it."""
    try:
        with Image.open(io.BytesIO(encoded)) as decoded:
            size, bands, image_format = decoded.size, len(decoded.getbands()), decoded.format
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


def _encode_image(args: Tuple[Dict, List[Dict], str, Dict[int, str]]
                  ) -> Tuple[Optional[bytes], Optional[Problem]]:
    """One image -> (its tf.Example as a framed TFRecord record, None), or (None, the problem
    with its file)."""
    image, annotations, image_dir, category_names = args
    path = os.path.join(image_dir, image["file_name"])
    with open(path, "rb") as f:
        encoded = f.read()
    invalid = _image_problem(encoded, image)
    if invalid:
        return None, Problem(invalid[0], image["id"], detail=f"{path}: {invalid[1]}")
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
                a["category_id"] for a in annotations),
            layout.CLASS_TEXT: tf_records.bytes_feature(
                category_names[a["category_id"]].encode("utf8") for a in annotations),
            layout.IS_CROWD: tf_records.int64_feature(
                int(a.get("iscrowd", 0)) for a in annotations),
            layout.AREA: tf_records.float_feature(float(a["area"]) for a in annotations),
            layout.MASK: tf_records.bytes_feature(masks),
        })
    return tf_records.framed(tf_records.example(features)), None


@contextlib.contextmanager
def _encoded(items, image_dir: str, category_names, workers: int):
    """(record, problem) per item, in the items' order (shards are identical whatever the number
    of workers). Spawned workers: the parent may already hold TensorFlow's threads."""
    jobs = ((image, anns, image_dir, category_names) for image, anns in items)
    if workers <= 1:
        yield map(_encode_image, jobs)
        return
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        yield pool.imap(_encode_image, jobs, chunksize=16)


def _remove_split_outputs(tfrecord_dir: str, split: str) -> None:
    for path in glob.glob(os.path.join(tfrecord_dir, f"{split}-*")):
        os.remove(path)


def convert_split(annotation_file: str, image_dir: str, tfrecord_dir: str, split: str,
                  shard_mb: float = DEFAULT_SHARD_MB, skip_invalid: bool = False,
                  workers: int = 1, progress: bool = True) -> SplitResult:
    """Writes <tfrecord_dir>/<split>-NNNNN-of-MMMMM.tfrecord; returns what was written."""
    if not os.path.isfile(annotation_file):
        raise ConversionError(f"annotation file {annotation_file} does not exist")
    if not os.path.isdir(image_dir):
        raise ConversionError(f"image directory {image_dir} does not exist")
    with open(annotation_file, encoding="utf-8") as f:
        try:
            dataset = json.load(f)
        except json.JSONDecodeError as error:
            raise ConversionError(f"{annotation_file} is not valid JSON: {error}") from None
    items, problems = validate(dataset, image_dir)
    _refuse_invalid(annotation_file, problems, skip_invalid, len(items), "fix the input")
    category_names = {c["id"]: c["name"] for c in dataset["categories"]}

    os.makedirs(tfrecord_dir, exist_ok=True)
    _remove_split_outputs(tfrecord_dir, split)
    shard_limit = shard_mb * 1e6
    temp_paths: List[str] = []
    writer, written = None, 0
    images = instances = 0
    bad_images: List[Problem] = []
    try:
        with _encoded(items, image_dir, category_names, workers) as results:
            for (image, anns), (record, problem) in tqdm(
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
    if problems:
        _write_json(os.path.join(tfrecord_dir, layout.skipped_report_name(split)), {
            "annotation_file": annotation_file,
            "counts": collections.Counter(p.reason for p in problems),
            "skipped": [dataclasses.asdict(p) for p in problems],
        })
    return SplitResult(split, images, instances, shards, problems)


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
                     + (f", annotation {example.annotation_id}" if example.annotation_id else "")
                     + (f": {example.detail}" if example.detail else "") + ")")
    return "\n".join(lines)


def _write_json(path: str, payload) -> None:
    with open(path + _TMP_SUFFIX, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1)
    os.replace(path + _TMP_SUFFIX, path)


def convert_coco_dir(coco_dir: str, out_dir: str, splits=layout.SPLITS, year: str = "2017",
                     shard_mb: float = DEFAULT_SHARD_MB, skip_invalid: bool = False,
                     workers: int = 1, progress: bool = True) -> Dict[str, SplitResult]:
    """Converts a COCO-layout directory (`<split><year>/`, `annotations/instances_<split><year>.json`)
    into the `train` channel layout (data/layout.py)."""
    channel = layout.Channel(out_dir)
    results, categories = {}, None
    for split in splits:
        annotation_file = os.path.join(coco_dir, "annotations", f"instances_{split}{year}.json")
        results[split] = convert_split(
            annotation_file, os.path.join(coco_dir, f"{split}{year}"), channel.tfrecord_dir,
            split, shard_mb, skip_invalid, workers, progress)
        with open(annotation_file, encoding="utf-8") as f:
            categories = json.load(f)["categories"]
        if split == layout.VAL:
            # The evaluation compares against the original annotation file, as COCO's own does.
            os.makedirs(os.path.dirname(channel.annotations(split)), exist_ok=True)
            shutil.copyfile(annotation_file, channel.annotations(split))
    channel.write_info(layout.DatasetInfo(
        num_classes=max(c["id"] for c in categories) + 1,
        categories=categories,
        splits={s: layout.SplitInfo(num_images=r.num_images, num_instances=r.num_instances,
                                    shards=r.shards, skipped=len(r.problems))
                for s, r in results.items()}))
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("coco_dir", help="directory with train2017/, val2017/, annotations/")
    parser.add_argument("out_dir", help="channel directory to write")
    parser.add_argument("--splits", default="train,val", help="comma-separated (train,val)")
    parser.add_argument("--shard-mb", type=float, default=DEFAULT_SHARD_MB,
                        help=f"target shard size in MB ({DEFAULT_SHARD_MB})")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="drop invalid images/annotations and write <split>-skipped.json")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="encoding processes (all cores)")
    args = parser.parse_args(argv)
    try:
        results = convert_coco_dir(args.coco_dir, args.out_dir, tuple(args.splits.split(",")),
                                   shard_mb=args.shard_mb, skip_invalid=args.skip_invalid,
                                   workers=args.workers)
    except ConversionError as error:
        raise SystemExit(f"error: {error}")
    for r in results.values():
        print(f"{r.split}: {r.num_images} images, {r.num_instances} instances, "
              f"{len(r.shards)} shard(s), {len(r.problems)} skipped")


if __name__ == "__main__":
    main()
