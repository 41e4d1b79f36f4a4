"""Writes a COCO export with a labeling tool's own exporter; run by .venv-labeling's Python (made
from tests/training/labeling-requirements.txt), never imported by the tests' environment.

    .venv-labeling/bin/python tests/training/labeling_tools.py SPEC.json

SPEC.json: {"tool": "cvat" | "label-studio", "out": the export's directory, "labels": [names],
"items": [{"name": the task's file name ("batch1/img1.jpg"), "image": a file to take it from,
"width", "height", "subset" (CVAT, default "default"),
"shapes": [{"type": "rectangle", "label", "box": [x, y, w, h]}
           | {"type": "polygon", "label", "points": [x1, y1, x2, y2, ...]}
           | {"type": "mask", "label", "mask": a 0/1 PNG of the image's size (CVAT only)}]}],
"workdir": where Label Studio's media and its task list go (outside "out", as on its server),
"project": Label Studio's project id}. Prints the written files as JSON.

What each tool does before its exporter runs is done here as the tool does it, with its source:

CVAT (cvat/apps/dataset_manager/formats/coco.py, `_export` of 'COCO' 1.0):
    Dataset.from_extractors(GetCVATDataExtractor(...)).export(temp_dir, 'coco_instances',
    save_images=save_images, merge_images=False)
and its items (cvat/apps/dataset_manager/bindings.py, CvatTaskOrJobDataExtractor):
    DatasetItem(id=osp.splitext(frame_data.name)[0], media=Image(path=name, size=(h, w)),
    attributes={'frame': frame}) in the task's subset ("default" without one);
its shapes (CvatToDmAnnotationConverter._convert_shape): a rectangle is dm.Bbox(x0, y0, x1 - x0,
y1 - y0) with attributes occluded and rotation, a polygon dm.Polygon(points) with occluded, a
mask CVATRleToCOCORle.convert_mask: dm.RleMask(rle=mask_utils.encode(the image-sized 0/1 matrix))
with occluded; no annotation id (Datumaro numbers them from 1). CVAT installs its own fork of
Datumaro (cvat-ai/datumaro, not on PyPI); PyPI's Datumaro has the same COCO exporter rules that
the tests rely on (labeling-requirements.txt). `save_images` is `save_media` in Datumaro 1.x.

Label Studio (label_studio/data_export/models.py, DataExport.generate_export_file):
    Converter(config=project.get_parsed_config(), project_dir=None,
              upload_dir=os.path.join(settings.MEDIA_ROOT, settings.UPLOAD_DIR),
              download_resources=download_resources).convert(input_json, tmp_dir, output_format,
              is_dir=False)
with output_format COCO_WITH_IMAGES ("COCO with Images", the export that holds the images)
with an uploaded image stored as upload/<project>/<uuid4()[:8]>-<file name>
(label_studio/data_import/models.py, upload_name_generator; here the 8 characters are a hash of
the name, so the test is repeatable) and named in its task as /data/upload/<project>/<that name>.
Regions are stored in percent of the image (`value` x, y, width, height; polygon `points`).
"""

import hashlib
import json
import os
import shutil
import sys


