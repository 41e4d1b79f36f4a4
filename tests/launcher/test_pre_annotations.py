"""Pre-annotations of a predictions run (maskrcnn_launcher/labeling/pre_annotations.py) read back by
the labeling tools' own code (tests/launcher/labeling_readback.py in .venv-labeling): Label
Studio's import validation and its COCO export of the accepted predictions (label-studio-sdk), and
CVAT's COCO 1.0 import (Datumaro). The masks are numpy shapes, encoded as a predictions run holds
them (predictions.rle)."""

import os

import cv2
import numpy as np
import pytest
from pycocotools import mask as mask_utils

from maskrcnn_launcher.labeling import polygons, pre_annotations
from maskrcnn_launcher.labeling.pre_annotations import PreAnnotationError
from maskrcnn_launcher.labeling.predictions import Predictions, rle
from tests.launcher.read_back import read_back

SOURCE = "s3://data-bucket/unlabeled/"
MODEL = "maskrcnn-20260101-train"
# Sparse ids, as a dataset's own are; a name with a character XML escapes.
CATEGORIES = [{"id": 3, "name": "dent"}, {"id": 7, "name": "scratch"},
              {"id": 12, "name": "rust & paint"}]
# The smallest IoU of a detection's polygons (rasterized by pycocotools, as Datumaro's
# polygons_to_masks and COCO's training do) with its mask, over these shapes: measured 0.975 for
# the L (arms 50 pixels wide), 0.99 for the others, in Label Studio's export and CVAT's import
# alike; the polygons run through the boundary's pixel centres, half a pixel inside the mask.
MIN_IOU = 0.97


def _disk(height, width, x, y, radius):
    return cv2.circle(np.zeros((height, width), np.uint8), (x, y), radius, 1, -1)


def _masks():
    """{(image id, category name): mask} of the detections, and the detections' scores."""
    h1, w1, h2, w2 = 480, 640, 240, 320
    ellipse = cv2.ellipse(np.zeros((h1, w1), np.uint8), (420, 300), (120, 45), 30, 0, 360, 1, -1)
    l_shape = cv2.fillPoly(np.zeros((h2, w2), np.uint8),
                           [np.array([[40, 30], [160, 30], [160, 80], [90, 80], [90, 200],
                                      [40, 200]], np.int32)], 1)
    line = np.zeros((h2, w2), np.uint8)
    line[150, 250:252] = 1  # two pixels: a contour of 2 points, no polygon
    return {(11, "dent"): (_disk(h1, w1, 150, 140, 60), 0.93),
            (11, "scratch"): (ellipse, 0.71),
            (11, "rust & paint"): (_disk(h1, w1, 520, 80, 40) | _disk(h1, w1, 560, 400, 30), 0.62),
            (12, "dent"): (l_shape, 0.88),
            (12, "scratch"): (line, 0.51)}


def _run(source=SOURCE) -> Predictions:
    ids = {c["name"]: c["id"] for c in CATEGORIES}
    results = []
    for (image_id, name), (mask, score) in _masks().items():
        ys, xs = np.nonzero(mask)
        results.append({"image_id": image_id, "category_id": ids[name], "category_name": name,
                        "score": score, "segmentation": rle(mask),
                        "bbox": [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1),
                                 int(ys.max() - ys.min() + 1)]})
    names = {11: "batch2/img1.jpg", 12: "batch2/sub/img2.png", 13: "batch2/img3.jpg"}
    sizes = {11: (480, 640), 12: (240, 320), 13: (300, 200)}
    return Predictions(
        images=[{"id": i, "file_name": names[i], "height": sizes[i][0], "width": sizes[i][1]}
                for i in (11, 12, 13)],
        categories=[dict(c) for c in CATEGORIES], results=results, model=MODEL, source=source,
        score_threshold=0.5)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pre-annotations")
    built = pre_annotations.build(_run())
    paths = built.write(str(folder))
    return built, paths, read_back(paths, tmp_path_factory.mktemp("readback"))


def _iou(shapes, mask) -> float:
    height, width = mask.shape
    drawn = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(shapes, height, width)))
    return float((drawn & mask).sum() / (drawn | mask).sum())


def _expected():
    """{(image id, name): (mask, score)} of the detections that have a polygon."""
    return {key: value for key, value in _masks().items() if key != (12, "scratch")}


