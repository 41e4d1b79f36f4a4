"""A labeling tool's COCO export, as it really is: found, read, and split into train and val.

Layouts recognized in a directory (a .zip of any of them is extracted first):
- COCO 2017: `annotations/instances_{train,val}2017.json` with `train2017/` and `val2017/` (COCO
  itself, and what maskrcnn_local.synthetic_coco writes);
- CVAT "COCO 1.0": `annotations/instances_<subset>.json` and `images/` (`instances_default.json`
  for a task without subsets; subsets named train and val/validation are taken as the splits);
- Label Studio "COCO": `result.json` and `images/` (its `file_name`s are `images/...`);
- any other single COCO annotations file at the top (`*.json` holding images, annotations and
  categories) with its images below the directory.

Every image's `file_name` is resolved to a file below the export's directory (as written, below
`images/`, below `images/<subset>/`, then by its base name when one file has it) and rewritten
relative to it; a name that resolves to nothing is left for the converter to report as a missing
file, and a base name that several files have is refused, naming them. What the tools write:
CVAT (Datumaro's coco exporter, CocoExporter._apply_impl) saves an image at
`images/<subset>/<item id>.<ext>` and writes `file_name` `<item id>.<ext>`, the item id being the
task's file path without extension (cvat/apps/dataset_manager/bindings.py, `DatasetItem(id=
osp.splitext(frame_data.name)[0])`), so subfolders are kept and two of them may hold the same base
name; Label Studio (label_studio_sdk Converter.convert_to_coco) copies an uploaded image into
`images/` (label_studio_tools get_local_path: `shutil.copy(filepath, cache_dir)`) but writes the
upload's path relative to where the export was written, `../<media>/upload/<project>/<file>`,
which only the base name finds (upload names carry a hash prefix, so they are unique:
label_studio/data_import/models.py, upload_name_generator). An export with one annotations file
is split into train and val by a seed and a fraction (the same seed and export, the same split),
recorded by the converter in the channel. Label Studio gives an EXIF-turned image its stored size
and scales its polygons by it (HumanSignal/label-studio#6608): `label_studio_upright_sizes` takes
such an image at its upright size, the polygons scaled back, and the dataset's notes name it.
Pure Python and Pillow's header reads: no TensorFlow.
"""

import dataclasses
import glob
import json
import os
import random
import re
import zipfile
from typing import Dict, List, Optional, Tuple

TRAIN, VAL = "train", "val"
COCO2017, CVAT, LABEL_STUDIO, COCO = "coco2017", "cvat", "label-studio", "coco"
# CVAT names a subset's file after it: instances_Train.json, instances_Validation.json.
_TRAIN_NAMES = re.compile(r"^train(ing)?$", re.I)
_VAL_NAMES = re.compile(r"^val(id|idation)?$", re.I)


class ExportError(ValueError):
    """The directory is no COCO export this module reads; the message says what it found."""


@dataclasses.dataclass(frozen=True)
class Export:
    """A COCO export found in `root`: its format, and its annotation files by split (`None` as
    the split of a single file, which `load` splits)."""

    kind: str
    root: str
    files: Dict[Optional[str], str]  # split (or None) -> annotations file below root
    image_dirs: Dict[Optional[str], List[str]]  # split -> directories its file names start from


@dataclasses.dataclass
class SplitSource:
    """One split of an export, ready for the converter: the COCO dict (file names relative to
    `image_dir`) and the file it came from."""

    split: str
    dataset: Dict
    image_dir: str
    annotation_file: str


def extract_zip(path: str, work_dir: str) -> str:
    """Extracts an export's .zip into `work_dir`/<its name>/ (once: a marker file says it is
    complete) and returns that directory. Members may not leave it."""
    target = os.path.join(work_dir, os.path.splitext(os.path.basename(path))[0])
    done = target + ".extracted"
    if os.path.exists(done):
        return target
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            resolved = os.path.normpath(os.path.join(target, member))
            if not (resolved + os.sep).startswith(os.path.normpath(target) + os.sep):
                raise ExportError(f"{path}: member {member!r} would be extracted outside "
                                  f"{target}")
        archive.extractall(target)
    open(done, "w").close()
    return target


