"""Pre- and post-processing for the SageMaker TensorFlow Serving container: an image in, JSON out.

The export copies this file to <model dir>/code/inference.py, beside the SavedModel's version
directory (<model dir>/1/), with the dataset's category names in code/categories.json. The
container (aws/sagemaker-tensorflow-serving-container, README "Pre/Post-Processing") imports
code/inference.py and calls `input_handler(data, context)` before it posts to TensorFlow Serving's
REST API and `output_handler(response, context)` after. Standard library only: an endpoint in a
VPC without internet cannot pip-install anything (docs/aws-rules.md, EP rules).

Requests:
- `image/jpeg`, `image/png` or `application/x-image`: one encoded image, sent to the SavedModel's
  `serving_bytes` signature as TensorFlow Serving's base64 form (`{"b64": ...}`);
- `application/json`: a TensorFlow Serving request, passed through (it names its own signature).
Custom attribute `score_threshold=X` (header X-Amzn-SageMaker-Custom-Attributes) drops weaker
detections; without it, the container's SCORE_THRESHOLD_ENV (a Batch Transform sends no custom
attributes: the launcher's predict-batch sets the variable on the transform job), else
DEFAULT_SCORE_THRESHOLD.

Response (application/json), for an image request:
    {"image_size": [height, width],
     "detections": [{"bbox": [x, y, width, height],     # input-image pixels, COCO's order
                     "category_id": 3, "category_name": "triangle", "score": 0.97,
                     "mask": [[...28 floats...] x 28]}]}  # probabilities over the box
(category_id: the id of the dataset's annotation file, e.g. COCO's own 1..90, not the model's
class number 1..K; categories.json maps one to the other);
and for a JSON request {"predictions": [<one such object per instance>]}.
"""

import base64
import json
import os
from typing import Optional

SIGNATURE = "serving_bytes"
DEFAULT_SCORE_THRESHOLD = 0.3
SCORE_THRESHOLD_ENV = "MASKRCNN_SCORE_THRESHOLD"
IMAGE_CONTENT_TYPES = ("image/jpeg", "image/png", "application/x-image")
CATEGORIES_FILE = "categories.json"
MASK_DECIMALS = 3


def _categories() -> tuple:
    """({model class id: name}, {model class id: the dataset's own id}) from categories.json
    beside this file, empty when it is absent. The model numbers the classes 1..K; answers carry
    the ids of the dataset's annotation file (`source_id`; a model exported before they were kept
    has none, and its ids are the dataset's)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), CATEGORIES_FILE)
    if not os.path.isfile(path):
        return {}, {}
    with open(path, encoding="utf-8") as f:
        categories = json.load(f)
    return ({int(c["id"]): c["name"] for c in categories},
            {int(c["id"]): int(c.get("source_id", c["id"])) for c in categories})


def _threshold(value: str, where: str) -> float:
    try:
        threshold = float(value)
    except ValueError:
        raise ValueError(f"{where}={value!r} is not a number") from None
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"{where}={threshold} is outside [0, 1]")
    return threshold


def score_threshold(custom_attributes) -> float:
    """`score_threshold=X` from the request's custom attributes (comma-separated key=value), else
    the container's SCORE_THRESHOLD_ENV, else DEFAULT_SCORE_THRESHOLD."""
    for item in (custom_attributes or "").split(","):
        key, _, value = item.partition("=")
        if key.strip() == "score_threshold":
            return _threshold(value, "custom attribute score_threshold")
    if os.environ.get(SCORE_THRESHOLD_ENV):
        return _threshold(os.environ[SCORE_THRESHOLD_ENV], f"environment {SCORE_THRESHOLD_ENV}")
    return DEFAULT_SCORE_THRESHOLD


def tfs_request(image_bytes: bytes) -> str:
    """The TensorFlow Serving REST request for one encoded image: base64 in TFS's {"b64": ...}."""
    return json.dumps({"signature_name": SIGNATURE,
                       "instances": [{"b64": base64.b64encode(image_bytes).decode("ascii")}]})


def detections(prediction: dict, threshold: float, names: dict,
               source_ids: Optional[dict] = None) -> dict:
    """One instance of TensorFlow Serving's row-format output -> this endpoint's JSON object.

    Model Garden's DetectionModule gives boxes as [ymin, xmin, ymax, xmax] in input-image pixels,
    the model's class ids as classes (floats), and 28x28 mask probabilities over each box. `names`
    and `source_ids` are keyed by the model's class id; the answer's category_id is the dataset's
    own (`source_ids`, the class id where it has none)."""
    count = int(prediction["num_detections"])
    # image_info row 0: the original image's [height, width].
    height, width = (int(round(v)) for v in prediction["image_info"][0])
    found = []
    for i in range(count):
        score = float(prediction["detection_scores"][i])
        if score < threshold:
            continue
        ymin, xmin, ymax, xmax = (float(v) for v in prediction["detection_boxes"][i])
        category = int(round(float(prediction["detection_classes"][i])))
        item = {"bbox": [round(xmin, 2), round(ymin, 2), round(xmax - xmin, 2),
                         round(ymax - ymin, 2)],
                "category_id": (source_ids or {}).get(category, category),
                "score": round(score, 4)}
        if category in names:
            item["category_name"] = names[category]
        if "detection_masks" in prediction:
            item["mask"] = [[round(float(p), MASK_DECIMALS) for p in row]
                            for row in prediction["detection_masks"][i]]
        found.append(item)
    return {"image_size": [height, width], "detections": found}


def input_handler(data, context):
    content_type = (context.request_content_type or "").split(";")[0].strip().lower()
    if content_type in IMAGE_CONTENT_TYPES:
        payload = data.read()
        if not payload:
            raise ValueError("the request body is empty: send one encoded JPEG or PNG image")
        return tfs_request(payload)
    if content_type == "application/json":
        return data.read().decode("utf-8")
    raise ValueError(f"unsupported content type {content_type or 'none'!r}: send "
                     f"{', '.join(IMAGE_CONTENT_TYPES)} or a TensorFlow Serving JSON request")


def output_handler(response, context):
    # The TF Serving 2.20 DLC answers TensorFlow Serving's own error status before calling this
    # (docs/serving.md, "The serving image"); older containers handed every answer here.
    if response.status_code != 200:
        raise ValueError(f"TensorFlow Serving answered {response.status_code}: "
                         f"{response.content.decode('utf-8', 'replace')}")
    threshold = score_threshold(getattr(context, "custom_attributes", None))
    names, source_ids = _categories()
    predictions = json.loads(response.content)["predictions"]
    objects = [detections(p, threshold, names, source_ids) for p in predictions]
    content_type = (context.request_content_type or "").split(";")[0].strip().lower()
    body = objects[0] if content_type in IMAGE_CONTENT_TYPES else {"predictions": objects}
    return json.dumps(body), "application/json"