def test_label_studio_accepts_every_prediction_against_the_written_labeling_config(written):
    _, _, read = written
    label_studio = read["label_studio"]
    assert label_studio["objects"] == [{"name": "image", "tag": "Image"}]
    assert label_studio["controls"] == [{"name": "label", "tag": "PolygonLabels",
                                         "to_name": ["image"],
                                         "labels": ["dent", "scratch", "rust & paint"]}]
    tasks = label_studio["tasks"]
    assert [t["data"] for t in tasks] == [
        {"image": SOURCE + name}
        for name in ("batch2/img1.jpg", "batch2/sub/img2.png", "batch2/img3.jpg")]
    assert [[p["errors"] for p in t["predictions"]] for t in tasks] == [[[]], [[]], [[]]]
    assert [[p["model_version"] for p in t["predictions"]] for t in tasks] == [[MODEL]] * 3
    # Regions: a polygon each; the two-part mask gives two. The image's score: its detections'
    # mean (the mask without a polygon is not one of them), 0 without any.
    assert [t["predictions"][0]["regions"] for t in tasks] == [4, 1, 0]
    assert [t["predictions"][0]["score"] for t in tasks] == pytest.approx(
        [(0.93 + 0.71 + 0.62) / 3, 0.88, 0.0])


def test_label_studios_export_of_the_accepted_predictions_gives_back_the_masks(written):
    _, _, read = written
    coco = read["label_studio"]["coco"]
    names = {c["id"]: c["name"] for c in coco["categories"]}
    image_ids = {i["file_name"]: i["id"] for i in coco["images"]}
    ours = {SOURCE + "batch2/img1.jpg": 11, SOURCE + "batch2/sub/img2.png": 12}
    found = {}
    for annotation in coco["annotations"]:
        image = next(ours[f] for f, i in image_ids.items() if i == annotation["image_id"])
        found.setdefault((image, names[annotation["category_id"]]), []).extend(
            annotation["segmentation"])
    expected = _expected()
    assert sorted(found) == sorted(expected)
    assert {key: len(shapes) for key, shapes in found.items()} == {
        (11, "dent"): 1, (11, "scratch"): 1, (11, "rust & paint"): 2, (12, "dent"): 1}
    ious = {key: _iou(found[key], mask) for key, (mask, _) in expected.items()}
    assert min(ious.values()) >= MIN_IOU, ious


def test_cvat_imports_the_dataset_category_ids_names_scores_and_polygons(written):
    built, _, read = written
    cvat = read["cvat"]
    assert cvat["labels"] == ["dent", "scratch", "rust & paint"]
    assert cvat["original_ids"] == {"dent": 3, "scratch": 7, "rust & paint": 12}
    items = {item["id"]: item for item in cvat["items"]}
    # CVAT's frame names without extension, each with the run's image id.
    assert {i: item["coco_id"] for i, item in items.items()} == {
        "batch2/img1": 11, "batch2/sub/img2": 12, "batch2/img3": 13}
    assert {i: item["size"] for i, item in items.items()} == {
        "batch2/img1": [480, 640], "batch2/sub/img2": [240, 320], "batch2/img3": [300, 200]}
    by_image = {"batch2/img1": 11, "batch2/sub/img2": 12}
    found, groups, scores = {}, {}, {}
    for item_id, item in items.items():
        for polygon in item["polygons"]:
            key = (by_image[item_id], polygon["label"])
            found.setdefault(key, []).append(polygon["points"])
            groups.setdefault(key, set()).add(polygon["group"])
            scores.setdefault(key, set()).add(polygon["attributes"]["score"])
    expected = _expected()
    assert {key: len(shapes) for key, shapes in found.items()} == {
        (11, "dent"): 1, (11, "scratch"): 1, (11, "rust & paint"): 2, (12, "dent"): 1}
    # One COCO annotation per detection (its parts one group), ids from 1, its score kept.
    assert sorted(g for key in found for g in groups[key]) == [1, 2, 3, 4]
    assert scores == {key: {score} for key, (_, score) in expected.items()}
    assert len(built.coco["annotations"]) == 4
    ious = {key: _iou(found[key], mask) for key, (mask, _) in expected.items()}
    assert min(ious.values()) >= MIN_IOU, ious


def test_a_detection_whose_mask_gives_no_polygon_is_in_neither_file_and_named(written):
    built, paths, _ = written
    assert [os.path.basename(p) for p in paths] == [
        pre_annotations.LABEL_STUDIO_TASKS, pre_annotations.LABEL_STUDIO_CONFIG,
        pre_annotations.CVAT_COCO]
    assert built.skipped == [{"file_name": "batch2/sub/img2.png", "category_name": "scratch",
                              "score": 0.51, "reason": pre_annotations.NO_POLYGON}]
    steps = built.import_steps("s3://out-bucket/run/pre-annotations")
    assert steps[:3] == [
        f"Pre-annotations of {MODEL}: 3 images, 4 detections, in "
        "s3://out-bucket/run/pre-annotations/",
        "In neither file (1 of 5 detections):",
        f"  batch2/sub/img2.png: scratch (0.51): {pre_annotations.NO_POLYGON}"]


