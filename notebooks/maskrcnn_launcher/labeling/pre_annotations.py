"""A predictions run (predictions.Predictions) as pre-annotations the labeling tools import, so a
team corrects the model's polygons instead of drawing them (docs/labeling.md, "Pre-annotations for
Label Studio and CVAT"):

- LABEL_STUDIO_TASKS: Label Studio's tasks with `predictions` (docs/source/guide/predictions.md of
  HumanSignal/label-studio): one task per image, `data.image` the image's URL as Label Studio
  resolves it (`s3://<bucket>/<key>` through a source storage of that bucket, which need not be
  synced: label_studio/tasks/models.py, Task.resolve_storage_uri, and io_storages/base_models.py,
  ImportStorage.can_resolve_scheme; for a local folder `/data/local-files/?d=<path below
  LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT>`, docs/source/guide/storage.md, "Tasks with local
  storage file references"), one prediction {"model_version", "score", "result"} whose result
  holds a `polygonlabels` region per polygon, points in percent of the image;
- LABEL_STUDIO_CONFIG: the labeling config those regions match (`from_name` LABELS_TAG, `to_name`
  IMAGE_TAG, one Label per category name), which Label Studio validates each imported prediction
  against (label_studio/data_import: LabelInterface(project.label_config).validate_prediction);
- CVAT_COCO: a COCO instances file for CVAT's "COCO 1.0" annotation import
  (cvat/apps/dataset_manager/formats/coco.py: Dataset.import_from(file, 'coco_instances') then
  bindings.import_dm_annotations): the dataset's own category ids and names (CVAT matches labels
  by name), each image's `file_name` the run's (its key below the input prefix: CVAT matches a
  frame by its path without extension, allowing one leading folder common to all,
  bindings.match_dm_item and find_dataset_root), each detection an annotation with its polygons,
  `area` and `bbox` of those polygons, `iscrowd` 0 and the detection's `score`.

Polygons come from polygons.mask_polygons. A detection whose mask gives none (a mask of a line or a
few pixels), or that has no mask, is in neither file: `PreAnnotations.skipped` names each and the
import steps count them.
"""

import dataclasses
import json
import os
import posixpath
import urllib.parse
import xml.etree.ElementTree as ElementTree
from typing import Any, Dict, List, Optional

from maskrcnn_launcher.labeling import polygons
from maskrcnn_launcher.labeling.predictions import Predictions, decoded

LABEL_STUDIO_TASKS = "label-studio-tasks.json"
LABEL_STUDIO_CONFIG = "label-studio-config.xml"
CVAT_COCO = "cvat-coco.json"
# The labeling config's tag names, which every region's to_name and from_name repeat.
IMAGE_TAG = "image"
LABELS_TAG = "label"
REGION_TYPE = "polygonlabels"
# Label Studio's URL of a file below LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT.
LOCAL_FILES_URL = "/data/local-files/?d="
NO_MASK = "no mask"
NO_POLYGON = (f"its mask gives no polygon of 3 points or more and {polygons.MIN_AREA} pixel or "
              "more")


class PreAnnotationError(ValueError):
    """A predictions run that cannot be written as pre-annotations; names every problem."""


