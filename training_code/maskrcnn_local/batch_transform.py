"""A SageMaker Batch Transform request played on this machine the way SageMaker runs it, with the
trained model behind the SageMaker TensorFlow Serving container's path.

    served = serve(model_dir)        # the model directory the job wrote: 1/ and code/
    played = play(request, served, s3_client)

`answer` is one request through the container (its import of code/inference.py, input_handler,
TensorFlow Serving's REST predict on the SavedModel's named signature, output_handler), with the
container's environment set for the call. `play` sends each object below the request's input
prefix as one request (SplitType None, SingleRecord: the whole object is the body) with the
request's content type, under its Environment, and writes each answer to
<S3OutputPath><the object's path below the prefix>.out, encrypted with TransformOutput.KmsKeyId
(docs/aws-rules.md BT-2..BT-4); an object the handler fails on gets no answer and the play ends
Failed, as the service ends such a job. The S3 calls are SageMaker's, made as the model role:
the tests evaluate them where the launcher's request is (tests/iam/implied.py).
"""

import base64
import collections
import dataclasses
import importlib.util
import io
import json
import os
import types
from typing import Any, Dict, List, Optional, Tuple
from unittest import mock

OUT_SUFFIX = ".out"
# The container's request context, immutable (aws/sagemaker-tensorflow-serving-container,
# docker/build_artifacts/sagemaker/tfs_utils.py, Context and parse_request): a handler that
# stored state on it would fail there, so it fails here too.
Context = collections.namedtuple(
    "Context", "model_name, model_version, method, rest_uri, grpc_port, channel, "
               "custom_attributes, request_content_type, accept_header, content_length")
# What parse_request puts in it for one model without tfs-* custom attributes: TensorFlow
# Serving's REST predict of the default model (make_tfs_uri) on the container's default ports.
_REST_URI = "http://localhost:8501/v1/models/model:predict"
_GRPC_PORT = 9000


def request_context(content_type: str, custom_attributes: Optional[str] = None,
                    content_length: int = 0) -> Context:
    """The Context parse_request builds for a request: a header that was not sent is None;
    Accept defaults to JSON."""
    return Context(None, None, None, _REST_URI, _GRPC_PORT, None, custom_attributes or None,
                   content_type, "application/json", content_length)


@dataclasses.dataclass
class Served:
    handler: types.ModuleType   # <model dir>/code/inference.py, imported as the container does
    saved_model: Any            # <model dir>/1, loaded once


@dataclasses.dataclass
class Played:
    status: str                 # Completed, or Failed when an object got no answer
    answered: List[str]         # the input keys answered
    failed: Dict[str, str]      # input key -> the handler's error


def serve(model_dir: str) -> Served:
    """The model directory as the container loads it: its handler and its SavedModel."""
    import tensorflow as tf

    from maskrcnn_job.serving import export  # TensorFlow's import: not for Context alone

    spec = importlib.util.spec_from_file_location(
        "inference", os.path.join(model_dir, export.CODE_DIR, "inference.py"))
    assert spec is not None and spec.loader is not None  # a .py file always has both
    handler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handler)
    return Served(handler, tf.saved_model.load(os.path.join(model_dir, "1")))


def answer(served: Served, body: bytes, content_type: str, custom_attributes: str = "",
           environment: Optional[Dict[str, str]] = None) -> Tuple[str, str]:
    """One request through the container's path; (answer body, its content type). Raises what
    the handler raises."""
    import tensorflow as tf

    context = request_context(content_type, custom_attributes, len(body))
    with mock.patch.dict(os.environ, environment or {}):
        request = json.loads(served.handler.input_handler(io.BytesIO(body), context))
        signature = served.saved_model.signatures[request["signature_name"]]
        inputs = [base64.b64decode(i["b64"]) for i in request["instances"]]
        outputs = signature(inputs=tf.constant(inputs))
        rows = [{name: value.numpy()[i].tolist() for name, value in outputs.items()}
                for i in range(len(inputs))]
        response = types.SimpleNamespace(status_code=200,
                                         content=json.dumps({"predictions": rows}).encode())
        return served.handler.output_handler(response, context)


def _split(uri: str) -> Tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


def play(request: dict, served: Served, s3_client) -> Played:
    """The CreateTransformJob `request` played over its input prefix (module docstring)."""
    bucket, prefix = _split(request["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"])
    output = request["TransformOutput"]
    out_bucket, out_prefix = _split(output["S3OutputPath"])
    if out_prefix and not out_prefix.endswith("/"):
        out_prefix += "/"
    encryption = ({"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": output["KmsKeyId"]}
                  if output.get("KmsKeyId") else {})
    content_type = request["TransformInput"].get("ContentType", "")
    answered, failed = [], {}
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            key = item["Key"]
            body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
            try:
                text, _ = answer(served, body, content_type,
                                 environment=request.get("Environment"))
            except Exception as error:  # noqa: BLE001  (the container's 4xx/5xx: the object fails)
                failed[key] = f"{type(error).__name__}: {error}"
                continue
            s3_client.put_object(Bucket=out_bucket,
                                 Key=out_prefix + key[len(prefix):] + OUT_SUFFIX,
                                 Body=text.encode("utf-8"), **encryption)
            answered.append(key)
    return Played("Failed" if failed else "Completed", answered, failed)
