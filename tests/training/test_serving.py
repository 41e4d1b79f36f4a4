"""The endpoint's handler and the prediction drawings, on made-up model outputs (no TensorFlow).

The handler on the real SavedModel, as the container runs it: tests/training/test_job.py."""

import io
import json
import types

import numpy as np
import pytest
from PIL import Image

from maskrcnn_job.serving import endpoint_handler
from maskrcnn_local import drawing

from tests.training.serving_inputs import detection_row, request_context


def test_an_image_request_becomes_a_base64_serving_bytes_request():
    request = json.loads(endpoint_handler.input_handler(io.BytesIO(b"\xff\xd8jpeg"),
                                                        request_context()))
    assert request == {"signature_name": "serving_bytes", "instances": [{"b64": "/9hqcGVn"}]}
    passthrough = '{"instances": [[1]]}'
    assert endpoint_handler.input_handler(io.BytesIO(passthrough.encode()),
                                         request_context("application/json")) == passthrough


@pytest.mark.parametrize("content_type", ["text/csv", None])
def test_other_content_types_are_refused_by_name(content_type):
    with pytest.raises(ValueError, match=f"unsupported content type {content_type or 'none'!r}"):
        endpoint_handler.input_handler(io.BytesIO(b"1,2"), request_context(content_type))


def test_an_empty_image_request_is_refused():
    with pytest.raises(ValueError, match="request body is empty"):
        endpoint_handler.input_handler(io.BytesIO(b""), request_context("image/png"))


def test_detections_are_coco_boxes_above_the_threshold_with_names():
    answer = endpoint_handler.detections(detection_row(), 0.3, {3: "triangle"})
    assert answer["image_size"] == [100, 80]
    detection, = answer["detections"]  # 0.2 < 0.3; the third is past num_detections
    assert detection["bbox"] == [20.0, 10.0, 40.0, 40.0]  # [x, y, w, h] from [ymin, xmin, ...]
    assert detection["category_id"] == 3 and detection["category_name"] == "triangle"
    assert detection["score"] == 0.9
    assert np.array(detection["mask"]).shape == (28, 28)


@pytest.mark.parametrize("attributes, threshold", [("", 0.3), ("score_threshold=0.1", 0.1),
                                                   ("a=b, score_threshold=0", 0.0)])
def test_the_threshold_comes_from_the_custom_attributes(attributes, threshold):
    assert endpoint_handler.score_threshold(attributes) == threshold


def test_without_a_custom_attribute_the_threshold_comes_from_the_containers_environment(
        monkeypatch):
    """A Batch Transform request carries no custom attributes: predict-batch sets the threshold
    on the transform job's environment, under the launcher's name for it."""
    from maskrcnn_launcher.labeling import batch_plan

    assert endpoint_handler.SCORE_THRESHOLD_ENV == batch_plan.SCORE_THRESHOLD_ENV
    assert endpoint_handler.DEFAULT_SCORE_THRESHOLD == batch_plan.DEFAULT_SCORE_THRESHOLD
    monkeypatch.setenv(batch_plan.SCORE_THRESHOLD_ENV, "0.05")
    assert endpoint_handler.score_threshold("") == 0.05
    assert endpoint_handler.score_threshold("score_threshold=0.5") == 0.5  # the request's first
    monkeypatch.setenv(batch_plan.SCORE_THRESHOLD_ENV, "lots")
    with pytest.raises(ValueError, match="environment MASKRCNN_SCORE_THRESHOLD='lots'"):
        endpoint_handler.score_threshold("")


@pytest.mark.parametrize("attributes, message", [("score_threshold=high", "'high' is not a number"),
                                                 ("score_threshold=2", "outside")])
def test_a_bad_threshold_is_refused_by_value(attributes, message):
    with pytest.raises(ValueError, match=message):
        endpoint_handler.score_threshold(attributes)


def test_the_output_handler_answers_one_object_for_an_image_and_a_list_for_json():
    response = types.SimpleNamespace(status_code=200, content=json.dumps(
        {"predictions": [detection_row(), detection_row(scores=(0.5, 0.4))]}).encode())
    body, content_type = endpoint_handler.output_handler(response, request_context())
    assert content_type == "application/json" and len(json.loads(body)["detections"]) == 1
    body, _ = endpoint_handler.output_handler(response, request_context("application/json"))
    assert [len(p["detections"]) for p in json.loads(body)["predictions"]] == [1, 2]
    failed = types.SimpleNamespace(status_code=400, content=b"bad input")
    with pytest.raises(ValueError, match="answered 400: bad input"):
        endpoint_handler.output_handler(failed, request_context())


def test_masks_are_blended_in_the_category_colour_and_the_rest_is_unchanged():
    image = Image.new("RGB", (64, 48), (0, 0, 0))
    mask = np.zeros((48, 64), bool)
    mask[10:20, 30:40] = True
    drawn = drawing.draw_instances(image, [{"bbox": [30, 10, 10, 10], "category_id": 2,
                                           "score": 0.5, "mask": mask}], {2: "square"})
    scale = drawing.scale_for(image)
    assert scale == 8 and drawn.size == (64 * scale, 48 * scale)
    pixels = np.asarray(drawn).astype(int)
    inside = pixels[15 * scale, 35 * scale]
    expected = np.array(drawing.colour(2)) * drawing.MASK_OPACITY
    assert np.abs(inside - expected).max() <= 2  # blended over black
    assert (pixels[40 * scale, 5 * scale] == 0).all()  # far from the instance: untouched


