"""Asking a served model: an encoded image (or a TensorFlow Serving JSON request) to an endpoint,
its detections back.

    # {"detections": ...}
    invocation.invoke(boto_session.client("sagemaker-runtime"), name, jpeg_bytes)

Each request is checked before it is sent (content type, size, score threshold: docs/aws-rules.md
EP-6); the endpoint's answer is checked to be detections.
"""

import json
from typing import Optional

from botocore.exceptions import ClientError

from maskrcnn_launcher.serving.endpoint_plan import DeployRequestError

# InvokeEndpoint: a request body of at most 6 MB (EP-6).
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
IMAGE_CONTENT_TYPES = ("image/jpeg", "image/png")
CONTENT_TYPES = IMAGE_CONTENT_TYPES + ("application/json",)


class InvokeError(RuntimeError):
    """The endpoint refused a request or answered something other than detections."""


def content_type_of(body: bytes) -> str:
    """image/jpeg or image/png from the first bytes of an encoded image."""
    if body[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if body[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    raise DeployRequestError("the image is neither JPEG nor PNG (by its first bytes); the "
                             "endpoint takes image/jpeg, image/png or application/json")


def check_score_threshold(score_threshold) -> None:
    """Raises DeployRequestError unless the threshold is None (the endpoint's default) or a
    number from 0 to 1: the endpoint would refuse anything else, after running the model
    (training_code/maskrcnn_job/serving/endpoint_handler.py)."""
    if score_threshold is None:
        return
    if (isinstance(score_threshold, bool) or not isinstance(score_threshold, (int, float))
            or not 0 <= score_threshold <= 1):
        raise DeployRequestError(
            f"score threshold {score_threshold!r} (--score-threshold, score_threshold): expected "
            "a number from 0 to 1 (detections scoring below it are dropped), or unset for the "
            "endpoint's default")


def invoke(runtime_client, endpoint_name: str, body: bytes, content_type: Optional[str] = None,
           score_threshold: Optional[float] = None) -> dict:
    """Sends one encoded image (or a TensorFlow Serving JSON request) to the endpoint
    (InvokeEndpoint) and returns its JSON answer: for an image {"detections": [...],
    "image_size": [h, w]} (training_code/maskrcnn_job/serving/endpoint_handler.py)."""
    check_score_threshold(score_threshold)
    content_type = content_type or content_type_of(body)
    if content_type not in CONTENT_TYPES:
        raise DeployRequestError(f"content type {content_type!r}: the endpoint takes "
                                 f"{', '.join(CONTENT_TYPES)}")
    if len(body) > MAX_PAYLOAD_BYTES:
        raise DeployRequestError(f"request of {len(body)} bytes: InvokeEndpoint takes at most "
                                 f"{MAX_PAYLOAD_BYTES} (6 MB); send a smaller image")
    kwargs = {"EndpointName": endpoint_name, "ContentType": content_type,
              "Accept": "application/json", "Body": body}
    if score_threshold is not None:
        kwargs["CustomAttributes"] = f"score_threshold={score_threshold}"
    try:
        response = runtime_client.invoke_endpoint(**kwargs)
    except ClientError as error:
        raise InvokeError(f"endpoint {endpoint_name}: {error}") from None
    text = response["Body"].read().decode("utf-8", "replace")
    try:
        answer = json.loads(text)
    except ValueError:
        raise InvokeError(f"endpoint {endpoint_name} answered {response.get('ContentType')!r}, "
                          f"not JSON: {text[:200]!r}") from None
    if content_type in IMAGE_CONTENT_TYPES and not (
            isinstance(answer, dict) and isinstance(answer.get("detections"), list)):
        raise InvokeError(f"endpoint {endpoint_name} answered without a detections list: "
                          f"{text[:200]!r}")
    return answer