@dataclasses.dataclass
class PreAnnotations:
    """The files' contents (module docstring) and what the import steps name."""

    tasks: List[Dict]
    labeling_config: str
    coco: Dict
    skipped: List[Dict]                 # {"file_name", "category_name", "score", "reason"}
    model: str
    source: str
    local_files_root: Optional[str]

    def write(self, folder: str) -> List[str]:
        """The three files in `folder`; their paths."""
        os.makedirs(folder, exist_ok=True)
        contents = {LABEL_STUDIO_TASKS: json.dumps(self.tasks),
                    LABEL_STUDIO_CONFIG: self.labeling_config + "\n",
                    CVAT_COCO: json.dumps(self.coco)}
        paths = []
        for name, text in contents.items():
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            paths.append(path)
        return paths

    def import_steps(self, location: str) -> List[str]:
        """How to import the files written at `location` (a folder or s3://.../) into each tool."""
        location = location if location.endswith("/") else location + "/"
        detections = len(self.coco["annotations"])
        lines = [f"Pre-annotations of {self.model}: {len(self.tasks)} images, {detections} "
                 f"detections, in {location}"]
        if self.skipped:
            total = detections + len(self.skipped)
            lines.append(f"In neither file ({len(self.skipped)} of {total} detections):")
            lines += [f"  {s['file_name']}: {s['category_name']} ({s['score']:.2f}): {s['reason']}"
                      for s in self.skipped]
        names = [c["name"] for c in self.coco["categories"]]
        return lines + [""] + self._label_studio_steps(names) + [""] + self._cvat_steps(names)

    def _label_studio_steps(self, names: List[str]) -> List[str]:
        lines = [f"Label Studio ({LABEL_STUDIO_TASKS}, {LABEL_STUDIO_CONFIG}):",
                 f"  1. Create a project. Settings > Labeling Interface > Code: paste "
                 f"{LABEL_STUDIO_CONFIG} (polygon labels: {', '.join(names)})."]
        if self.source.startswith("s3://"):
            bucket = self.source[len("s3://"):].split("/", 1)[0]
            lines.append(
                f"  2. Settings > Cloud Storage > Add Source Storage > Amazon S3: bucket {bucket}, "
                "'Use pre-signed URLs' on; Add Storage. Do not Sync: the storage only resolves the "
                f"tasks' s3://{bucket}/ links (a Sync would add the images again as tasks without "
                "predictions).")
        else:
            lines.append(
                "  2. Start Label Studio with LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true and "
                f"LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT={self.local_files_root}. Settings > Cloud "
                "Storage > Add Source Storage > Local Files: absolute local path "
                f"{os.path.abspath(self.source)}, 'Treat every bucket object as a source file' "
                "off; Add Storage. Do not Sync.")
        return lines + [
            f"  3. Data Manager > Import: {LABEL_STUDIO_TASKS}. Each task holds one prediction of "
            f"model version {self.model}; its score is the mean of its detections' scores "
            "(0 without any), which the Data Manager sorts by.",
            "  4. Settings > Machine Learning: turn on 'Show predictions to annotators in the "
            "Label Stream and Quick View' so a new annotation starts as a copy of the prediction "
            "(predictions themselves are read-only)."]

    def _cvat_steps(self, names: List[str]) -> List[str]:
        return [
            f"CVAT ({CVAT_COCO}):",
            "  1. Create a task with these labels (labels editor, Raw): "
            f"{json.dumps([{'name': n, 'attributes': []} for n in names])}, from the same images "
            f"({self.source}) keeping their subfolders (cloud storage of the bucket, or a zip of "
            "the folder), so that every frame's path ends with the image's file_name in "
            f"{CVAT_COCO} (CVAT matches names without extension, below one common folder).",
            f"  2. Task > Actions > Upload annotations > format 'COCO 1.0' > {CVAT_COCO}. This "
            "replaces the task's annotations. Every image of the file must be a frame of the task.",
            "  3. Each detection's score is kept only if its label has an attribute named 'score'; "
            "otherwise CVAT drops it."]