def prepare(path: str, work_dir: str) -> str:
    """The export's directory: `path` itself, or, for a .zip file (or a directory holding only
    .zip files, as a tool's download uploaded as it is), what they extract to."""
    if os.path.isfile(path) and path.lower().endswith(".zip"):
        return _single_root(extract_zip(path, work_dir))
    if not os.path.isdir(path):
        raise ExportError(f"export {path!r} is neither a directory nor a .zip file")
    entries = [e for e in os.listdir(path) if not e.startswith(".")]
    zips = [e for e in entries if e.lower().endswith(".zip")]
    if zips and len(zips) == len(entries):
        if len(zips) > 1:
            raise ExportError(f"export {path!r} holds several .zip files ({', '.join(zips)}): "
                              "upload one export per dataset")
        return _single_root(extract_zip(os.path.join(path, zips[0]), work_dir))
    return path


def _single_root(directory: str) -> str:
    """A zip whose members all lie in one folder: that folder."""
    entries = [e for e in os.listdir(directory) if not e.startswith(".")]
    if len(entries) == 1 and os.path.isdir(os.path.join(directory, entries[0])) \
            and not _looks_like_export(directory):
        return os.path.join(directory, entries[0])
    return directory


def _looks_like_export(directory: str) -> bool:
    return any(os.path.exists(os.path.join(directory, name))
               for name in ("annotations", "result.json", "images"))


