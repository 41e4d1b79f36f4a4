"""Reads pre-annotation files (maskrcnn_launcher/labeling/pre_annotations.py) back with the labeling
tools' own code; run by .venv-labeling's Python (tests/training/labeling-requirements.txt), never
imported by the tests' environment:

    .venv-labeling/bin/python tests/launcher/labeling_readback.py TASKS CONFIG COCO WORKDIR

(the three files PreAnnotations.write wrote, in its order; WORKDIR an empty folder for what the
tools write on the way).

Prints JSON {"label_studio": ..., "cvat": ...}. Each tool's reading is done as the tool does it:

Label Studio (label_studio/data_import/functions.py and tasks/serializers.py, on import):
    li = LabelInterface(project.label_config)
    li.validate_prediction(prediction, return_errors=True)   # errors refuse the import
with the project's config parsed and validated first (LabelInterface(config).validate(), as the
project's Labeling Interface does). Then a prediction accepted as it is: Label Studio copies a
prediction into a new annotation ("Show predictions to annotators in the Label Stream and Quick
View", docs/source/guide/predictions.md), whose COCO export is label_studio_sdk's
Converter.convert_to_coco (label_studio/data_export/models.py): the regions back in pixels.

CVAT (cvat/apps/dataset_manager/formats/coco.py, 'COCO' 1.0 importer of a .json file):
    Dataset.import_from(src_file.name, 'coco_instances', env=dm_env)
then bindings.import_dm_annotations: labels by name (label_cat.items[ann.label].name), every
annotation attribute but CVAT's own as an attribute of the shape. CVAT runs its Datumaro fork
(cvat-ai/datumaro), whose COCO reader adds a box only to an annotation without segmentation;
PyPI's Datumaro adds one to every annotation, so boxes are counted apart. Imported a second time
with keep_original_category_ids=True to read each label's COCO id.
"""

import json
import logging
import os
import shutil
import sys


def _label_studio(tasks_file: str, config_file: str, workdir: str) -> dict:
    from label_studio_sdk.converter import Converter
    from label_studio_sdk.label_interface import LabelInterface

    with open(config_file, encoding="utf-8") as f:
        config = f.read()
    with open(tasks_file, encoding="utf-8") as f:
        tasks = json.load(f)
    interface = LabelInterface(config)
    interface.validate()
    read = {"controls": [{"name": c.name, "tag": c.tag, "to_name": list(c.to_name),
                          "labels": list(c.labels)} for c in interface.controls],
            "objects": [{"name": o.name, "tag": o.tag} for o in interface.objects], "tasks": []}
    accepted = []
    for number, task in enumerate(tasks, start=1):
        found = {"data": task["data"], "predictions": []}
        for prediction in task.get("predictions", []):
            found["predictions"].append({
                "model_version": prediction.get("model_version"),
                "score": prediction.get("score"),
                "regions": len(prediction["result"]),
                "errors": interface.validate_prediction(prediction, return_errors=True)})
        read["tasks"].append(found)
        accepted.append({"id": number, "data": task["data"], "annotations": [
            {"id": number, "result": task["predictions"][0]["result"], "was_cancelled": False,
             "created_at": "2026-01-01"}]})
    accepted_file = os.path.join(workdir, "accepted-tasks.json")
    with open(accepted_file, "w", encoding="utf-8") as f:
        json.dump(accepted, f)
    # The images stay in the bucket: no download, sizes from each region's original_width/height.
    Converter(config=config, project_dir=None, download_resources=False).convert_to_coco(
        accepted_file, os.path.join(workdir, "label-studio-coco"), is_dir=False)
    with open(os.path.join(workdir, "label-studio-coco", "result.json"), encoding="utf-8") as f:
        read["coco"] = json.load(f)
    return read


def _cvat_items(dataset) -> list:
    from datumaro.components.annotation import AnnotationType

    names = dataset.categories()[AnnotationType.label]
    items = []
    for item in dataset:
        polygons, boxes = [], 0
        for annotation in item.annotations:
            if annotation.type == AnnotationType.polygon:
                polygons.append({"label": names[annotation.label].name,
                                 "group": annotation.group, "points": list(annotation.points),
                                 "attributes": dict(annotation.attributes)})
            elif annotation.type == AnnotationType.bbox:
                boxes += 1
            else:
                raise AssertionError(f"{item.id}: unexpected {annotation.type.name} annotation")
        items.append({"id": item.id, "coco_id": item.attributes.get("id"),
                      "size": list(item.media.size), "polygons": polygons, "boxes": boxes})
    return items


def _cvat(coco_file: str, workdir: str) -> dict:
    from datumaro.components.annotation import AnnotationType
    from datumaro.components.dataset import Dataset

    # PyPI's Datumaro reads a COCO file only in the layout <root>/annotations/ beside
    # <root>/images/ (DirPathExtracter.find_rootpath, find_images_dir); CVAT's fork reads the
    # uploaded file where it is. The images stay in the bucket.
    root = os.path.join(workdir, "cvat")
    path = os.path.join(root, "annotations", os.path.basename(coco_file))
    os.makedirs(os.path.dirname(path))
    os.makedirs(os.path.join(root, "images"))
    shutil.copy(coco_file, path)
    dataset = Dataset.import_from(path, "coco_instances")
    original = Dataset.import_from(path, "coco_instances", keep_original_category_ids=True)
    original_names = original.categories()[AnnotationType.label]
    return {"labels": [c.name for c in dataset.categories()[AnnotationType.label]],
            "original_ids": {c.name: index for index, c in enumerate(original_names)
                             if any(c.name == used.name for used in
                                    dataset.categories()[AnnotationType.label])},
            "items": _cvat_items(dataset)}


def main(argv) -> None:
    logging.basicConfig(level=logging.ERROR)
    tasks_file, config_file, coco_file, workdir = argv[1:5]
    print(json.dumps({"label_studio": _label_studio(tasks_file, config_file, workdir),
                      "cvat": _cvat(coco_file, workdir)}))


if __name__ == "__main__":
    main(sys.argv)
