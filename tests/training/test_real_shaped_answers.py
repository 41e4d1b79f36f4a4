"""Every answer of the shared trained model lands on its object in the user's own image (issue 45):
on easy one-shape landscape and portrait images two to four times the model's input, half of them
EXIF-turned (tests/training/easy_images.py), the top detection of each image is held to the
ground truth in the upright image's pixels by pycocotools, through each path a team takes:

- `predict` (maskrcnn_local/predict.py): its COCO results' box and mask, and the drawn picture's
  mask pixels;
- predict-batch's local path (maskrcnn_local/predict_batch.py: the TensorFlow Serving handler,
  then the launcher's assembly, predictions.results_of, which a Batch Transform's answers go
  through as well: maskrcnn_launcher/labeling/batch_jobs.py);
- its pre-annotations, read back by the labeling tools' own code (label-studio-sdk's COCO export
  of the accepted predictions, Datumaro's import of the CVAT file: tests/launcher/read_back.py).

The endpoint handler's answers are held the same way in test_job.py. One module fixture answers
the images through every path once."""

import json
import os
from collections import defaultdict

import pytest

from tests import trained_runs
from tests.launcher.read_back import read_back
from tests.training import easy_images
from tests.training.easy_images import MIN_IOU
from tests.training.job_runs import measured

# Takes the shared trained model (make check leaves it to make test).
pytestmark = pytest.mark.end_to_end


@pytest.fixture(scope="module")
def answered(tmp_path_factory):
    from maskrcnn_local import predict, predict_batch

    trained = trained_runs.get("shapes")
    hyperparameters = json.loads(
        (trained.opt_ml / "input" / "config" / "hyperparameters.json").read_text())
    work = tmp_path_factory.mktemp("real-shaped")
    images = easy_images.make(work / "easy", 4, int(hyperparameters["image_size"]))
    names = [os.path.basename(path) for path, _ in images]
    folder = os.path.dirname(images[0][0])
    predicted = work / "predict"
    predict.predict(str(trained.model_dir), [path for path, _ in images], str(predicted))
    run, handed = predict_batch.run(str(trained.model_dir), folder, str(work / "batch"),
                                    echo=lambda line: None)
    tools = read_back(handed.paths[:3], tmp_path_factory.mktemp("read-back"))
    # The ids predict gives images without an annotation file (their numeric stems).
    ids = predict.image_ids([path for path, _ in images])
    return {"images": {name: (path, truth[0]) for name, (path, truth) in zip(names, images)},
            "ids": dict(zip(names, ids)), "predict": predicted, "batch": run, "tools": tools}


def _top(results):
    """{image id: its highest-scoring result}."""
    top = {}
    for result in results:
        if result["image_id"] not in top or result["score"] > top[result["image_id"]]["score"]:
            top[result["image_id"]] = result
    return top


def _held(what, found, answered):
    """Measures and asserts each image's top answer on its object: `found` is {file name: (box,
    segmentation)}, either None where the path has no such answer."""
    assert sorted(found) == sorted(answered["images"]), f"{what}: an image without an answer"
    boxes, masks = {}, {}
    for name, (box, segmentation) in found.items():
        path, truth = answered["images"][name]
        width, height = easy_images.upright_size(path)
        if box is not None:
            boxes[name] = measured(f"{what}: top box IoU with the ground truth, {name}",
                                   easy_images.box_iou(box, truth["bbox"]))
        masks[name] = measured(f"{what}: top mask IoU with the ground truth, {name}",
                               easy_images.rle_iou(segmentation, truth, height, width))
    assert min(boxes.values(), default=1) >= MIN_IOU, boxes
    assert min(masks.values()) >= MIN_IOU, masks


def test_predicts_results_lie_on_their_objects_in_the_upright_images_pixels(answered):
    from maskrcnn_local import predict

    results = json.loads((answered["predict"] / predict.RESULTS_FILE).read_text())
    top = _top(results)
    _held("predict", {name: (top[i]["bbox"], top[i]["segmentation"])
                      for name, i in answered["ids"].items() if i in top}, answered)