def _is_coco_file(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            head = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(head, dict) and {"images", "annotations", "categories"} <= set(head)


def find(root: str) -> Export:
    """The export in `root`; ExportError naming what was found otherwise."""
    if not os.path.isdir(root):
        raise ExportError(f"export directory {root!r} does not exist")
    annotations = os.path.join(root, "annotations")
    coco = {split: os.path.join(annotations, f"instances_{split}2017.json")
            for split in (TRAIN, VAL)}
    if all(os.path.isfile(f) for f in coco.values()):
        return Export(COCO2017, root, {s: os.path.relpath(f, root) for s, f in coco.items()},
                      {s: [f"{s}2017"] for s in (TRAIN, VAL)})
    if os.path.isdir(annotations):
        found = sorted(glob.glob(os.path.join(annotations, "*.json")))
        if not found:
            raise ExportError(f"{annotations} holds no .json file: expected CVAT's "
                              "instances_default.json (COCO 1.0 export)")
        if len(found) == 1:
            subset = _subset(found[0])
            return Export(CVAT, root, {None: os.path.relpath(found[0], root)},
                          {None: _image_dirs(root, subset)})
        by_split = {}
        for path in found:
            subset = _subset(path)
            split = TRAIN if _TRAIN_NAMES.match(subset) else VAL if _VAL_NAMES.match(subset) \
                else None
            if split is None or split in by_split:
                raise ExportError(
                    f"{annotations} holds {len(found)} annotation files "
                    f"({', '.join(os.path.basename(f) for f in found)}): expected one, to be "
                    "split into train and val, or one train and one val subset "
                    "(instances_train.json, instances_val.json)")
            by_split[split] = path
        if set(by_split) != {TRAIN, VAL}:
            raise ExportError(f"{annotations}: a train subset needs a val subset beside it")
        return Export(CVAT, root, {s: os.path.relpath(p, root) for s, p in by_split.items()},
                      {s: _image_dirs(root, _subset(p)) for s, p in by_split.items()})
    result = os.path.join(root, "result.json")
    if os.path.isfile(result):
        return Export(LABEL_STUDIO, root, {None: "result.json"}, {None: ["", "images"]})
    singles = [p for p in sorted(glob.glob(os.path.join(root, "*.json"))) if _is_coco_file(p)]
    if len(singles) == 1:
        return Export(COCO, root, {None: os.path.basename(singles[0])}, {None: ["", "images"]})
    listing = ", ".join(sorted(os.listdir(root))[:10]) or "nothing"
    raise ExportError(
        f"{root} is no COCO export this job reads (found: {listing}). Expected CVAT's COCO 1.0 "
        "(annotations/instances_default.json and images/), Label Studio's COCO (result.json and "
        "images/), one COCO annotations .json with its images, or COCO 2017's layout "
        "(annotations/instances_train2017.json, train2017/, ...)")


def _subset(path: str) -> str:
    name = os.path.splitext(os.path.basename(path))[0]
    return name[len("instances_"):] if name.startswith("instances_") else name


def _image_dirs(root: str, subset: str) -> List[str]:
    dirs = ["images", ""]
    if subset and os.path.isdir(os.path.join(root, "images", subset)):
        dirs.insert(1, os.path.join("images", subset))
    return dirs


def _normalized(file_name: str) -> str:
    return str(file_name).replace("\\", "/")


def _inside(root: str, relative: str) -> bool:
    """Whether root/relative lies below root (no absolute name, no '..' out of it)."""
    if os.path.isabs(relative) or not relative:
        return False
    resolved = os.path.normpath(os.path.join(root, relative))
    return (resolved + os.sep).startswith(os.path.normpath(root) + os.sep) and resolved != \
        os.path.normpath(root)


def resolve_file_names(dataset: Dict, root: str, image_dirs: List[str]) -> int:
    """Rewrites every image's `file_name` relative to `root`, to a file that exists below it
    when one matches (as written below each of `image_dirs`, then by base name below them, when
    exactly one file has it); returns how many did not resolve (left as written, for the
    converter to report). A base name that several files have is refused (ExportError naming
    them): taking one of them could pair an image with another's annotations."""
    by_base: Dict[str, List[str]] = {}
    for directory in image_dirs:
        base_dir = os.path.join(root, directory)
        if not os.path.isdir(base_dir):
            continue
        for folder, _, names in os.walk(base_dir):
            for name in names:
                by_base.setdefault(name, []).append(
                    os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    unresolved = 0
    ambiguous: List[Tuple[str, List[str]]] = []
    for image in dataset.get("images") or []:
        name = _normalized(image.get("file_name", ""))
        found = None
        for directory in image_dirs:
            candidate = os.path.join(directory, name.lstrip("/")).replace(os.sep, "/")
            if _inside(root, candidate) and os.path.isfile(os.path.join(root, candidate)):
                found = os.path.normpath(candidate).replace(os.sep, "/")
                break
        if found is None:
            matches = sorted(set(by_base.get(os.path.basename(name), [])))
            if len(matches) == 1:
                found = matches[0]
            elif matches:
                ambiguous.append((name, matches))
        if found is None:
            unresolved += 1
            image["file_name"] = name
        else:
            image["file_name"] = found
    if ambiguous:
        examples = "; ".join(f"{name!r} matches {', '.join(matches)}"
                             for name, matches in ambiguous[:3])
        raise ExportError(
            f"{len(ambiguous)} image file name(s) are found nowhere as written, and their base "
            f"name is that of several files below {root}: {examples}"
            + (f" (and {len(ambiguous) - 3} more)" if len(ambiguous) > 3 else "")
            + ". Which file an annotation belongs to is ambiguous: make each file_name the "
            "image's path below the export (as the tool wrote it), or give the files distinct "
            "names")
    return unresolved


# EXIF orientations 5 to 8 turn an image a quarter (TIFF 6.0's Orientation tag): its upright
# width is its stored height.
QUARTER_TURNS = (5, 6, 7, 8)


def exif_orientation(image) -> int:
    """A Pillow image's EXIF orientation, 1 without one or with a malformed EXIF block (the
    pixels as stored)."""
    from PIL import ExifTags

    try:
        return int(image.getexif().get(ExifTags.Base.Orientation, 1) or 1)
    except Exception:  # noqa: BLE001  (a malformed EXIF block: the pixels as stored)
        return 1


def _stored_size_and_orientation(path: str) -> Optional[Tuple[Tuple[int, int], int]]:
    """The file's stored (width, height) and EXIF orientation, from its header; None when it is
    no image Pillow reads (the converter reports that file)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            return image.size, exif_orientation(image)
    except Exception:  # noqa: BLE001  (Pillow raises OSError, SyntaxError, ValueError...)
        return None


def label_studio_upright_sizes(dataset: Dict, root: str) -> List[str]:
    """Label Studio's COCO export of an image turned by its EXIF orientation (a phone's portrait
    photo) writes the image's *stored* size, width and height swapped, while its regions were
    drawn on the upright image, and scales polygon points by that stored size (label_studio_sdk
    converter.py, Converter.convert_to_coco: `width, height = img.size` of the exported image,
    polygon points `x / 100 * width, y / 100 * height`; a rectangle's box by its region's
    `original_width` and `original_height`, the upright size; HumanSignal/label-studio#6608,
    open). Such an image, annotated at exactly its stored size with an orientation of 5 to 8, is
    taken at its upright size here, its polygons and their boxes scaled back to the upright
    image's pixels (x by upright width / stored width, y by upright height / stored height; the
    area is unchanged); a box without a polygon is already right. Returns the file names
    corrected, for the dataset's notes."""
    corrected = []
    by_image: Dict = {}
    for annotation in dataset.get("annotations") or []:
        by_image.setdefault(annotation.get("image_id"), []).append(annotation)
    for image in dataset.get("images") or []:
        found = _stored_size_and_orientation(os.path.join(root, image.get("file_name", "")))
        if found is None:
            continue
        (stored_width, stored_height), orientation = found
        if orientation not in QUARTER_TURNS or stored_width == stored_height or \
                (image.get("width"), image.get("height")) != (stored_width, stored_height):
            continue
        x_scale, y_scale = stored_height / stored_width, stored_width / stored_height
        for annotation in by_image.get(image.get("id"), []):
            polygons = annotation.get("segmentation")
            if not isinstance(polygons, list) or not polygons:
                continue  # a rectangle's box: scaled by the upright size already
            annotation["segmentation"] = [
                [value * (x_scale if index % 2 == 0 else y_scale)
                 for index, value in enumerate(polygon)] for polygon in polygons]
            if len(annotation.get("bbox") or []) == 4:
                x, y, w, h = annotation["bbox"]
                annotation["bbox"] = [x * x_scale, y * y_scale, w * x_scale, h * y_scale]
        image["width"], image["height"] = stored_height, stored_width
        corrected.append(image["file_name"])
    return corrected