def build(predictions: Predictions, local_files_root: Optional[str] = None) -> PreAnnotations:
    """The pre-annotations of a predictions run; PreAnnotationError naming every bad input.
    `local_files_root`: Label Studio's LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT, needed (and only
    allowed) when the run's source is a local folder."""
    problems = _problems(predictions, local_files_root)
    if problems:
        raise PreAnnotationError("cannot write pre-annotations:\n  " + "\n  ".join(problems))
    names = predictions.category_names()
    annotations: List[Dict]
    tasks, annotations, skipped = [], [], []
    found = predictions.by_image()
    for image in predictions.images:
        height, width = image["height"], image["width"]
        regions: List[Dict]
        regions, scores = [], []
        for result in found[image["id"]]:
            name = names[result["category_id"]]
            shapes = (polygons.mask_polygons(decoded(result["segmentation"]))
                      if result.get("segmentation") else [])
            if not shapes:
                skipped.append({"file_name": image["file_name"], "category_name": name,
                                "score": result["score"],
                                "reason": NO_POLYGON if result.get("segmentation") else NO_MASK})
                continue
            scores.append(result["score"])
            for shape in shapes:
                regions.append(_region(f"{image['id']}-{len(regions)}", shape, name,
                                       result["score"], height, width))
            annotations.append(_coco_annotation(len(annotations) + 1, image, result, shapes))
        # The image's score as Label Studio's ML backend examples give it, the mean of its
        # detections' scores, 0 without any (label-studio-ml-backend, mmdetection-3/mmdetection.py:
        # avg_score over its boxes; here over detections, a detection's parts counted once).
        tasks.append({"data": {IMAGE_TAG: _image_url(predictions.source, image["file_name"],
                                                     local_files_root)},
                      "predictions": [{"model_version": predictions.model,
                                       "score": sum(scores) / max(len(scores), 1),
                                       "result": regions}]})
    categories = sorted(predictions.categories, key=lambda c: c["id"])
    coco = {"info": {"description": f"pre-annotations of {predictions.model}",
                     "source": predictions.source},
            "licenses": [],
            "categories": [{"id": c["id"], "name": c["name"],
                            "supercategory": c.get("supercategory", "")} for c in categories],
            "images": [{"id": i["id"], "file_name": i["file_name"], "height": i["height"],
                        "width": i["width"]} for i in predictions.images],
            "annotations": annotations}
    return PreAnnotations(tasks=tasks, labeling_config=labeling_config([c["name"] for c in
                                                                         categories]),
                          coco=coco, skipped=skipped, model=predictions.model,
                          source=predictions.source, local_files_root=local_files_root)


def labeling_config(names: List[str]) -> str:
    """Label Studio's labeling config: the image and one polygon Label per name."""
    view = ElementTree.Element("View")
    ElementTree.SubElement(view, "Image", name=IMAGE_TAG, value=f"${IMAGE_TAG}")
    labels = ElementTree.SubElement(view, "PolygonLabels", name=LABELS_TAG, toName=IMAGE_TAG)
    for name in names:
        ElementTree.SubElement(labels, "Label", value=name)
    return ElementTree.tostring(view, encoding="unicode")


def _coco_annotation(annotation_id: int, image: Dict, result: Dict,
                     shapes: List[List[float]]) -> Dict:
    """A detection as a COCO instance: its polygons, and their area and box as pycocotools
    rasterizes them."""
    from pycocotools import mask as mask_utils

    rle = mask_utils.merge(mask_utils.frPyObjects(shapes, image["height"], image["width"]))
    return {"id": annotation_id, "image_id": image["id"], "category_id": result["category_id"],
            "segmentation": shapes, "area": float(mask_utils.area(rle)),
            "bbox": [float(v) for v in mask_utils.toBbox(rle)], "iscrowd": 0,
            "score": result["score"]}


def _region(region_id: str, shape: List[float], name: str, score: float, height: int,
            width: int) -> Dict:
    """One `polygonlabels` result, points in percent of the image (predictions.md, "Units for
    image annotations")."""
    points = [[100.0 * shape[i] / width, 100.0 * shape[i + 1] / height]
              for i in range(0, len(shape), 2)]
    return {"id": region_id, "from_name": LABELS_TAG, "to_name": IMAGE_TAG, "type": REGION_TYPE,
            "original_width": width, "original_height": height, "image_rotation": 0,
            "value": {"points": points, "closed": True, REGION_TYPE: [name]}, "score": score}


