"""Class ids end to end: the model numbers a dataset's classes 1..K, and every answer a user reads
carries the dataset's own ids (dataset_info.json `source_id`: COCO's 1..90, a labeling tool's
{3, 17, 1000}) with their names. The exported code/categories.json keeps both; the endpoint's
handler, as the container imports it from there, maps one to the other (no TensorFlow)."""

import importlib.util
import json
import types

from maskrcnn_job.serving import export

from tests.training.serving_inputs import detection_row, request_context

# COCO 2017 as the converter numbers it: its 80 classes 1..80, its own ids up to 90.
COCO_TAIL = [{"id": 79, "name": "hair drier", "source_id": 89},
             {"id": 80, "name": "toothbrush", "source_id": 90}]


def _handler(tmp_path, categories):
    code = export.write_serving_code(str(tmp_path), categories)
    spec = importlib.util.spec_from_file_location("inference", f"{code}/inference.py")
    handler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handler)
    return code, handler


def _answer(handler, classes):
    prediction = dict(detection_row(scores=(0.9, 0.8)), detection_classes=[*classes, 0.0])
    response = types.SimpleNamespace(status_code=200,
                                     content=json.dumps({"predictions": [prediction]}).encode())
    body, _ = handler.output_handler(response, request_context())
    return [(d["category_id"], d["category_name"]) for d in json.loads(body)["detections"]]


def test_the_endpoint_answers_cocos_own_ids_with_their_names(tmp_path):
    code, handler = _handler(tmp_path, COCO_TAIL)
    with open(f"{code}/categories.json", encoding="utf-8") as f:
        assert json.load(f) == COCO_TAIL
    assert _answer(handler, [80.0, 79.0]) == [(90, "toothbrush"), (89, "hair drier")]


def test_a_labeling_tools_sparse_ids_come_back_and_an_older_model_keeps_its_ids(tmp_path):
    _, handler = _handler(tmp_path / "export", [
        {"id": 1, "name": "bolt", "source_id": 3}, {"id": 2, "name": "nut", "source_id": 1000}])
    assert _answer(handler, [2.0, 1.0]) == [(1000, "nut"), (3, "bolt")]
    # A dataset staged before the ids were numbered has no source_id: its ids are the dataset's.
    _, handler = _handler(tmp_path / "older", [{"id": 3, "name": "triangle"},
                                               {"id": 1, "name": "circle"}])
    assert _answer(handler, [3.0, 1.0]) == [(3, "triangle"), (1, "circle")]