def _read(path: str) -> Dict:
    try:
        with open(path, encoding="utf-8") as f:
            dataset = json.load(f)
    except json.JSONDecodeError as error:
        raise ExportError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(dataset, dict):
        raise ExportError(f"{path} is not a COCO annotations object")
    return dataset


def split_ids(image_ids: List, val_fraction: float, seed: int) -> Tuple[List, List]:
    """(train ids, val ids): the ids sorted, shuffled by `seed`, the first round(fraction x n)
    (at least one) to val. The same ids, fraction and seed give the same split."""
    if not 0.0 < val_fraction < 1.0:
        raise ExportError(f"val_fraction={val_fraction!r}: expected a number between 0 and 1")
    ids = sorted(set(image_ids))
    if len(ids) < 2:
        raise ExportError(f"{len(ids)} image(s): a train and a val split need at least 2")
    count = min(len(ids) - 1, max(1, round(val_fraction * len(ids))))
    shuffled = list(ids)
    random.Random(seed).shuffle(shuffled)
    val = sorted(shuffled[:count])
    return sorted(shuffled[count:]), val


def subset(dataset: Dict, image_ids) -> Dict:
    """The dataset restricted to `image_ids` (its categories whole)."""
    keep = set(image_ids)
    return {**{k: v for k, v in dataset.items() if k not in ("images", "annotations")},
            "images": [im for im in dataset.get("images") or [] if im.get("id") in keep],
            "annotations": [a for a in dataset.get("annotations") or []
                            if a.get("image_id") in keep]}


def load(export: Export, val_fraction: float, seed: int) -> Tuple[List[SplitSource], Dict]:
    """The export's train and val splits, and the record of how they were made (for
    annotations/split.json and dataset_info.json's `source`)."""
    record: Dict = {"format": export.kind, "files": sorted(export.files.values())}
    sources = []
    unresolved = 0
    if None in export.files:
        path = os.path.join(export.root, export.files[None])
        dataset = _read(path)
        unresolved += resolve_file_names(dataset, export.root, export.image_dirs[None])
        if export.kind == LABEL_STUDIO:
            upright = label_studio_upright_sizes(dataset, export.root)
            if upright:
                record["notes"] = [
                    f"{len(upright)} EXIF-turned image(s) that Label Studio's COCO export gave "
                    "at their stored size, width and height swapped, and with their polygons "
                    "scaled by it (HumanSignal/label-studio#6608), taken at their upright size "
                    f"with the polygons scaled back: {', '.join(upright[:5])}"
                    + (f" and {len(upright) - 5} more" if len(upright) > 5 else "")]
        ids = [im.get("id") for im in dataset.get("images") or []]
        train, val = split_ids(ids, val_fraction, seed)
        record["split"] = {"by": "seed", "seed": seed, "val_fraction": val_fraction}
        for split, chosen in ((TRAIN, train), (VAL, val)):
            sources.append(SplitSource(split, subset(dataset, chosen), export.root, path))
    else:
        record["split"] = {"by": "export"}
        for split in (TRAIN, VAL):
            path = os.path.join(export.root, export.files[split])
            dataset = _read(path)
            unresolved += resolve_file_names(dataset, export.root, export.image_dirs[split])
            sources.append(SplitSource(split, dataset, export.root, path))
    record["split"]["images"] = {
        s.split: [{"id": im.get("id"), "file_name": im.get("file_name")}
                  for im in s.dataset.get("images") or []]
        for s in sources}
    record["unresolved_file_names"] = unresolved
    return sources, record