def _cvat(spec: dict) -> None:
    import numpy as np
    from datumaro.components.annotation import Bbox, LabelCategories, Polygon, RleMask
    from datumaro.components.annotation import AnnotationType
    from datumaro.components.dataset import Dataset
    from datumaro.components.dataset_base import DatasetItem
    from datumaro.components.media import Image
    from PIL import Image as PILImage
    from pycocotools import mask as mask_utils

    labels = spec["labels"]
    items = []
    for frame, item in enumerate(spec["items"]):
        annotations = []
        for shape in item["shapes"]:
            label = labels.index(shape["label"])
            if shape["type"] == "rectangle":
                x, y, w, h = shape["box"]
                annotations.append(Bbox(x, y, w, h, label=label, z_order=0,
                                        attributes={"occluded": False, "rotation": 0.0}))
            elif shape["type"] == "polygon":
                annotations.append(Polygon(shape["points"], label=label, z_order=0,
                                           attributes={"occluded": False}))
            elif shape["type"] == "mask":
                with PILImage.open(shape["mask"]) as png:
                    matrix = (np.asarray(png) > 0).astype(np.uint8)
                annotations.append(RleMask(rle=mask_utils.encode(np.asfortranarray(matrix)),
                                           label=label, z_order=0,
                                           attributes={"occluded": False}))
            else:
                raise ValueError(f"CVAT: unknown shape type {shape['type']!r}")
        name = item["name"]
        items.append(DatasetItem(
            id=os.path.splitext(name)[0], subset=item.get("subset", "default"),
            media=Image.from_file(path=item["image"], size=(item["height"], item["width"])),
            annotations=annotations, attributes={"frame": frame}))
    categories = {AnnotationType.label: LabelCategories.from_iterable(labels)}
    dataset = Dataset.from_iterable(items, categories=categories)
    dataset.export(spec["out"], "coco_instances", save_media=True, merge_images=False)


def _label_studio(spec: dict) -> None:
    from label_studio_sdk.converter import Converter

    workdir = spec["workdir"]
    upload_dir = os.path.join(workdir, "media", "upload")
    project = str(spec.get("project", 1))
    os.makedirs(os.path.join(upload_dir, project), exist_ok=True)
    labels = "".join(f'<Label value="{name}"/>' for name in spec["labels"])
    config = ('<View><Image name="image" value="$image"/>'
              f'<RectangleLabels name="label" toName="image">{labels}</RectangleLabels>'
              f'<PolygonLabels name="polygon" toName="image">{labels}</PolygonLabels></View>')
    tasks = []
    for task_id, item in enumerate(spec["items"], start=1):
        uploaded = (hashlib.sha256(item["name"].encode()).hexdigest()[:8] + "-"
                    + os.path.basename(item["name"]))
        shutil.copy(item["image"], os.path.join(upload_dir, project, uploaded))
        width, height = item["width"], item["height"]
        results = []
        for number, shape in enumerate(item["shapes"]):
            region = {"id": f"r{task_id}-{number}", "to_name": "image",
                      "original_width": width, "original_height": height, "image_rotation": 0}
            if shape["type"] == "rectangle":
                x, y, w, h = shape["box"]
                region.update(type="rectanglelabels", from_name="label", value={
                    "x": 100 * x / width, "y": 100 * y / height, "width": 100 * w / width,
                    "height": 100 * h / height, "rotation": 0,
                    "rectanglelabels": [shape["label"]]})
            elif shape["type"] == "polygon":
                points = shape["points"]
                region.update(type="polygonlabels", from_name="polygon", value={
                    "points": [[100 * points[i] / width, 100 * points[i + 1] / height]
                               for i in range(0, len(points), 2)],
                    "closed": True, "polygonlabels": [shape["label"]]})
            else:
                raise ValueError(f"Label Studio: no COCO export of {shape['type']!r} regions")
            results.append(region)
        tasks.append({"id": task_id, "data": {"image": f"/data/upload/{project}/{uploaded}"},
                      "annotations": [{"id": task_id, "result": results,
                                       "was_cancelled": False, "created_at": "2026-01-01"}]})
    input_json = os.path.join(workdir, "tasks.json")
    with open(input_json, "w", encoding="utf-8") as f:
        json.dump(tasks, f)
    converter = Converter(config=config, project_dir=None, upload_dir=upload_dir,
                          download_resources=True)
    # "COCO with Images": the export that holds the images (plain "COCO" is result.json alone;
    # Converter._convert sets download_resources = format == Format.COCO_WITH_IMAGES).
    converter.convert(input_json, spec["out"], "COCO_WITH_IMAGES", is_dir=False)


def main(argv) -> None:
    with open(argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    {"cvat": _cvat, "label-studio": _label_studio}[spec["tool"]](spec)
    written = sorted(os.path.relpath(os.path.join(folder, name), spec["out"])
                     for folder, _, names in os.walk(spec["out"]) for name in names)
    print(json.dumps(written))


if __name__ == "__main__":
    main(sys.argv)
