"""A local AWS for the launcher tests: moto's server on 127.0.0.1, wrapped to
- record every CreateTrainingJob request exactly as sent (moto overwrites MetricDefinitions
  when it stores a job, so reading it back would not show what the launcher sent);
- play the part of the job itself: a training job writes metric lines to its CloudWatch log
  stream and, as SageMaker uploads them, a TensorBoard event file of its loss below its
  TensorBoardOutputConfig's S3 path and its model.tar.gz (`model_archive`: the evaluation
  report beside the model); the staging job writes the dataset's files into the data
  prefix and the backbone checkpoint into the pretrained prefix;
- answer fsx:DescribeDataRepositoryAssociations, which moto lacks, from a table;
- record the serving requests as sent (CreateModel, CreateEndpointConfig, CreateEndpoint,
  RegisterScalableTarget, PutScalingPolicy), fail a named endpoint as SageMaker would
  (`fail_endpoints`) or its scalable target's registration (`fail_scaling`), and answer
  InvokeEndpoint for an existing endpoint with a canned answer in the serving handler's schema
  (recording what was sent: moto's own answer is not JSON and does not check that the endpoint
  exists). CloudWatch speaks CBOR: its requests are captured at the botocore level
  (conftest.py `captured`).
"""

import io
import logging
import json
import re
import tarfile
import threading
import time
from typing import Dict, List, Tuple

import boto3
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sagemaker.models import sagemaker_backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from maskrcnn_contract import evaluation_report, job_io
from maskrcnn_contract import metrics as job_metrics

# One line per request would bury the test output.
logging.getLogger("werkzeug").setLevel(logging.ERROR)

CREATE_TRAINING_JOB = "SageMaker.CreateTrainingJob"
DESCRIBE_DRA = "AWSSimbaAPIService_v20180301.DescribeDataRepositoryAssociations"
# Serving requests recorded as sent: {X-Amz-Target: operation name}.
SERVING_TARGETS = {
    "SageMaker.CreateModel": "CreateModel",
    "SageMaker.CreateEndpointConfig": "CreateEndpointConfig",
    "SageMaker.CreateEndpoint": "CreateEndpoint",
    "AnyScaleFrontendService.RegisterScalableTarget": "RegisterScalableTarget",
    "AnyScaleFrontendService.PutScalingPolicy": "PutScalingPolicy",
}
INVOCATIONS = re.compile(r"^/endpoints/([^/]+)/invocations$")
# What the fake endpoint answers: the serving handler's schema, one detection with its mask.
INVOCATION_ANSWER = {
    "image_size": [48, 64],
    "detections": [{"bbox": [8.0, 6.0, 20.0, 16.0], "category_id": 1, "category_name": "person",
                    "score": 0.91, "mask": [[0.9 if 4 <= c < 24 else 0.1 for c in range(28)]
                                            for _ in range(28)]}],
}

# What the fake staging job writes as a dataset's dataset_info.json (data/layout.py's DatasetInfo).
STAGED_INFO = {"num_classes": 3, "categories": [{"id": 1, "name": "bolt", "source_id": 3},
                                                {"id": 2, "name": "nut", "source_id": 17}],
               "splits": {"train": {"num_images": 8, "num_instances": 20, "shards": []},
                          "val": {"num_images": 2, "num_instances": 5, "shards": []}}}

# What the fake training job prints: real metric lines, formatted by the job's own module.
TRAINING_LOG = [
    "rank 0 on algo-1: starting",
    job_metrics.format_line("train/loss", 1.25),
    job_metrics.format_line("train/step", 100),
    job_metrics.format_line("train/loss", 0.75),
    job_metrics.format_line("train/step", 200),
    job_metrics.format_line("eval/bbox_AP", 0.377),
    job_metrics.format_line("eval/bbox_AP50", 0.59),
    job_metrics.format_line("eval/segm_AP", 0.339),
]



def _task_report(ap: float) -> dict:
    """One task's part of a report (docs/evaluation.md): what the printed table reads."""
    def best(threshold, precision, recall):
        return {"score_threshold": threshold, "f1": 2 * precision * recall / (precision + recall),
                "precision": precision, "recall": recall}

    return {"per_class": [{"id": 1, "name": "person", "AP": ap, "AP50": 0.71, "instances": 12,
                           "best_f1": best(0.62, 0.8, 0.75)},
                          {"id": 2, "name": "bicycle", "AP": None, "AP50": None, "instances": 0,
                           "best_f1": best(0.41, 0.5, 0.5)}],
            "best_f1_all_classes": best(0.55, 0.7, 0.7),
            "confusion": {"score_threshold": 0.3, "iou": 0.5,
                          "most_confused": [{"ground_truth": "person", "predicted": "bicycle",
                                             "count": 3, "share": 0.25}]}}