def _image_url(source: str, file_name: str, local_files_root: Optional[str]) -> str:
    if source.startswith("s3://"):
        return source + file_name
    assert local_files_root is not None  # _problems refuses a local source without it
    path = os.path.relpath(os.path.join(os.path.abspath(source), file_name),
                           os.path.abspath(local_files_root))
    return LOCAL_FILES_URL + urllib.parse.quote(path.replace(os.sep, "/"))


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_score(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


def _problems(predictions: Predictions, local_files_root: Optional[str]) -> List[str]:
    problems = []
    if not isinstance(predictions.model, str) or not predictions.model:
        problems.append(f"model {predictions.model!r}: Label Studio's model_version needs a name")
    problems += _source_problems(predictions.source, local_files_root)
    categories: Dict[Any, Any] = {}
    category_names = set()
    for category in predictions.categories:
        category_id, name = category.get("id"), category.get("name")
        if not _is_int(category_id) or category_id in categories:
            problems.append(f"category {category!r}: ids must be distinct integers")
        if not isinstance(name, str) or not name.strip() or name in category_names:
            problems.append(f"category {category!r}: names must be distinct and not empty (both "
                            "tools match labels by name)")
        categories[category_id] = name
        category_names.add(name)
    item_ids: Dict[str, str]
    images, item_ids = {}, {}
    image: Optional[Dict]
    for image in predictions.images:
        image_id, file_name = image.get("id"), image.get("file_name")
        if not _is_int(image_id) or image_id in images:
            problems.append(f"image {image!r}: ids must be distinct integers")
        sized = all(_is_int(image.get(side)) and image[side] > 0 for side in ("height", "width"))
        if not sized:
            problems.append(f"image {file_name!r}: height and width must be positive integers "
                            f"(got {image.get('height')!r} x {image.get('width')!r}), the size "
                            "the masks and the percent coordinates are of")
        if (not isinstance(file_name, str) or not file_name or "\\" in file_name
                or posixpath.isabs(file_name) or ".." in file_name.split("/")):
            problems.append(f"image {image_id!r}: file_name {file_name!r} must be a relative path "
                            "with '/' separators and no '..' (the key below the input prefix)")
        else:
            item = posixpath.splitext(file_name)[0]
            if item in item_ids:
                problems.append(f"images {item_ids[item]!r} and {file_name!r}: CVAT matches "
                                "frames by name without extension, so these two collide")
            item_ids[item] = file_name
        images[image_id] = dict(image, sized=sized)
    for result in predictions.results:
        image = images.get(result.get("image_id"))
        where = f"detection {result.get('category_name', result.get('category_id'))!r}"
        if image is None:
            problems.append(f"{where}: image_id {result.get('image_id')!r} is not an image of "
                            "the run")
            continue
        where += f" in {image.get('file_name')!r}"
        category_id = result.get("category_id")
        if category_id not in categories:
            problems.append(f"{where}: category_id {category_id!r} is not one of the "
                            f"categories {sorted(c for c in categories if _is_int(c))}")
        elif "category_name" in result and result["category_name"] != categories[category_id]:
            problems.append(f"{where}: category_name {result['category_name']!r} is not "
                            f"category {category_id}'s name {categories[category_id]!r}")
        if not _is_score(result.get("score")):
            problems.append(f"{where}: score {result.get('score')!r} must be a number from 0 to 1 "
                            "(Label Studio refuses other prediction scores)")
        segmentation = result.get("segmentation")
        if segmentation is not None and image["sized"] and (
                not isinstance(segmentation, dict)
                or segmentation.get("size") != [image.get("height"), image.get("width")]
                or not isinstance(segmentation.get("counts"), str)):
            size = segmentation.get("size") if isinstance(segmentation, dict) else segmentation
            problems.append(f"{where}: segmentation must be a compressed RLE (counts as text) of "
                            f"the image's size {[image.get('height'), image.get('width')]}, got "
                            f"size {size!r}")
    return problems


def _source_problems(source, local_files_root: Optional[str]) -> List[str]:
    if not isinstance(source, str) or not source:
        return [f"source {source!r}: expected the input prefix s3://<bucket>/<prefix>/ or a folder"]
    if source.startswith("s3://"):
        bucket = source[len("s3://"):].split("/", 1)[0]
        problems = [] if bucket and source.endswith("/") else [
            f"source {source!r}: expected s3://<bucket>/<prefix>/ ending in '/', the prefix the "
            "file names are below"]
        if local_files_root is not None:
            problems.append(f"local_files_root {local_files_root!r}: only for a run over a local "
                            f"folder; the images of {source} are resolved by an S3 storage")
        return problems
    if local_files_root is None:
        return [f"source {source!r} is a local folder: Label Studio serves local images only below "
                "its LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT; name that folder (local_files_root)"]
    below = os.path.relpath(os.path.abspath(source), os.path.abspath(local_files_root))
    if below == ".." or below.startswith(".." + os.sep):
        return [f"source {source!r} is not below local_files_root {local_files_root!r}, the only "
                "folder Label Studio serves files from"]
    return []