def test_predicts_drawn_masks_lie_on_their_objects(answered):
    """The picture predict draws: the pixels blended with a detected class's colour (the
    drawing's overlay, drawing.MASK_OPACITY over the upright image scaled up by a whole factor),
    read back from the PNG and taken down to the image's pixels, lie on the object. All the
    image's detections count: the shared model often answers one object with several classes,
    each drawn over the one before."""
    import numpy as np
    from PIL import Image, ImageOps

    from maskrcnn_contract.palette import colour
    from maskrcnn_local import drawing, predict

    results = json.loads((answered["predict"] / predict.RESULTS_FILE).read_text())
    drawn_masks = {}
    for name, image_id in answered["ids"].items():
        path, truth = answered["images"][name]
        upright = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        drawn = np.asarray(Image.open(answered["predict"] /
                                      (os.path.splitext(name)[0] + ".png")).convert("RGB"), float)
        scale = drawn.shape[1] // upright.width
        assert drawn.shape[:2] == (upright.height * scale, upright.width * scale), (name, scale)
        under = np.asarray(upright.resize((upright.width * scale, upright.height * scale),
                                          Image.Resampling.BICUBIC), float)
        alpha = int(255 * drawing.MASK_OPACITY) / 255
        on = np.zeros(drawn.shape[:2], bool)
        for category_id in {r["category_id"] for r in results if r["image_id"] == image_id}:
            blended = (1 - alpha) * under + alpha * np.array(colour(category_id))
            on |= (np.abs(drawn - blended).max(axis=2) <= 2) \
                & (np.abs(drawn - under).max(axis=2) > 8)
        # Each image pixel is a scale x scale block of the picture: its centre decides.
        centre = scale // 2
        drawn_masks[name] = measured(
            f"predict's picture: pixels drawn in a detected class's colour, IoU with the ground "
            f"truth, {name}", easy_images.mask_iou(on[centre::scale, centre::scale], truth))
    assert min(drawn_masks.values()) >= MIN_IOU, drawn_masks


def test_predict_batch_answers_each_image_at_its_upright_size_on_its_object(answered):
    run = answered["batch"]
    sizes = {image["file_name"]: (image["width"], image["height"]) for image in run.images}
    assert sizes == {name: easy_images.upright_size(path)
                     for name, (path, _) in answered["images"].items()}
    top = _top(run.results)
    _held("predict-batch", {image["file_name"]: (top[image["id"]]["bbox"],
                                                 top[image["id"]]["segmentation"])
                            for image in run.images if image["id"] in top}, answered)


def test_label_studios_export_of_the_pre_annotations_lands_on_each_object(answered):
    """Label Studio's regions are in percent of the image; its own converter (an accepted
    prediction exported as COCO) puts them back in pixels. The export keeps no score: the region
    held is the image's first, the top detection's (pre-annotations keep the run's order)."""
    coco = answered["tools"]["label_studio"]["coco"]
    by_image = defaultdict(list)
    for annotation in coco["annotations"]:
        by_image[annotation["image_id"]].append(annotation)
    found = {}
    for image in coco["images"]:
        name, = [n for n in answered["images"] if image["file_name"].endswith("/" + n)]
        assert (image["width"], image["height"]) == easy_images.upright_size(
            answered["images"][name][0])
        if by_image[image["id"]]:
            first = by_image[image["id"]][0]
            found[name] = (first["bbox"], first["segmentation"])
    _held("Label Studio's export", found, answered)


def test_cvats_import_of_the_pre_annotations_lands_on_each_object(answered):
    """CVAT's COCO 1.0 import (Datumaro): each image's polygons of its highest-scoring detection
    (the score CVAT keeps as an attribute), in pixels."""
    found = {}
    for item in answered["tools"]["cvat"]["items"]:
        name, = [n for n in answered["images"] if os.path.splitext(n)[0] == item["id"]]
        assert item["size"] == list(reversed(easy_images.upright_size(
            answered["images"][name][0])))
        if item["polygons"]:
            best = max(polygon["attributes"]["score"] for polygon in item["polygons"])
            found[name] = (None, [p["points"] for p in item["polygons"]
                                  if p["attributes"]["score"] == best])
    _held("CVAT's import", found, answered)