# A report as the job writes it beside the model, with what its table reads.
FAKE_REPORT = {"schema": evaluation_report.SCHEMA, "step": 200, "evaluator": "pycocotools 2.0.11",
               "images": 50, "detections": 140,
               "categories": [{"id": 1, "name": "person"}, {"id": 2, "name": "bicycle"}],
               "tasks": {"bbox": _task_report(0.412), "segm": _task_report(0.377)}}
# The smallest PNG (1x1, grey): the pictures' bytes only have to come back unchanged.
FAKE_PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010800000000"
                         "3a7e9b550000000a49444154789c6360000000020001e221bc33000000"
                         "0049454e44ae426082")


def model_archive(report: bool = True) -> bytes:
    """A model.tar.gz as the job writes it: the SavedModel (1/), the endpoint's code and, with
    `report`, the last evaluation's report beside it (code/evaluation/), the SavedModel's
    variables after it."""
    members = [("1/saved_model.pb", b"\0" * 4096), ("code/inference.py", b"# handler\n")]
    if report:
        folder = evaluation_report.MODEL_REPORT_DIR
        members.append((f"{folder}/{evaluation_report.REPORT_FILE}",
                        json.dumps(FAKE_REPORT).encode()))
        members += [(f"{folder}/{name}", FAKE_PNG)
                    for name in evaluation_report.picture_names(FAKE_REPORT).values()]
    members.append(("1/variables/variables.data-00000-of-00001", b"\1" * 65536))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