def test_import_steps_name_the_bucket_the_labels_and_the_cvat_format(written):
    built, _, _ = written
    steps = "\n".join(built.import_steps("s3://out-bucket/run/pre-annotations/"))
    assert "Add Source Storage > Amazon S3: bucket data-bucket" in steps
    assert "Do not Sync" in steps
    assert f"model version {MODEL}" in steps
    assert ('[{"name": "dent", "attributes": []}, {"name": "scratch", "attributes": []}, '
            '{"name": "rust & paint", "attributes": []}]') in steps
    assert f"Upload annotations > format 'COCO 1.0' > {pre_annotations.CVAT_COCO}" in steps


def test_a_local_folder_is_named_as_label_studios_local_files(tmp_path):
    root = tmp_path / "served"
    run = _run(source=str(root / "unlabeled"))
    run.images[2]["file_name"] = "my batch/a#1.jpg"
    built = pre_annotations.build(run, local_files_root=str(root))
    assert [t["data"]["image"] for t in built.tasks] == [
        "/data/local-files/?d=unlabeled/batch2/img1.jpg",
        "/data/local-files/?d=unlabeled/batch2/sub/img2.png",
        "/data/local-files/?d=unlabeled/my%20batch/a%231.jpg"]
    assert f"LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT={root}" in "\n".join(
        built.import_steps(str(tmp_path / "out")))


def _with(change):
    run = _run()
    change(run)
    return run


@pytest.mark.parametrize("run, local_files_root, named", [
    (_with(lambda r: r.results[0].update(category_id=5)), None,
     "category_id 5 is not one of the categories [3, 7, 12]"),
    (_with(lambda r: r.results[0].update(category_name="hail")), None,
     "category_name 'hail' is not category 3's name 'dent'"),
    (_with(lambda r: r.images[1].pop("height")), None,
     "image 'batch2/sub/img2.png': height and width must be positive integers (got None x 320)"),
    (_with(lambda r: r.images[2].update(file_name="batch2/img1.png")), None,
     "images 'batch2/img1.jpg' and 'batch2/img1.png': CVAT matches frames by name without "
     "extension"),
    (_with(lambda r: r.images[2].update(file_name="../img3.jpg")), None,
     "file_name '../img3.jpg' must be a relative path"),
    (_with(lambda r: r.results[1].update(score=1.2)), None,
     "score 1.2 must be a number from 0 to 1"),
    (_with(lambda r: r.results[3].update(image_id=99)), None,
     "image_id 99 is not an image of the run"),
    (_with(lambda r: r.results[3]["segmentation"].update(size=[480, 640])), None,
     "segmentation must be a compressed RLE (counts as text) of the image's size [240, 320], got "
     "size [480, 640]"),
    (_with(lambda r: r.categories[2].update(name="dent")), None,
     "names must be distinct and not empty"),
    (_with(lambda r: setattr(r, "source", "s3://data-bucket/unlabeled")), None,
     "ending in '/'"),
    (_with(lambda r: setattr(r, "source", "/data/unlabeled")), None,
     "is a local folder: Label Studio serves local images only below its "
     "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT; name that folder (local_files_root)"),
    (_with(lambda r: setattr(r, "source", "/data/unlabeled")), "/srv/images",
     "source '/data/unlabeled' is not below local_files_root '/srv/images'"),
    (_run(), "/srv/images", "local_files_root '/srv/images': only for a run over a local folder"),
    (_with(lambda r: setattr(r, "model", "")), None, "model '': Label Studio's model_version"),
], ids=["unknown category id", "category name of another id", "image without a size",
        "names equal without extension", "file name outside the prefix", "score above 1",
        "unknown image", "mask of another size", "two categories one name",
        "prefix without slash", "local folder without root", "local folder outside root",
        "root for an S3 run", "no model"])
def test_bad_input_is_refused_naming_the_value(run, local_files_root, named):
    with pytest.raises(PreAnnotationError) as refused:
        pre_annotations.build(run, local_files_root=local_files_root)
    assert named in str(refused.value)


def test_mask_polygons_run_through_pixel_centres_one_per_part_holes_filled():
    rectangle = np.zeros((20, 30), np.uint8)
    rectangle[4:10, 5:15] = 1  # rows 4-9, columns 5-14
    assert polygons.mask_polygons(rectangle) == [
        [5.5, 4.5, 5.5, 9.5, 14.5, 9.5, 14.5, 4.5]]
    ring = _disk(60, 60, 30, 30, 20) - _disk(60, 60, 30, 30, 8)
    assert len(polygons.mask_polygons(ring)) == 1
    two = _disk(60, 90, 20, 30, 6) | _disk(60, 90, 60, 30, 12)
    parts = polygons.mask_polygons(two)
    assert len(parts) == 2 and min(parts[0][0::2]) > 45  # the larger part first
    line = np.zeros((10, 10), np.uint8)
    line[5, 2:7] = 1  # its contour goes there and back: no area
    assert polygons.mask_polygons(line) == []
    assert polygons.mask_polygons(np.zeros((10, 10), np.uint8)) == []
