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
  default: no pool at all), a pool's 28 days, patch updates (a pool may end early);
- answer a finished training job's DescribeTrainingJob with what SageMaker computes and moto
  lacks or cans: FinalMetricDataList (the last value of each of the request's MetricDefinitions
  in the job's CloudWatch log, docs/aws-rules.md TRN-6), TrainingTimeInSeconds and
  BillableTimeInSeconds (`ran_for` sets a job's times and a spot job's billable seconds);
- play a hyperparameter tuning job, which moto only stores (its best job is a constant): a
  CreateHyperParameterTuningJob request is held to every constraint of botocore's model
  (tests/launcher/service_model.py: name pattern and length, enums, maximums) and to the rules the
  model does not hold (docs/aws-rules.md TUN-2, TUN-4: parallel jobs within max jobs, the
  objective one of the MetricDefinitions, Logarithmic ranges above 0), recorded as sent, then
  candidates are derived from it as SageMaker derives them (the launcher's
  `tuning.candidate_request`, TUN-3): the first at every range's minimum, the second at its
  maximum, the third in its middle (as many as MaxNumberOfTrainingJobs allows, at most 3), each
  a training job that ends at once with its log, model and objective value
  (TUNING_OBJECTIVE_VALUES); DescribeHyperParameterTuningJob names the best of them and
  ListTrainingJobsForHyperParameterTuningJob lists them;
- hold the model registry to SageMaker's rules where moto does not (docs/aws-rules.md REG-1,
  REG-4): CreateModelPackage and UpdateModelPackage to botocore's model (service_model.py:
  patterns, maximums, enums such as the instance types), CreateModelPackage into a group with
  Tags refused (a version takes its group's), CreateModel from a model package version that is
  not Approved (or does not exist) refused, and ListModelPackages answering only
  ModelPackageSummary's fields (moto answers whole packages: code reading a version's metrics
  from a summary would pass here and fail on AWS). Not modelled: the validation that takes a new
  version through InProgress to Completed (moto's are Completed at once).
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
from moto.logs.models import logs_backends
from moto.s3.models import s3_backends
from moto.sagemaker.models import sagemaker_backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from maskrcnn_contract import evaluation_report, job_io
from maskrcnn_contract import metrics as job_metrics

from tests.launcher import service_model

# One line per request would bury the test output.
logging.getLogger("werkzeug").setLevel(logging.ERROR)

CREATE_TRAINING_JOB = "SageMaker.CreateTrainingJob"
CREATE_TUNING_JOB = "SageMaker.CreateHyperParameterTuningJob"
LIST_CANDIDATES = "SageMaker.ListTrainingJobsForHyperParameterTuningJob"
# The objective each played candidate reports, in the order they are derived (the third is best
# when maximizing, the second when minimizing).
TUNING_OBJECTIVE_VALUES = (0.21, 0.18, 0.24)
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
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
DESCRIBE_DRA = "AWSSimbaAPIService_v20180301.DescribeDataRepositoryAssociations"
CREATE_MODEL_PACKAGE = "SageMaker.CreateModelPackage"
UPDATE_MODEL_PACKAGE = "SageMaker.UpdateModelPackage"
LIST_MODEL_PACKAGES = "SageMaker.ListModelPackages"
REGISTRY_TARGETS = (CREATE_MODEL_PACKAGE, UPDATE_MODEL_PACKAGE, LIST_MODEL_PACKAGES)
CREATE_TRANSFORM_JOB = "SageMaker.CreateTransformJob"
# CreateTransformJob: MaxPayloadInMB at most 100, and MaxConcurrentTransforms x MaxPayloadInMB
# too (docs/aws-rules.md BT-2).
MAX_TRANSFORM_PAYLOAD_MB = 100
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

def default_transform_answer(key: str, data: bytes) -> Optional[dict]:
    """The played transform's answer for an image: INVOCATION_ANSWER's detection at the image's
    size (read with Pillow); None (a failure) for what Pillow cannot read, as the handler fails
    on it."""
    from PIL import Image

    try:
        width, height = Image.open(io.BytesIO(data)).size
    except OSError:
        return None
    return dict(INVOCATION_ANSWER, image_size=[height, width])


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

    return {"summary": {"AP": ap, "AP50": 0.71},
            "per_class": [{"id": 1, "name": "person", "AP": ap, "AP50": 0.71, "instances": 12,
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
               "categories": [{"id": 1, "source_id": 1, "name": "person"},
                              {"id": 2, "source_id": 2, "name": "bicycle"}],
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


class _Dispatcher(DomainDispatcherApplication):
    """moto's dispatcher, the backend of each host looked up once: moto's own lookup lists its
    package's ~175 folders for every request (~3 s of CPU a run of the launcher tests)."""

    def __init__(self, create_app):
        super().__init__(create_app)
        self._backends: Dict[Optional[str], object] = {}

    def get_backend_for_host(self, host):
        if host not in self._backends:
            self._backends[host] = super().get_backend_for_host(host)
        return self._backends[host]


class FakeAws:
    def __init__(self, region: str, play_transforms: bool = True):
        """`play_transforms`: False leaves a transform job as moto keeps it (Completed, nothing
        written): tests/training plays it with the trained model (maskrcnn_local/batch_transform.py)."""
        self.region = region
        self.play_transforms = play_transforms
        self.create_training_job_requests: List[dict] = []
        # CreateHyperParameterTuningJob requests as sent, and each tuning job's candidates.
        self.create_tuning_job_requests: List[dict] = []
        self.tuning_candidates: Dict[str, List[dict]] = {}
        # UpdateTrainingJob requests as sent, and the warm pools by job name.
        self.update_training_job_requests: List[dict] = []
        self.warm_pools: Dict[str, WarmPool] = {}
        # A spot job's BillableTimeInSeconds, by job name (otherwise its training time).
        self.billable_seconds: Dict[str, int] = {}
        self.associations: List[dict] = []
        self.serving_requests: List[Tuple[str, dict]] = []
        self.invocations: List[dict] = []
        self.fail_endpoints: Dict[str, str] = {}  # endpoint name -> FailureReason
        # Application Auto Scaling resource id -> the message RegisterScalableTarget refuses with
        self.fail_scaling: Dict[str, str] = {}
        # CreateTransformJob requests as sent; what the played transform answers for an image:
        # (key, bytes) -> the handler's JSON answer, or None for an image it fails on.
        self.create_transform_job_requests: List[dict] = []
        self.transform_answer = default_transform_answer
        self._lock = threading.Lock()
        self._session = boto3.session.Session(region_name=region)
        self._clients: Dict[str, object] = {}
        self._app = _Dispatcher(create_backend_app)
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

    @staticmethod
    def stored_object(bucket: str, key: str) -> Optional[bytes]:
        """The object's bytes as moto stores them (None if there is none), read without a
        request: for the tests' own set-up."""
        stored = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_object(bucket, key)
        return None if stored is None else stored.value

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

    def ran_for(self, job_name: str, seconds: float, billable: Optional[int] = None) -> None:
        """The job started training `seconds` before it ended (moto's jobs end when created);
        with `billable`, SageMaker billed that many seconds (a spot job's saving)."""
        job = self.sagemaker_backend().training_jobs[job_name]
        job.training_start_time = job.training_end_time - datetime.timedelta(seconds=seconds)
        job.creation_time = min(job.creation_time, job.training_start_time)
        if billable is not None:
            with self._lock:
                self.billable_seconds[job_name] = billable

    # --- WSGI --------------------------------------------------------------------------------

    def _wsgi(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        invocation = INVOCATIONS.match(environ.get("PATH_INFO", ""))
        if invocation and environ.get("REQUEST_METHOD") == "POST":
            return self._invoke(environ, start_response, invocation.group(1))
        if target not in (CREATE_TRAINING_JOB, DESCRIBE_DRA, *SERVING_TARGETS,
                          *WARM_POOL_TARGETS, CREATE_TUNING_JOB, LIST_CANDIDATES,
                          *REGISTRY_TARGETS, CREATE_TRANSFORM_JOB):
            return self._app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        params = json.loads(body or b"{}")
        if target == CREATE_TRANSFORM_JOB:
            return self._create_transform_job(environ, body, params, start_response)
        if target == CREATE_TUNING_JOB:
            return self._create_tuning_job(environ, body, params, start_response)
        if target == LIST_CANDIDATES:
            with self._lock:
                found = self.tuning_candidates.get(params.get("HyperParameterTuningJobName"))
            if found is None:
                return _json_answer(start_response, "400 Bad Request", "ResourceNotFound",
                                    "Amazon SageMaker can't find a tuning job with name "
                                    f"{params.get('HyperParameterTuningJobName')}")
            return _json_answer(start_response, "200 OK",
                                answer={"TrainingJobSummaries": found})
        if target == DESCRIBE_DRA:
            return self._describe_associations(params, start_response)
        if target in WARM_POOL_TARGETS:
            return self._warm_pool_call(target, environ, body, params, start_response)
        if target in REGISTRY_TARGETS:
            return self._registry_call(target, environ, body, params, start_response)
        if target in SERVING_TARGETS:
            with self._lock:
                self.serving_requests.append((SERVING_TARGETS[target], params))
            refusal = self.fail_scaling.get(params.get("ResourceId"))
            if target.endswith(".RegisterScalableTarget") and refusal:
                start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.1"),
                                                   ("x-amzn-ErrorType", "ValidationException")])
                return [json.dumps({"__type": "ValidationException",
                                    "message": refusal}).encode()]
            unapproved = self._unapproved_package(params) \
                if target == "SageMaker.CreateModel" else None
            if unapproved:
                return _json_answer(start_response, "400 Bad Request", "ValidationException",
                                    unapproved)
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

    # --- batch transform ---------------------------------------------------------------------

    def _transform_refusal(self, params: Dict) -> List[str]:
        """What SageMaker refuses of a CreateTransformJob: botocore's model, the payload limits
        (BT-2) and a model that does not exist."""
        found = service_model.problems("sagemaker", "CreateTransformJob", params)
        payload = params.get("MaxPayloadInMB", 6)
        if payload > MAX_TRANSFORM_PAYLOAD_MB:
            found.append(f"MaxPayloadInMB {payload} is above {MAX_TRANSFORM_PAYLOAD_MB}")
        if params.get("MaxConcurrentTransforms", 1) * payload > MAX_TRANSFORM_PAYLOAD_MB:
            found.append("MaxConcurrentTransforms x MaxPayloadInMB is above "
                         f"{MAX_TRANSFORM_PAYLOAD_MB}")
        if params.get("ModelName") not in self.sagemaker_backend()._models:
            found.append(f"Could not find model {params.get('ModelName')}")
        return found

    def _create_transform_job(self, environ, body: bytes, params: Dict, start_response):
        return self._created_as_checked(
            environ, body, params, start_response, self._transform_refusal(params),
            self.create_transform_job_requests,
            self._play_transform_job if self.play_transforms else None)

    def _play_transform_job(self, params: Dict) -> None:
        """What the transform writes (BT-3): for each object below the input prefix, the
        answer `transform_answer` gives as <output path><its path below the prefix>.out, with the
        output key; none for an image it fails on, and the job then ends Failed."""
        s3 = self.client("s3")
        source = params["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"]
        bucket, _, prefix = source[len("s3://"):].partition("/")
        out_bucket, _, out_prefix = params["TransformOutput"]["S3OutputPath"][len("s3://"):] \
            .partition("/")
        out_prefix = out_prefix if not out_prefix or out_prefix.endswith("/") else out_prefix + "/"
        key_id = params["TransformOutput"].get("KmsKeyId")
        failed = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                data = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                answer = self.transform_answer(item["Key"], data)
                if answer is None:
                    failed.append(item["Key"])
                    continue
                extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": key_id} if key_id else {}
                s3.put_object(Bucket=out_bucket,
                              Key=out_prefix + item["Key"][len(prefix):] + ".out",
                              Body=json.dumps(answer).encode(), **extra)
        if failed:
            job = self.sagemaker_backend().transform_jobs[params["TransformJobName"]]
            job.transform_job_status = "Failed"
            job.failure_reason = (f"ClientError: See job logs for more information "
                                  f"({len(failed)} object(s) failed)")

    # --- hyperparameter tuning -----------------------------------------------------------------

    @staticmethod
    def _tuning_refusal(params: Dict) -> List[str]:
        """What SageMaker refuses of a CreateHyperParameterTuningJob: botocore's model, and the
        documented rules the model does not hold (docs/aws-rules.md TUN-2, TUN-4)."""
        found = service_model.problems("sagemaker", "CreateHyperParameterTuningJob", params)
        if found:
            return found
        config, definition = params["HyperParameterTuningJobConfig"], params["TrainingJobDefinition"]
        limits = config["ResourceLimits"]
        if limits["MaxParallelTrainingJobs"] > limits.get("MaxNumberOfTrainingJobs", 1):
            found.append("MaxParallelTrainingJobs must not exceed MaxNumberOfTrainingJobs")
        objective = config["HyperParameterTuningJobObjective"]["MetricName"]
        defined = [d["Name"] for d in definition["AlgorithmSpecification"].get("MetricDefinitions", [])]
        if objective not in defined:
            found.append(f"The objective metric {objective} is not defined in MetricDefinitions")
        for key in ("IntegerParameterRanges", "ContinuousParameterRanges"):
            for item in config.get("ParameterRanges", {}).get(key, []):
                if item.get("ScalingType") == "Logarithmic" and float(item["MinValue"]) <= 0:
                    found.append(f"{item['Name']}: Logarithmic scaling needs values above 0")
        return found

    def _create_tuning_job(self, environ, body: bytes, params: Dict, start_response):
        return self._created_as_checked(environ, body, params, start_response,
                                        self._tuning_refusal(params),
                                        self.create_tuning_job_requests, self._play_tuning_job)

    def _created_as_checked(self, environ, body: bytes, params: Dict, start_response,
                            refusal: List[str], sent: List[dict], play) -> list:
        """A Create call SageMaker refuses with `refusal` answered as it does (nothing stored);
        else moto's answer, the request recorded in `sent` and `play` (if any) run on it."""
        if refusal:
            return _json_answer(start_response, "400 Bad Request", "ValidationException",
                                "; ".join(refusal))
        environ["wsgi.input"] = io.BytesIO(body)
        response = list(self._app(environ, start_response))
        with self._lock:
            sent.append(params)
        if play:
            play(params)
        return response

    def _play_tuning_job(self, params: Dict) -> None:
        """The candidates SageMaker would start, derived by the launcher's own rule (TUN-3), each
        ended at once with its objective; the moto tuning job then names the best."""
        from maskrcnn_launcher.training import tuning

        name = params["HyperParameterTuningJobName"]
        config = params["HyperParameterTuningJobConfig"]
        objective = config["HyperParameterTuningJobObjective"]
        count = min(config["ResourceLimits"].get("MaxNumberOfTrainingJobs", 1), 3)
        backend = self.sagemaker_backend()
        summaries = []
        for number in range(1, count + 1):
            values = _candidate_values(config["ParameterRanges"], number)
            request = tuning.candidate_request(params, values, number)
            value = TUNING_OBJECTIVE_VALUES[number - 1]
            job = backend.create_training_job(
                training_job_name=request["TrainingJobName"],
                hyper_parameters=request["HyperParameters"],
                algorithm_specification=dict(request["AlgorithmSpecification"]),
                role_arn=request["RoleArn"], input_data_config=request["InputDataConfig"],
                output_data_config=request["OutputDataConfig"],
                resource_config=request["ResourceConfig"], vpc_config=request.get("VpcConfig"),
                stopping_condition=request["StoppingCondition"], tags=[],
                enable_network_isolation=False, enable_inter_container_traffic_encryption=False,
                enable_managed_spot_training=bool(request.get("EnableManagedSpotTraining")),
                checkpoint_config=request.get("CheckpointConfig"), debug_hook_config=None,
                debug_rule_configurations=None, tensor_board_output_config=None,
                experiment_config=None)
            job.final_metric_data_list = [{"MetricName": objective["MetricName"], "Value": value,
                                           "Timestamp": job.creation_time}]
            self._run_job(request, extra_log=[job_metrics.format_line(objective["MetricName"],
                                                                       value)])
            summaries.append({
                "TrainingJobName": job.training_job_name, "TrainingJobArn": job.arn,
                "TuningJobName": name, "CreationTime": job.creation_time.timestamp() + number,
                "TrainingStartTime": job.training_start_time.timestamp(),
                "TrainingEndTime": job.training_end_time.timestamp(),
                "TrainingJobStatus": "Completed", "TunedHyperParameters": values,
                "FinalHyperParameterTuningJobObjectiveMetric": {
                    "Type": objective["Type"], "MetricName": objective["MetricName"],
                    "Value": value},
                "ObjectiveStatus": "Succeeded"})
        pick = max if objective["Type"] == "Maximize" else min
        best = pick(summaries, key=lambda s: s["FinalHyperParameterTuningJobObjectiveMetric"]["Value"])
        stored = backend.hyper_parameter_tuning_jobs[name]
        stored.best_training_job = stored.OverallBestTrainingJob = {
            **best, **{key: datetime.datetime.fromtimestamp(best[key], datetime.timezone.utc)
                       for key in ("CreationTime", "TrainingStartTime", "TrainingEndTime")}}
        stored.training_job_status_counters = {"Completed": count, "InProgress": 0,
                                               "RetryableError": 0, "NonRetryableError": 0,
                                               "Stopped": 0}
        stored.objective_status_counters = {"Succeeded": count, "Pending": 0, "Failed": 0}
        with self._lock:
            self.tuning_candidates[name] = summaries

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
        if target == DESCRIBE_TRAINING_JOB:
            answer.update(self._job_figures(backend.training_jobs[answer["TrainingJobName"]]))
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

    def _job_figures(self, job) -> dict:
        """What SageMaker adds to a finished job's DescribeTrainingJob and moto lacks or fakes:
        FinalMetricDataList, the last value each of the request's MetricDefinitions (moto keeps
        a canned one) found in the job's CloudWatch log, with the line's time (moto answers a
        canned train:progress); TrainingTimeInSeconds and BillableTimeInSeconds (at least 1,
        botocore's model), from the job's start and end, the billable time `billable_seconds`
        sets (a spot job's). A job no CreateTrainingJob request created (a tuning candidate, which
        the fake gives its objective itself) keeps its FinalMetricDataList."""
        if job.training_job_status not in FINISHED_STATUSES:
            return {}
        name = job.training_job_name
        with self._lock:
            sent = [r for r in self.create_training_job_requests if r["TrainingJobName"] == name]
            billable = self.billable_seconds.get(name)
        seconds = max(1, int((job.training_end_time - job.training_start_time).total_seconds()))
        figures = {"TrainingTimeInSeconds": seconds,
                   "BillableTimeInSeconds": seconds if billable is None else billable}
        if not sent:
            return figures
        definitions = sent[-1]["AlgorithmSpecification"].get("MetricDefinitions", [])
        last = {}
        for event in self._log_events(name):
            for definition in definitions:
                found = re.search(definition["Regex"], event.message)
                if found and event.timestamp >= last.get(definition["Name"], (0,))[0]:
                    last[definition["Name"]] = (event.timestamp, float(found.group(1)))
        return dict(figures, FinalMetricDataList=[
            {"MetricName": metric, "Value": value, "Timestamp": stamp / 1000}
            for metric, (stamp, value) in last.items()])

    def _log_events(self, job: str) -> list:
        """The events of the job's log streams, as DescribeLogStreams (by name) and GetLogEvents
        (by time) give them, read from moto's store: a listing of runs describes every job of
        the deployment (runs/table.py), and three requests for each were ~3.5 s of CPU a run of
        the launcher tests."""
        group = logs_backends[DEFAULT_ACCOUNT_ID][self.region].groups.get(LOG_GROUP)
        streams = sorted((group.streams if group else {}).items())
        return [event for stream_name, stream in streams if stream_name.startswith(job + "/")
                for event in sorted(stream.events, key=lambda e: e.timestamp)]

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

    # --- the model registry -------------------------------------------------------------------

    def _unapproved_package(self, params: Dict) -> Optional[str]:
        """Why SageMaker refuses a CreateModel whose container names a model package version that
        does not exist or is not Approved (CreateModelPackage ModelApprovalStatus: "must be set
        to Approved to deploy the model"; the message is the fake's own)."""
        packages = self.sagemaker_backend().model_packages
        for container in [params.get("PrimaryContainer")] + params.get("Containers", []):
            name = (container or {}).get("ModelPackageName")
            if name is None:
                continue
            package = packages.get(name)
            if package is None:
                return f"Model package {name} does not exist."
            if package.model_package_version and package.model_approval_status != "Approved":
                return (f"Model package {name} is {package.model_approval_status}: only an "
                        "Approved version of a model package group can be deployed.")
        return None

    def _registry_call(self, target: str, environ, body: bytes, params: Dict, start_response):
        operation = target.partition(".")[2]
        problems = service_model.problems("sagemaker", operation, params)
        if target == CREATE_MODEL_PACKAGE and params.get("ModelPackageGroupName") \
                and params.get("Tags"):
            problems.append("Tags cannot be given for a versioned model package: it takes its "
                            "model package group's tags")
        if problems:
            return _json_answer(start_response, "400 Bad Request", "ValidationException",
                                "; ".join(problems))
        status, headers, data = self._moto(environ, body)
        if target != LIST_MODEL_PACKAGES or not status.startswith("200"):
            start_response(status, headers)
            return [data]
        answer = json.loads(data)
        fields = set(self.client("sagemaker").meta.service_model.shape_for(
            "ModelPackageSummary").members)
        answer["ModelPackageSummaryList"] = [{k: v for k, v in s.items() if k in fields}
                                             for s in answer["ModelPackageSummaryList"]]
        return _json_answer(start_response, status, answer=answer)

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

    def _run_job(self, params: Dict, extra_log: Tuple[str, ...] = ()) -> None:
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
        group = LOG_GROUP
        try:
            logs.create_log_group(logGroupName=group)
        except logs.exceptions.ResourceAlreadyExistsException:
            pass
        stream = f"{name}/algo-1-1700000000"
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        now_ms = int(time.time() * 1000)  # CloudWatch drops events older than 14 days
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
            {"timestamp": now_ms + i, "message": line}
            for i, line in enumerate(TRAINING_LOG + list(extra_log))])

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


def _candidate_values(ranges: Dict, number: int) -> Dict[str, str]:
    """The values a played candidate tries: every range's minimum (the first candidate), maximum
    (the second), middle (the third; geometric for a Logarithmic range); for a categorical range
    its first, last and middle value. Strings, as SageMaker passes them."""
    values = {}
    for item in ranges.get("CategoricalParameterRanges", []):
        choices = item["Values"]
        values[item["Name"]] = choices[(0, len(choices) - 1, len(choices) // 2)[number - 1]]
    for key, kind in (("IntegerParameterRanges", int), ("ContinuousParameterRanges", float)):
        for item in ranges.get(key, []):
            low, high = kind(item["MinValue"]), kind(item["MaxValue"])
            middle = ((low * high) ** 0.5 if item.get("ScalingType") == "Logarithmic"
                      else (low + high) / 2)
            values[item["Name"]] = str((low, high, kind(middle))[number - 1])
    return values


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