def test_the_grid_puts_pairs_side_by_side():
    left, right = Image.new("RGB", (100, 50), "red"), Image.new("RGB", (120, 60), "blue")
    sheet = drawing.grid([(left, right), (left, right)], gap=8)
    assert sheet.size == (100 + 120 + 3 * 8, 2 * 60 + 3 * 8)
    assert sheet.getpixel((8 + 50, 8 + 25)) == (255, 0, 0)
    assert sheet.getpixel((2 * 8 + 100 + 60, 8 + 30)) == (0, 0, 255)


def test_predict_results_are_a_coco_results_file_that_pycocotools_evaluates(tmp_path):
    """The endpoint's answer -> masks pasted on the image -> COCO results: a detection whose box
    is the ground truth's and whose mask fills it scores AP 0.9 or more (the pasted mask spills
    about a pixel past the box, as Model Garden's paste does, so IoU 0.95 is not reached)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from maskrcnn_local import predict

    from pycocotools import mask as mask_api

    truth_mask = np.zeros((100, 80), np.uint8)
    truth_mask[10:50, 20:60] = 1
    rle = mask_api.encode(np.asfortranarray(truth_mask))
    rle["counts"] = rle["counts"].decode()
    annotations = {"images": [{"id": 7, "file_name": "7.jpg", "height": 100, "width": 80}],
                   "categories": [{"id": 3, "name": "triangle"}],
                   "annotations": [{"id": 1, "image_id": 7, "category_id": 3, "iscrowd": 0,
                                    "segmentation": rle, "area": 1600.0,
                                    "bbox": [20.0, 10.0, 40.0, 40.0]}]}
    (tmp_path / "truth.json").write_text(json.dumps(annotations))
    answer = endpoint_handler.detections(
        dict(detection_row(), detection_masks=np.ones((3, 28, 28)).tolist()), 0.3, {})
    instances = predict.pasted_instances(answer)
    assert instances[0]["mask"].shape == (100, 80)
    results = predict.coco_results(7, instances)
    (tmp_path / "results.json").write_text(json.dumps(results))
    truth = COCO(str(tmp_path / "truth.json"))
    for iou_type in ("segm", "bbox"):
        evaluation = COCOeval(truth, truth.loadRes(str(tmp_path / "results.json")), iou_type)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
        assert evaluation.stats[0] >= 0.89, iou_type  # 0.9: IoU 0.5..0.9 of 0.5..0.95


def _jpeg(path, size=(32, 24)):
    Image.new("RGB", size, "gray").save(path, format="JPEG")
    return str(path)


def _refusal(tmp_path, images, **kwargs):
    """predict's refusal, before any model is loaded or any file written."""
    from maskrcnn_local import predict

    out = tmp_path / "out"
    with pytest.raises(predict.PredictError) as error:
        predict.predict(kwargs.pop("model", str(tmp_path)), images, str(out), **kwargs)
    assert not out.exists()
    return str(error.value)


def test_predict_names_a_missing_empty_or_corrupt_image(tmp_path):
    good = _jpeg(tmp_path / "good.jpg")
    assert "image 'nowhere.jpg' does not exist" in _refusal(tmp_path, [good, "nowhere.jpg"])
    (tmp_path / "empty.jpg").write_bytes(b"")
    assert f"image '{tmp_path}/empty.jpg' is empty" in _refusal(tmp_path, [str(tmp_path / "empty.jpg")])
    # A JPEG cut in half: its header reads, its pixels do not.
    whole = (tmp_path / "good.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(whole[:len(whole) // 2])
    message = _refusal(tmp_path, [good, str(tmp_path / "cut.jpg")])
    assert f"image '{tmp_path}/cut.jpg' cannot be decoded" in message
    Image.new("RGB", (8, 8)).save(tmp_path / "picture.gif")
    assert "is GIF; the model takes JPEG or PNG" in _refusal(tmp_path, [str(tmp_path / "picture.gif")])


def test_predict_names_an_empty_directory_a_model_without_savedmodel_and_a_bad_threshold(tmp_path):
    (tmp_path / "none").mkdir()
    assert "holds no .jpg/.jpeg/.png image" in _refusal(tmp_path, [str(tmp_path / "none")])
    images = [_jpeg(tmp_path / "a.jpg")]
    assert "holds no SavedModel" in _refusal(tmp_path, images, model=str(tmp_path / "none"))
    assert "--score-threshold 7 is outside [0, 1]" in _refusal(tmp_path, images, score_threshold=7)


def test_predict_names_the_images_its_annotations_do_not_hold(tmp_path):
    images = [_jpeg(tmp_path / "1.jpg"), _jpeg(tmp_path / "2.jpg")]
    (tmp_path / "truth.json").write_text(json.dumps({
        "images": [{"id": 1, "file_name": "1.jpg", "height": 24, "width": 32}],
        "annotations": [], "categories": [{"id": 1, "name": "circle"}]}))
    assert "images not in the annotations file: ['2.jpg']" in _refusal(
        tmp_path, images, annotations=str(tmp_path / "truth.json"))


def test_the_predict_command_exits_2_naming_the_file(tmp_path, capsys):
    from maskrcnn_local import predict

    (tmp_path / "cut.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(SystemExit) as exit_status:
        predict.main([str(tmp_path), str(tmp_path / "cut.png"), "--out", str(tmp_path / "out")])
    assert exit_status.value.code == 2
    assert "cut.png' cannot be decoded" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_handler_gets_the_containers_immutable_context():
    """As the TensorFlow Serving container's tfs_utils.Context, a namedtuple: a handler that
    stored state on it would fail in the container, so it fails here; a custom attributes header
    that was not sent is None, not ""."""
    context = request_context()
    assert context.custom_attributes is None and context.accept_header == "application/json"
    with pytest.raises(AttributeError):
        context.threshold = 0.5
    request = endpoint_handler.input_handler(io.BytesIO(b"\xff\xd8jpeg"), context)
    assert json.loads(request)["signature_name"] == "serving_bytes"
