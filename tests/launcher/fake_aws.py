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
  (conftest.py `captured`);
- keep managed warm pools, which moto lacks (docs/aws-rules.md TRN-3, TRN-4): a training job
  created with ResourceConfig KeepAlivePeriodInSeconds above 0 keeps a pool `Available` from its
  end (moto's jobs end when created) for that long, then `Terminated`; a later job of the same
  shape (role, instance type and count, volume size and key, VPC, the two Enable* flags) takes it
  over (`Reused` by that job); DescribeTrainingJob and ListTrainingJobs report `WarmPoolStatus`,
  ListTrainingJobs filters by `WarmPoolStatusEquals`; UpdateTrainingJob changes a pool's
  keep-alive, 0 ending it, and is recorded as sent. No kinder than SageMaker: CreateTrainingJob
  is refused with a keep-alive above SERVICE_MAX_KEEP_ALIVE_SECONDS or with spot, and
  UpdateTrainingJob for a job that does not exist, has not finished, was created without a warm
  pool or whose pool is no longer `Available`, for a keep-alive outside 0..3600, and for any other
  field (the fake answers warm-pool updates only). Not modelled: the warm-pool quota (0 by
  default: no pool at all), a pool's 28 days, patch updates (a pool may end early).
"""

import dataclasses
import datetime
import io
import logging
import json
import re
import tarfile
import threading
import time
from typing import Dict, List, Optional, Tuple

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
DESCRIBE_TRAINING_JOB = "SageMaker.DescribeTrainingJob"
LIST_TRAINING_JOBS = "SageMaker.ListTrainingJobs"
UPDATE_TRAINING_JOB = "SageMaker.UpdateTrainingJob"
WARM_POOL_TARGETS = (DESCRIBE_TRAINING_JOB, LIST_TRAINING_JOBS, UPDATE_TRAINING_JOB)
# WarmPoolStatus Status (SageMaker API reference, WarmPoolStatus; botocore's enum).
WARM_POOL_STATUSES = ("Available", "Terminated", "Reused", "InUse")
# The longest keep-alive the fake SageMaker accepts: the lower of the documented limits (the
# developer guide's 3600 s; botocore's model says 21600), docs/aws-rules.md TRN-3.
SERVICE_MAX_KEEP_ALIVE_SECONDS = 3600
FINISHED_STATUSES = ("Completed", "Failed", "Stopped")
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
# Enough training images for the default schedule (12 epochs, warmup_steps=500) on the launches'
# 2 x 8 GPUs: the launcher refuses a warmup longer than the run (plan.run_length_notes).
STAGED_INFO = {"num_classes": 3, "categories": [{"id": 1, "name": "bolt", "source_id": 3},
                                                {"id": 2, "name": "nut", "source_id": 17}],
               "splits": {"train": {"num_images": 4000, "num_instances": 9000, "shards": []},
                          "val": {"num_images": 500, "num_instances": 1100, "shards": []}}}

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


def _shape(params: Dict) -> tuple:
    """What a training job must share with a warm pool's job to start on it (SageMaker developer
    guide, "SageMaker AI Managed Warm Pools", "Matching training jobs")."""
    resources, vpc = params.get("ResourceConfig", {}), params.get("VpcConfig") or {}
    return (params.get("RoleArn"), resources.get("InstanceType"), resources.get("InstanceCount"),
            resources.get("VolumeSizeInGB"), resources.get("VolumeKmsKeyId"),
            tuple(sorted(vpc.get("SecurityGroupIds", []))), tuple(sorted(vpc.get("Subnets", []))),
            bool(params.get("EnableInterContainerTrafficEncryption")),
            bool(params.get("EnableNetworkIsolation")))


@dataclasses.dataclass
class WarmPool:
    """A training job's managed warm pool, from the end of the job (SageMaker developer guide,
    "Warm pool lifecycle")."""

    job: str
    keep: int                        # KeepAlivePeriodInSeconds
    shape: tuple
    started: float                   # when the job ended and the pool began (time.time())
    status: str = "Available"
    ended: Optional[float] = None    # when it was reused, released or expired
    reused_by: Optional[str] = None

    def state(self, now: float) -> str:
        if self.status == "Available" and now >= self.started + self.keep:
            self.status, self.ended = "Terminated", self.started + self.keep
        return self.status

    def answer(self, now: float) -> dict:
        """Its WarmPoolStatus as DescribeTrainingJob and ListTrainingJobs report it."""
        answer = {"Status": self.state(now)}
        if self.ended is not None:
            answer["ResourceRetainedBillableTimeInSeconds"] = int(self.ended - self.started)
        if self.reused_by:
            answer["ReusedByJob"] = self.reused_by
        return answer


class FakeAws:
    def __init__(self, region: str):
        self.region = region
        self.create_training_job_requests: List[dict] = []
        # UpdateTrainingJob requests as sent, and the warm pools by job name.
        self.update_training_job_requests: List[dict] = []
        self.warm_pools: Dict[str, WarmPool] = {}
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

    def updates_since(self, start: int) -> List[dict]:
        """The UpdateTrainingJob requests as sent from index `start` on."""
        with self._lock:
            return list(self.update_training_job_requests[start:])

    def backdate(self, job_name: str, seconds: float) -> None:
        """Moves a job's times, and its warm pool's start, `seconds` into the past: a pool kept for
        that long already (and ended, if that is more than its keep-alive)."""
        job = self.sagemaker_backend().training_jobs[job_name]
        delta = datetime.timedelta(seconds=seconds)
        for attribute in ("creation_time", "last_modified_time", "training_start_time",
                          "training_end_time"):
            setattr(job, attribute, getattr(job, attribute) - delta)
        with self._lock:
            if job_name in self.warm_pools:
                self.warm_pools[job_name].started -= seconds

    # --- WSGI --------------------------------------------------------------------------------

    def _wsgi(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        invocation = INVOCATIONS.match(environ.get("PATH_INFO", ""))
        if invocation and environ.get("REQUEST_METHOD") == "POST":
            return self._invoke(environ, start_response, invocation.group(1))
        if target not in (CREATE_TRAINING_JOB, DESCRIBE_DRA, *SERVING_TARGETS,
                          *WARM_POOL_TARGETS):
            return self._app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        params = json.loads(body or b"{}")
        if target == DESCRIBE_DRA:
            return self._describe_associations(params, start_response)
        if target in WARM_POOL_TARGETS:
            return self._warm_pool_call(target, environ, body, params, start_response)
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
        refusal = self._warm_pool_refusal(params)
        if refusal:
            return _json_answer(start_response, "400 Bad Request", *refusal)
        environ["wsgi.input"] = io.BytesIO(body)
        response = list(self._app(environ, start_response))
        with self._lock:
            self.create_training_job_requests.append(params)
        if params["TrainingJobName"] in self.sagemaker_backend().training_jobs:
            self._keep_warm_pool(params["TrainingJobName"], params)
        self._run_job(params)
        return response

    # --- managed warm pools -------------------------------------------------------------------

    @staticmethod
    def _warm_pool_refusal(params: Dict) -> Optional[Tuple[str, str]]:
        """(error code, message) SageMaker would refuse a CreateTrainingJob's keep-alive with."""
        keep = params.get("ResourceConfig", {}).get("KeepAlivePeriodInSeconds")
        if keep is None:
            return None
        if not isinstance(keep, int) or not 0 <= keep <= SERVICE_MAX_KEEP_ALIVE_SECONDS:
            return ("ValidationException", f"KeepAlivePeriodInSeconds {keep!r}: must be 0 to "
                    f"{SERVICE_MAX_KEEP_ALIVE_SECONDS}")
        if keep and params.get("EnableManagedSpotTraining"):
            return ("ValidationException", "Warm pools are not supported with managed spot "
                    "training (KeepAlivePeriodInSeconds with EnableManagedSpotTraining)")
        return None

    def _keep_warm_pool(self, name: str, params: Dict) -> None:
        """The job takes over an Available pool of its shape, then (moto's jobs end when created)
        keeps its own for its keep-alive."""
        now, shape = time.time(), _shape(params)
        keep = params.get("ResourceConfig", {}).get("KeepAlivePeriodInSeconds") or 0
        backend = self.sagemaker_backend()
        with self._lock:
            reused = next((pool for pool in self.warm_pools.values()
                           if pool.shape == shape and pool.job != name
                           and self._pool_of(backend.training_jobs[pool.job]) is pool
                           and pool.state(now) == "Available"), None)
            if reused:
                reused.status, reused.ended, reused.reused_by = "Reused", now, name
            if keep or reused:
                self.warm_pools[name] = WarmPool(name, keep, shape, started=now)

    def _pool_of(self, job) -> Optional[WarmPool]:
        """A finished job's pool (a running job's pool starts when the job ends)."""
        if job.training_job_status not in FINISHED_STATUSES:
            return None
        return self.warm_pools.get(job.training_job_name)

    def _warm_pool_call(self, target: str, environ, body: bytes, params: Dict, start_response):
        backend, now = self.sagemaker_backend(), time.time()
        if target == UPDATE_TRAINING_JOB:
            return self._update_training_job(params, start_response)
        wanted = params.pop("WarmPoolStatusEquals", None)
        if wanted is not None and wanted not in WARM_POOL_STATUSES:
            return _json_answer(start_response, "400 Bad Request", "ValidationException",
                                f"1 validation error detected: Value '{wanted}' at "
                                "'warmPoolStatusEquals' failed to satisfy constraint: Member must "
                                f"satisfy enum value set: [{', '.join(WARM_POOL_STATUSES)}]")
        status, headers, data = self._moto(environ, json.dumps(params).encode())
        if not status.startswith("200"):  # moto's refusal as it is
            start_response(status, headers)
            return [data]
        answer = json.loads(data)
        with self._lock:
            if target == DESCRIBE_TRAINING_JOB:
                pool = self._pool_of(backend.training_jobs[answer["TrainingJobName"]])
                if pool:
                    answer["WarmPoolStatus"] = pool.answer(now)
            else:
                summaries = []
                for summary in answer["TrainingJobSummaries"]:
                    pool = self._pool_of(backend.training_jobs[summary["TrainingJobName"]])
                    if pool:
                        summary["WarmPoolStatus"] = pool.answer(now)
                    if wanted is None or (pool and pool.state(now) == wanted):
                        summaries.append(summary)
                answer["TrainingJobSummaries"] = summaries
        return _json_answer(start_response, status, answer=answer)

    def _update_training_job(self, params: Dict, start_response):
        """UpdateTrainingJob of a warm pool's keep-alive, refused as SageMaker would (the error
        codes are the API reference's; the messages are the fake's own)."""
        name = params.get("TrainingJobName")
        job = self.sagemaker_backend().training_jobs.get(name)
        keep = (params.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds")
        now = time.time()
        with self._lock:
            pool = self._pool_of(job) if job else None
            problem = None
            if job is None:
                problem = ("ResourceNotFound", f"Training job {name} does not exist.")
            elif set(params) != {"TrainingJobName", "ResourceConfig"}:
                problem = ("ValidationException", "the fake SageMaker answers warm-pool updates "
                           "(ResourceConfig KeepAlivePeriodInSeconds) only")
            elif not isinstance(keep, int) or not 0 <= keep <= SERVICE_MAX_KEEP_ALIVE_SECONDS:
                problem = ("ValidationException", f"KeepAlivePeriodInSeconds {keep!r}: must be 0 "
                           f"to {SERVICE_MAX_KEEP_ALIVE_SECONDS}")
            elif job.training_job_status not in FINISHED_STATUSES:
                problem = ("ValidationException", f"Training job {name} is "
                           f"{job.training_job_status}: its warm pool can be updated once the job "
                           "has finished")
            elif name not in self.warm_pools:
                problem = ("ValidationException", f"Training job {name} has no warm pool: it was "
                           "created without KeepAlivePeriodInSeconds")
            elif pool.state(now) != "Available":
                problem = ("ValidationException", f"The warm pool of training job {name} is "
                           f"{pool.status}, not Available")
            if problem:
                return _json_answer(start_response, "400 Bad Request", *problem)
            self.update_training_job_requests.append(params)
            if keep == 0:
                pool.status, pool.ended = "Terminated", now
            else:  # counted from the job's end, as at creation
                pool.keep = keep
        return _json_answer(start_response, "200 OK", answer={"TrainingJobArn": job.arn})

    def _moto(self, environ, body: bytes) -> Tuple[str, list, bytes]:
        """moto's answer to the request with `body`: HTTP status, headers, body."""
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        captured = {}

        def keep(status, headers, exc_info=None):
            captured.update(status=status, headers=headers)
            return lambda data: None

        data = b"".join(self._app(environ, keep))
        return captured["status"], captured["headers"], data

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


def _json_answer(start_response, status: str, code: str = None, message: str = None,
                 answer: dict = None):
    """A JSON 1.1 answer: `answer`, or the error `code` with `message`."""
    headers = [("Content-Type", "application/x-amz-json-1.1")]
    if code:
        headers.append(("x-amzn-ErrorType", code))
        answer = {"__type": code, "message": message}
    data = json.dumps(answer, default=str).encode()
    start_response(status, headers + [("Content-Length", str(len(data)))])
    return [data]