class FakeAws:
    def __init__(self, region: str):
        self.region = region
        self.create_training_job_requests: List[dict] = []
        self.associations: List[dict] = []
        self.serving_requests: List[Tuple[str, dict]] = []
        self.invocations: List[dict] = []
        self.fail_endpoints: Dict[str, str] = {}  # endpoint name -> FailureReason
        # Application Auto Scaling resource id -> the message RegisterScalableTarget refuses with
        self.fail_scaling: Dict[str, str] = {}
        self._lock = threading.Lock()
        self._session = boto3.session.Session(region_name=region)
        self._clients: Dict[str, object] = {}
        self._app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True,
                                   request_handler=MotoRequestHandler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._thread.join()

    def client(self, service: str):
        """The tests' own client of `service` (one per service: a new session reloads the
        service's model from JSON, a good part of a launcher test's time)."""
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self._session.client(
                    service, endpoint_url=self.endpoint, aws_access_key_id="testing",
                    aws_secret_access_key="testing")
            return self._clients[service]

    def requests_since(self, start: int) -> List[dict]:
        with self._lock:
            return list(self.create_training_job_requests[start:])

    def serving_requests_since(self, start: int) -> List[Tuple[str, dict]]:
        """(operation, request as sent) of the serving calls from index `start` on."""
        with self._lock:
            return list(self.serving_requests[start:])

    def sagemaker_backend(self):
        return sagemaker_backends[DEFAULT_ACCOUNT_ID][self.region]

    # --- WSGI --------------------------------------------------------------------------------

    def _wsgi(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        invocation = INVOCATIONS.match(environ.get("PATH_INFO", ""))
        if invocation and environ.get("REQUEST_METHOD") == "POST":
            return self._invoke(environ, start_response, invocation.group(1))
        if target not in (CREATE_TRAINING_JOB, DESCRIBE_DRA, *SERVING_TARGETS):
            return self._app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        params = json.loads(body or b"{}")
        if target == DESCRIBE_DRA:
            return self._describe_associations(params, start_response)
        if target in SERVING_TARGETS:
            with self._lock:
                self.serving_requests.append((SERVING_TARGETS[target], params))
            refusal = self.fail_scaling.get(params.get("ResourceId"))
            if target.endswith(".RegisterScalableTarget") and refusal:
                start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.1"),
                                                   ("x-amzn-ErrorType", "ValidationException")])
                return [json.dumps({"__type": "ValidationException",
                                    "message": refusal}).encode()]
            environ["wsgi.input"] = io.BytesIO(body)
            response = list(self._app(environ, start_response))
            reason = self.fail_endpoints.get(params.get("EndpointName"))
            if target == "SageMaker.CreateEndpoint" and reason:
                endpoint = self.sagemaker_backend().endpoints[params["EndpointName"]]
                endpoint.endpoint_status, endpoint.failure_reason = "Failed", reason
            return response
        environ["wsgi.input"] = io.BytesIO(body)
        response = list(self._app(environ, start_response))
        with self._lock:
            self.create_training_job_requests.append(params)
        self._run_job(params)
        return response

    def _invoke(self, environ, start_response, name: str):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        with self._lock:
            self.invocations.append({
                "EndpointName": name, "ContentType": environ.get("CONTENT_TYPE"),
                "Accept": environ.get("HTTP_ACCEPT"),
                "CustomAttributes": environ.get("HTTP_X_AMZN_SAGEMAKER_CUSTOM_ATTRIBUTES"),
                "Body": body})
        if name not in self.sagemaker_backend().endpoints:
            start_response("400 Bad Request", [("Content-Type", "application/json"),
                                               ("x-amzn-ErrorType", "ValidationError")])
            return [json.dumps({"message": f"Endpoint {name} of account {DEFAULT_ACCOUNT_ID} "
                                           "not found."}).encode()]
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(INVOCATION_ANSWER).encode()]

    def _describe_associations(self, params, start_response):
        wanted = {v for f in params.get("Filters", []) if f["Name"] == "file-system-id"
                  for v in f["Values"]}
        found = [a for a in self.associations if not wanted or a["FileSystemId"] in wanted]
        start_response("200 OK", [("Content-Type", "application/x-amz-json-1.1")])
        return [json.dumps({"Associations": found}).encode()]

    def _run_job(self, params: Dict) -> None:
        name = params["TrainingJobName"]
        hps = params.get("HyperParameters", {})
        if (params.get("Environment") or {}).get(job_io.PROGRAM_ENV) == job_io.STAGING_PROGRAM:
            bucket, _, prefix = hps[job_io.STAGING_S3_URI][len("s3://"):].partition("/")
            s3 = self.client("s3")
            s3.put_object(Bucket=bucket, Key=prefix + "tfrecords/train-00000-of-00001.tfrecord",
                          Body=b"records")
            s3.put_object(Bucket=bucket, Key=prefix + job_io.DATASET_COMPLETE_MARKER,
                          Body=json.dumps(STAGED_INFO).encode())
            if job_io.STAGING_PRETRAINED_S3_URI not in hps:
                return
            bucket, _, prefix = hps[job_io.STAGING_PRETRAINED_S3_URI][len("s3://"):].partition("/")
            for backbone in hps[job_io.STAGING_BACKBONES].split(","):
                for name in ("ckpt-28080.data-00000-of-00001", "ckpt-28080.index",
                             job_io.PRETRAINED_COMPLETE_MARKER):
                    s3.put_object(Bucket=bucket, Key=f"{prefix}{backbone}/{name}", Body=b"{}")
            return
        tensorboard = params.get("TensorBoardOutputConfig")
        if tensorboard:
            self._upload_summaries(name, tensorboard["S3OutputPath"])
        model = self.sagemaker_backend().training_jobs[name].model_artifacts["S3ModelArtifacts"]
        bucket, _, key = model[len("s3://"):].partition("/")
        self.client("s3").put_object(Bucket=bucket, Key=key, Body=model_archive())
        logs = self.client("logs")
        group = "/aws/sagemaker/TrainingJobs"
        try:
            logs.create_log_group(logGroupName=group)
        except logs.exceptions.ResourceAlreadyExistsException:
            pass
        stream = f"{name}/algo-1-1700000000"
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        now_ms = int(time.time() * 1000)  # CloudWatch drops events older than 14 days
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
            {"timestamp": now_ms + i, "message": line}
            for i, line in enumerate(TRAINING_LOG)])

    def _upload_summaries(self, job: str, s3_output_path: str) -> None:
        """What SageMaker uploads of a running job's TensorBoardOutputConfig LocalPath: an event
        file of the job's train/loss, below <S3OutputPath><job>/tensorboard-output/ (TRN-2)."""
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        out = io.BytesIO()
        writer = RecordWriter(out)
        losses = [job_metrics.last_values(line) for line in TRAINING_LOG]
        steps = [v["train/step"] for v in losses if "train/step" in v]
        values = [v["train/loss"] for v in losses if "train/loss" in v]
        for step, value in zip(steps, values):
            writer.write(event_pb2.Event(wall_time=1700000000.0 + step, step=int(step),
                                         summary=summary_pb2.Summary(value=[
                                             summary_pb2.Summary.Value(tag="train/loss",
                                                                       simple_value=value)])
                                         ).SerializeToString())
        bucket, _, prefix = s3_output_path[len("s3://"):].partition("/")
        self.client("s3").put_object(
            Bucket=bucket, Body=out.getvalue(),
            Key=f"{prefix}{job}/tensorboard-output/events.out.tfevents.1700000000.algo-1")
