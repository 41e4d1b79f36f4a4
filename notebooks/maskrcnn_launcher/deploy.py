"""Serving a trained model: a finished training job -> an auto-scaling SageMaker endpoint -> nothing.

    plan = deploy.plan(deployment, DeployOptions(job_name=None), boto_session)  # reads, creates nothing
    summary = deploy.deploy(plan, boto_session)      # model, endpoint config, endpoint, idle
                                                     # alarm, auto scaling
    deploy.invoke(boto_session.client("sagemaker-runtime"), name, jpeg_bytes)   # {"detections": ...}
    deploy.endpoints(sagemaker_client, deployment, cloudwatch_client)   # what bills, how much, since
    deploy.delete(deployment, name, boto_session)    # alarm, scaling, endpoint, config, model

`plan` builds and checks every request before the first call that creates anything: the training
job (named, or the deployment's latest Completed one; its model.tar.gz must exist), the instance
type and the TensorFlow Serving image it takes, the names (docs/aws-rules.md EP-1..EP-6, AAS-1..3).
A refused plan raises DeployRequestError naming each bad value. `deploy` sends the plan; when a
step fails after something was created it deletes what it created (or, with
`rollback_on_failure=False` or on an interrupt, leaves it) and raises DeployError saying what
exists and how to delete it: never a silent half state.

Boto3 only: no SageMaker SDK needed to serve. Model, endpoint configuration and endpoint share one
name, `<job name prefix>-...` (what the notebook role's IAM allows); the scaling policy is
`<name>-invocations`; the idle alarm `<name>-idle` notifies the deployment's SNS topic when the
endpoint has had no invocations for `idle_hours` hours (docs/aws-rules.md CW-3).
"""

import dataclasses
import datetime
import json
import re
import time
from typing import Callable, Dict, List, Optional, Tuple

from botocore.exceptions import ClientError

from maskrcnn_contract import job_io, s3_objects, ssm
from maskrcnn_launcher import follow, instances
from maskrcnn_launcher.settings import Deployment

DEFAULT_INSTANCE_TYPE = "ml.g5.xlarge"  # 1 A10G, 24 GB; about $1.4/h on demand in us-east-1
VARIANT = "AllTraffic"
# SageMaker names: model, endpoint configuration, endpoint (EP-1).
NAME_MAX = 63
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
# Application Auto Scaling of a production variant (AAS-1, AAS-2).
SCALING_NAMESPACE = "sagemaker"
SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
SCALING_METRIC = "SageMakerVariantInvocationsPerInstance"
POLICY_SUFFIX = "-invocations"
# InvokeEndpoint: a request body of at most 6 MB (EP-6).
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
IMAGE_CONTENT_TYPES = ("image/jpeg", "image/png")
CONTENT_TYPES = IMAGE_CONTENT_TYPES + ("application/json",)
# Under the output prefix; the model role may write there and nowhere else (IAM-2).
DATA_CAPTURE_FOLDER = ssm.DATA_CAPTURE_PREFIX
ENDPOINT_FAILED = ("Failed", "OutOfService")
# The idle alarm (CW-3): AWS/SageMaker Invocations of the variant, summed per hour, at most 0 for
# `idle_hours` hours in a row, missing hours counted as idle. An alarm evaluates at most 7 days
# (Period x EvaluationPeriods <= 604800 s for periods of an hour or more).
IDLE_SUFFIX = "-idle"
DEFAULT_IDLE_HOURS = 8
MAX_IDLE_HOURS = 7 * 24
IDLE_PERIOD_SECONDS = 3600


class DeployRequestError(ValueError):
    """The deployment cannot go out as asked; nothing was created. The message names each bad
    value."""


class DeployError(RuntimeError):
    """A step failed after something was created; the message says what exists now and how to
    delete it."""


class InvokeError(RuntimeError):
    """The endpoint refused a request or answered something other than detections."""


@dataclasses.dataclass
class DeployOptions:
    """What the user chooses in the notebook or on the command line."""

    job_name: Optional[str] = None         # None: the deployment's latest Completed training job
    endpoint_name: Optional[str] = None    # None: <prefix>-endpoint-<UTC time>
    instance_type: str = DEFAULT_INSTANCE_TYPE
    instance_count: int = 1                # initial; between min_instances and max_instances
    min_instances: int = 1
    max_instances: int = 2
    # Target tracking on SageMakerVariantInvocationsPerInstance: requests per instance per
    # MINUTE. One instance answering one request at a time serves about 60 / latency_s a minute;
    # aim at about half of that (inference.ipynb measures it).
    target_invocations: float = 60.0
    scale_in_cooldown_s: int = 300
    scale_out_cooldown_s: int = 60
    require_gpu: bool = True               # refuse a CPU instance (CLI --allow-cpu)
    data_capture_percent: int = 0          # 0: no data capture; else the sampled percentage
    # Hours without an invocation after which the endpoint's idle alarm notifies the deployment's
    # topic (1 to MAX_IDLE_HOURS); None: no alarm.
    idle_hours: Optional[int] = DEFAULT_IDLE_HOURS
    wait_timeout_s: float = 3600.0


@dataclasses.dataclass(frozen=True)
class Plan:
    """Every request of a deployment, built and checked; `deploy` sends them in this order."""

    training_job: str
    model_data_url: str
    name: str
    create_model: dict
    create_endpoint_config: dict
    create_endpoint: dict
    register_scalable_target: dict
    put_scaling_policy: dict
    put_metric_alarm: Optional[dict] = None  # the idle alarm; None: none asked for

    def requests(self) -> Dict[str, dict]:
        requests = {"CreateModel": self.create_model,
                    "CreateEndpointConfig": self.create_endpoint_config,
                    "CreateEndpoint": self.create_endpoint}
        if self.put_metric_alarm:
            requests["PutMetricAlarm"] = self.put_metric_alarm
        requests.update({"RegisterScalableTarget": self.register_scalable_target,
                         "PutScalingPolicy": self.put_scaling_policy})
        return requests


# --- names ----------------------------------------------------------------------------------------

def name_problems(deployment: Deployment, name: str, what: str = "endpoint name") -> List[str]:
    """Why `name` cannot be one of this deployment's models, endpoint configs or endpoints."""
    problems = []
    prefix = f"{deployment.job_name_prefix}-"
    if not name.startswith(prefix):
        problems.append(f"{what} {name!r} must start with {prefix} (the deployment's "
                        "job-name-prefix: the notebook role may create and delete only those)")
    if len(name) > NAME_MAX:
        problems.append(f"{what} {name!r} has {len(name)} characters; SageMaker allows "
                        f"{NAME_MAX}")
    if not NAME_PATTERN.match(name):
        problems.append(f"{what} {name!r}: SageMaker names are letters, digits and hyphens, "
                        "starting and ending with a letter or digit")
    return problems


def default_endpoint_name(deployment: Deployment, now: Optional[datetime.datetime] = None) -> str:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return f"{deployment.job_name_prefix}-endpoint-{now:%Y%m%d%H%M%S}"


def idle_alarm_name(endpoint_name: str) -> str:
    """`<endpoint>-idle`: the notebook role may create alarms named `<prefix>-*` only (CW-3)."""
    return endpoint_name + IDLE_SUFFIX


def idle_alarm(deployment: Deployment, endpoint_name: str, hours: int) -> dict:
    """PutMetricAlarm of the endpoint's idle alarm: ALARM, and a message to the deployment's
    topic, once its variant has had no invocations for `hours` hours (CW-3)."""
    return {
        "AlarmName": idle_alarm_name(endpoint_name),
        "AlarmDescription": (
            f"Endpoint {endpoint_name} has had no invocations for {hours} hours (or none since it "
            f"was deployed, if that is less) and bills its instances every hour until deleted: "
            f"python -m maskrcnn_launcher delete-endpoint {endpoint_name}"),
        "Namespace": "AWS/SageMaker", "MetricName": "Invocations",
        "Dimensions": [{"Name": "EndpointName", "Value": endpoint_name},
                       {"Name": "VariantName", "Value": VARIANT}],
        "Statistic": "Sum", "Period": IDLE_PERIOD_SECONDS,
        "EvaluationPeriods": hours, "DatapointsToAlarm": hours,
        "Threshold": 0.0, "ComparisonOperator": "LessThanOrEqualToThreshold",
        "TreatMissingData": "breaching",
        "AlarmActions": [deployment.notification_topic_arn],
    }


def resource_id(endpoint_name: str) -> str:
    """Application Auto Scaling's id of the endpoint's one production variant (AAS-1)."""
    return f"endpoint/{endpoint_name}/variant/{VARIANT}"


# --- the training job -----------------------------------------------------------------------------

def describe_job(sagemaker_client, deployment: Deployment, job_name: str,
                 refuse: Callable[[str], Exception]) -> dict:
    """DescribeTrainingJob of a training job of this deployment; `refuse(problem)` is raised when
    the job is another deployment's or does not exist."""
    if not job_name.startswith(f"{deployment.job_name_prefix}-"):
        raise refuse(f"training job {job_name!r} is not this deployment's: its jobs start with "
                     f"{deployment.job_name_prefix}-")
    try:
        return sagemaker_client.describe_training_job(TrainingJobName=job_name)
    except ClientError as error:
        if _is_missing(error):
            raise refuse(f"training job {job_name!r} does not exist in "
                         f"{deployment.region}") from None
        raise


def _is_missing(error: ClientError) -> bool:
    """SageMaker answers a describe or delete of something that does not exist with a
    ValidationException: 'Could not find endpoint ...' (models, endpoint configurations,
    endpoints), 'Requested resource not found.' (training jobs)."""
    code = error.response.get("Error", {}).get("Code", "")
    message = error.response.get("Error", {}).get("Message", "").lower()
    return code in ("ResourceNotFound", "ResourceNotFoundException") or (
        code in ("ValidationException", "ValidationError")
        and any(words in message for words in ("could not find", "not found", "does not exist")))


def _is_staging_job(deployment: Deployment, name: str, job: Optional[dict] = None) -> bool:
    if name.startswith(f"{deployment.job_name_prefix}-stage-"):  # jobs.staging_job_name
        return True
    return bool(job) and (job.get("Environment") or {}).get(job_io.PROGRAM_ENV) == \
        job_io.STAGING_PROGRAM


def latest_completed_job(sagemaker_client, deployment: Deployment) -> Optional[str]:
    """The name of the deployment's most recent Completed training job (not a staging job)."""
    prefix = f"{deployment.job_name_prefix}-"
    found: List[Tuple[datetime.datetime, str]] = []
    for page in sagemaker_client.get_paginator("list_training_jobs").paginate(
            NameContains=deployment.job_name_prefix, StatusEquals="Completed",
            SortBy="CreationTime", SortOrder="Descending"):
        for summary in page["TrainingJobSummaries"]:
            name = summary["TrainingJobName"]
            if name.startswith(prefix) and not _is_staging_job(deployment, name):
                found.append((summary["CreationTime"], name))
    return max(found)[1] if found else None


def _s3_object_problem(s3_client, uri: str) -> Optional[str]:
    folder, _, name = uri.rpartition("/")
    bucket, prefix = s3_objects.split_s3_uri(folder)
    try:
        if s3_objects.object_exists(s3_client, bucket, prefix + name):
            return None
    except ClientError as error:  # not a missing object: denied, or another error
        code = error.response.get("Error", {}).get("Code", "")
        return f"model artifacts {uri} cannot be read ({code}: {error})"
    return f"model artifacts {uri} do not exist (deleted?)"


def training_job(sagemaker_client, s3_client, deployment: Deployment,
                 job_name: Optional[str] = None) -> dict:
    """DescribeTrainingJob of the job to serve: the named one, else the latest Completed one.
    Refused (DeployRequestError) unless it is this deployment's, Completed, a training (not
    staging) job, and its model.tar.gz exists."""
    if job_name is None:
        job_name = latest_completed_job(sagemaker_client, deployment)
        if job_name is None:
            raise DeployRequestError(
                f"no Completed training job named {deployment.job_name_prefix}-* in "
                f"{deployment.region}: train one first (mask-rcnn-*.ipynb or `launch`), or name "
                "one with --job / JOB_NAME")
    job = describe_job(sagemaker_client, deployment, job_name, DeployRequestError)
    if _is_staging_job(deployment, job_name, job):
        raise DeployRequestError(f"training job {job_name!r} is a dataset staging job: it "
                                 "trains no model")
    status = job["TrainingJobStatus"]
    if status != "Completed":
        reason = f": {job['FailureReason']}" if job.get("FailureReason") else ""
        raise DeployRequestError(f"training job {job_name!r} is {status}{reason}; only a "
                                 "Completed job has a model to serve")
    url = job.get("ModelArtifacts", {}).get("S3ModelArtifacts")
    if not url:
        raise DeployRequestError(f"training job {job_name!r} has no model artifacts "
                                 "(ModelArtifacts.S3ModelArtifacts is empty)")
    problem = _s3_object_problem(s3_client, url)
    if problem:
        raise DeployRequestError(f"training job {job_name!r}: {problem}")
    return job


# --- the plan -------------------------------------------------------------------------------------

def inference_image(deployment: Deployment, instance_type: str, require_gpu: bool = True) -> str:
    """The region's TensorFlow Serving image for the instance type's processor (EP-2)."""
    processor = instances.hosting_processor(instance_type)
    if processor == "cpu" and require_gpu:
        raise DeployRequestError(
            f"instance type {instance_type!r} has no GPU: Mask R-CNN answers in seconds per image "
            f"on a CPU. Use a GPU type (default {DEFAULT_INSTANCE_TYPE}), or allow a CPU instance "
            "(CLI --allow-cpu, notebook ALLOW_CPU = True)")
    return {"gpu": deployment.inference_image_gpu_uri,
            "cpu": deployment.inference_image_cpu_uri}[processor]


def _option_problems(options: DeployOptions) -> List[str]:
    problems = []
    if options.min_instances < 1:
        problems.append(f"min instances {options.min_instances}: auto scaling of an instance "
                        "endpoint needs at least 1")
    if options.max_instances < options.min_instances:
        problems.append(f"max instances {options.max_instances} is below min instances "
                        f"{options.min_instances}")
    if not options.min_instances <= options.instance_count <= options.max_instances:
        problems.append(f"instance count {options.instance_count} is outside min..max "
                        f"({options.min_instances}..{options.max_instances})")
    if not options.target_invocations > 0:
        problems.append(f"target invocations {options.target_invocations}: expected requests "
                        "per instance per minute, above 0")
    if not 0 <= options.data_capture_percent <= 100:
        problems.append(f"data capture {options.data_capture_percent}%: expected 0 (off) to 100")
    if options.scale_in_cooldown_s < 0 or options.scale_out_cooldown_s < 0:
        problems.append("cooldowns must be >= 0 seconds")
    hours = options.idle_hours
    if hours is not None and (isinstance(hours, bool) or not isinstance(hours, int)
                              or not 1 <= hours <= MAX_IDLE_HOURS):
        problems.append(f"idle hours {hours!r} (--idle-hours, idle_hours): expected a whole "
                        f"number of hours from 1 to {MAX_IDLE_HOURS} (a CloudWatch alarm "
                        "evaluates at most 7 days), or none for no idle alarm (--no-idle-alarm)")
    return problems


def _exists(describe: Callable, **kwargs) -> bool:
    try:
        describe(**kwargs)
        return True
    except ClientError as error:
        if _is_missing(error):
            return False
        raise


def plan(deployment: Deployment, options: DeployOptions, boto_session) -> Plan:
    """Builds every request of the deployment; reads AWS, creates nothing. Raises
    DeployRequestError naming every bad value (the instance type, the names and the options
    first, then the training job)."""
    sagemaker = boto_session.client("sagemaker")
    problems = _option_problems(options)
    image = None
    try:
        image = inference_image(deployment, options.instance_type, options.require_gpu)
    except (DeployRequestError, instances.InstanceTypeError) as error:
        problems.append(str(error))
    name = options.endpoint_name or default_endpoint_name(deployment)
    name_issues = name_problems(deployment, name)
    policy_name = name + POLICY_SUFFIX
    problems += name_issues
    if not name_issues:
        taken = [what for what, describe, key in (
            ("an endpoint", sagemaker.describe_endpoint, "EndpointName"),
            ("an endpoint configuration", sagemaker.describe_endpoint_config, "EndpointConfigName"),
            ("a model", sagemaker.describe_model, "ModelName"))
            if _exists(describe, **{key: name})]
        if taken:
            problems.append(f"{' and '.join(taken)} named {name!r} exist(s) already: delete it "
                            f"(`delete-endpoint {name}`) or choose another name")
    if problems:
        raise DeployRequestError("; ".join(problems))
    job = training_job(sagemaker, boto_session.client("s3"), deployment, options.job_name)
    model_data_url = job["ModelArtifacts"]["S3ModelArtifacts"]

    # The container serves the SavedModel of <archive>/1/ under the name "model" and runs
    # <archive>/code/inference.py around it (EP-2): no environment needed.
    create_model = {
        "ModelName": name,
        "ExecutionRoleArn": deployment.model_role_arn,
        "PrimaryContainer": {"Image": image, "ModelDataUrl": model_data_url},
        "VpcConfig": {"Subnets": list(deployment.subnet_ids),
                      "SecurityGroupIds": list(deployment.security_group_ids)},
    }
    create_endpoint_config = {
        "EndpointConfigName": name,
        "ProductionVariants": [{
            "VariantName": VARIANT, "ModelName": name, "InstanceType": options.instance_type,
            "InitialInstanceCount": options.instance_count, "InitialVariantWeight": 1.0}],
    }
    # Instance storage is encrypted by the instance's hardware; the key is for an EBS volume,
    # which local-NVMe types do not get (EP-4, as SM-1 for training).
    if not instances.has_local_storage(options.instance_type):
        create_endpoint_config["KmsKeyId"] = deployment.kms_key_arn
    if options.data_capture_percent:
        create_endpoint_config["DataCaptureConfig"] = {
            "EnableCapture": True,
            "InitialSamplingPercentage": options.data_capture_percent,
            "DestinationS3Uri": (f"s3://{deployment.data_bucket}/{deployment.output_prefix}"
                                 f"{DATA_CAPTURE_FOLDER}"),
            "KmsKeyId": deployment.kms_key_arn,
            "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
            # The JSON answers are stored as text; images (any other type) base64 (EP-5).
            "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"]},
        }
    target = {"ServiceNamespace": SCALING_NAMESPACE, "ResourceId": resource_id(name),
              "ScalableDimension": SCALABLE_DIMENSION}
    return Plan(
        training_job=job["TrainingJobName"], model_data_url=model_data_url, name=name,
        create_model=create_model, create_endpoint_config=create_endpoint_config,
        create_endpoint={"EndpointName": name, "EndpointConfigName": name},
        # No RoleARN: Application Auto Scaling uses its service-linked role (AAS-3).
        register_scalable_target=dict(target, MinCapacity=options.min_instances,
                                      MaxCapacity=options.max_instances),
        put_scaling_policy=dict(
            target, PolicyName=policy_name, PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": float(options.target_invocations),
                "PredefinedMetricSpecification": {"PredefinedMetricType": SCALING_METRIC},
                "ScaleInCooldown": options.scale_in_cooldown_s,
                "ScaleOutCooldown": options.scale_out_cooldown_s}),
        put_metric_alarm=(idle_alarm(deployment, name, options.idle_hours)
                          if options.idle_hours is not None else None),
    )


def describe_plan(p: Plan) -> List[str]:
    """What a plan creates, one line each."""
    variant = p.create_endpoint_config["ProductionVariants"][0]
    policy = p.put_scaling_policy["TargetTrackingScalingPolicyConfiguration"]
    capture = p.create_endpoint_config.get("DataCaptureConfig")
    return [
        f"training job:  {p.training_job}",
        f"model data:    {p.model_data_url}",
        f"image:         {p.create_model['PrimaryContainer']['Image']}",
        f"endpoint:      {p.name} (model, endpoint configuration and endpoint share the name)",
        f"instances:     {variant['InitialInstanceCount']} x {variant['InstanceType']}, scaling "
        f"{p.register_scalable_target['MinCapacity']}..{p.register_scalable_target['MaxCapacity']}"
        f" on {policy['TargetValue']:g} invocations per instance per minute",
        "volume key:    " + ("the deployment's KMS key" if "KmsKeyId" in p.create_endpoint_config
                             else "none (local NVMe storage, encrypted by the instance)"),
        "data capture:  " + (f"{capture['InitialSamplingPercentage']}% to "
                             f"{capture['DestinationS3Uri']}" if capture else "off"),
        "idle alarm:    " + (f"{p.put_metric_alarm['AlarmName']} notifies "
                             f"{p.put_metric_alarm['AlarmActions'][0]} after "
                             f"{p.put_metric_alarm['EvaluationPeriods']} h without an invocation"
                             if p.put_metric_alarm else "off"),
        f"price class:   {instances.price_class(variant['InstanceType'])} per instance-hour "
        f"({instances.PRICE_CLASSES.get(instances.price_class(variant['InstanceType']), 'unknown')})",
    ]


# --- deploying ------------------------------------------------------------------------------------

def wait_for_endpoint(sagemaker_client, name: str, timeout_s: float = 3600.0,
                      poll: Optional[float] = None, echo: Callable[[str], None] = print) -> dict:
    """Polls DescribeEndpoint, printing each status change with the time since the start, until
    InService. Raises DeployError with the FailureReason when it fails, TimeoutError after
    `timeout_s`."""
    poll = follow.poll_seconds(30.0) if poll is None else poll
    start = time.monotonic()
    last = None
    while True:
        endpoint = sagemaker_client.describe_endpoint(EndpointName=name)
        status = endpoint["EndpointStatus"]
        if status != last:
            echo(f"{name}: {status} after {time.monotonic() - start:.0f} s")
            last = status
        if status == "InService":
            return endpoint
        if status in ENDPOINT_FAILED:
            raise DeployError(f"endpoint {name} {status}: "
                              f"{endpoint.get('FailureReason', 'no reason given')}")
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"endpoint {name} still {status} after {timeout_s:.0f} s")
        time.sleep(poll)


def deploy(p: Plan, boto_session, echo: Callable[[str], None] = print,
           rollback_on_failure: bool = True, timeout_s: float = 3600.0,
           poll: Optional[float] = None) -> dict:
    """Creates the model, the endpoint configuration and the endpoint, waits until it is
    InService, puts its idle alarm, then registers its variant with Application Auto Scaling and
    puts the target tracking policy. On a failure after the first create: deletes what was
    created, the alarm too (unless `rollback_on_failure` is False or the user interrupted), and
    raises DeployError saying what exists and how to delete it."""
    sagemaker = boto_session.client("sagemaker")
    scaling = boto_session.client("application-autoscaling")
    created: List[str] = []
    steps = [
        ("model", p.name, lambda: sagemaker.create_model(**p.create_model)),
        ("endpoint configuration", p.name, lambda: sagemaker.create_endpoint_config(
            **p.create_endpoint_config)),
        ("endpoint", p.name, lambda: sagemaker.create_endpoint(**p.create_endpoint)),
        (None, None, lambda: wait_for_endpoint(sagemaker, p.name, timeout_s, poll, echo)),
    ]
    if p.put_metric_alarm:
        steps.append(("idle alarm", p.put_metric_alarm["AlarmName"], lambda: boto_session.client(
            "cloudwatch").put_metric_alarm(**p.put_metric_alarm)))
    steps += [
        ("scalable target", p.name, lambda: scaling.register_scalable_target(
            **p.register_scalable_target)),
        ("scaling policy", p.put_scaling_policy["PolicyName"],
         lambda: scaling.put_scaling_policy(**p.put_scaling_policy)),
    ]
    try:
        for what, name, step in steps:
            step()
            if what:
                created.append(what)
                echo(f"created {what} {name}")
    except KeyboardInterrupt:
        echo(_left_behind(p.name, created, "interrupted"))
        raise
    except Exception as error:  # noqa: BLE001 - reported with what exists, then re-raised
        if not created:
            raise DeployError(f"{type(error).__name__}: {error}\nnothing was created") from error
        cause = f"{type(error).__name__}: {error}" if not isinstance(error, DeployError) \
            else str(error)
        if rollback_on_failure:
            try:
                deleted = _delete_names(boto_session, p.name, [p.name], [p.name], echo)
            except Exception as rollback_error:  # noqa: BLE001
                raise DeployError(f"{cause}\n{_left_behind(p.name, created, 'the rollback failed')}"
                                  f" ({rollback_error})") from error
            raise DeployError(f"{cause}\nrolled back: deleted {', '.join(deleted) or 'nothing'}; "
                              "nothing of this deployment is left") from error
        raise DeployError(f"{cause}\n{_left_behind(p.name, created, 'kept')}") from error
    return summary(p)


def _left_behind(name: str, created: List[str], why: str) -> str:
    return (f"{why}: {', '.join(created)} named {name} exist (an endpoint costs its instances' "
            f"hourly price while it exists). Delete them with `python -m maskrcnn_launcher "
            f"delete-endpoint {name}` or deploy.delete(deployment, {name!r}, boto_session)")


def summary(p: Plan) -> dict:
    variant = p.create_endpoint_config["ProductionVariants"][0]
    return {
        "endpoint_name": p.name, "model_name": p.name, "endpoint_config_name": p.name,
        "training_job": p.training_job, "model_data_url": p.model_data_url,
        "image": p.create_model["PrimaryContainer"]["Image"],
        "instance_type": variant["InstanceType"],
        "instance_count": variant["InitialInstanceCount"],
        "volume_kms_key": "KmsKeyId" in p.create_endpoint_config,
        "data_capture": p.create_endpoint_config.get("DataCaptureConfig", {}).get(
            "DestinationS3Uri"),
        "idle_alarm": p.put_metric_alarm["AlarmName"] if p.put_metric_alarm else None,
        "price_class": instances.price_class(variant["InstanceType"]),
        "scaling": {"resource_id": p.register_scalable_target["ResourceId"],
                    "min": p.register_scalable_target["MinCapacity"],
                    "max": p.register_scalable_target["MaxCapacity"],
                    "policy": p.put_scaling_policy["PolicyName"],
                    "target_invocations_per_instance_per_minute":
                        p.put_scaling_policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"]},
    }


# --- deleting -------------------------------------------------------------------------------------

def delete(deployment: Deployment, endpoint_name: str, boto_session,
           echo: Callable[[str], None] = print) -> List[str]:
    """Deletes the endpoint's idle alarm, scaling policies and scalable target, the endpoint, its
    endpoint configuration and its model(s); whatever is already gone is skipped, so it can run
    again.
    Refuses a name outside the deployment's prefix (DeployRequestError); the configuration and
    models are found from the endpoint (falling back to its name), and any outside the prefix
    are left alone and named. Returns what it deleted."""
    problems = name_problems(deployment, endpoint_name)
    if problems:
        raise DeployRequestError("; ".join(problems))
    sagemaker = boto_session.client("sagemaker")
    config_names, model_names = [endpoint_name], [endpoint_name]
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=endpoint_name)
        config_names = [endpoint["EndpointConfigName"]]
    except ClientError as error:
        if not _is_missing(error):
            raise
    for config in list(config_names):
        try:
            described = sagemaker.describe_endpoint_config(EndpointConfigName=config)
            model_names = [v["ModelName"] for v in described["ProductionVariants"]
                           if v.get("ModelName")] or model_names
        except ClientError as error:
            if not _is_missing(error):
                raise
    outside = [n for n in config_names + model_names if name_problems(deployment, n)]
    if outside:
        echo(f"left alone (not named {deployment.job_name_prefix}-*): {', '.join(outside)}")
    return _delete_names(boto_session, endpoint_name,
                         [n for n in config_names if n not in outside],
                         [n for n in model_names if n not in outside], echo)


def _delete_names(boto_session, endpoint_name: str, config_names: List[str],
                  model_names: List[str], echo: Callable[[str], None]) -> List[str]:
    sagemaker = boto_session.client("sagemaker")
    scaling = boto_session.client("application-autoscaling")
    cloudwatch = boto_session.client("cloudwatch")
    deleted = []
    # DeleteAlarms of a name that does not exist fails: only what DescribeAlarms finds.
    alarm = idle_alarm_name(endpoint_name)
    if cloudwatch.describe_alarms(AlarmNames=[alarm], AlarmTypes=["MetricAlarm"])["MetricAlarms"]:
        cloudwatch.delete_alarms(AlarmNames=[alarm])
        deleted.append(f"idle alarm {alarm}")
    target = {"ServiceNamespace": SCALING_NAMESPACE, "ResourceId": resource_id(endpoint_name),
              "ScalableDimension": SCALABLE_DIMENSION}
    # Deregistering deletes the target's policies too (AAS-2); deleting them first keeps the
    # order explicit and the alarms they own go with them.
    for policy in scaling.describe_scaling_policies(
            ServiceNamespace=SCALING_NAMESPACE, ResourceId=target["ResourceId"],
            ScalableDimension=SCALABLE_DIMENSION).get("ScalingPolicies", []):
        if policy["ResourceId"] != target["ResourceId"]:
            continue
        scaling.delete_scaling_policy(PolicyName=policy["PolicyName"], **target)
        deleted.append(f"scaling policy {policy['PolicyName']}")
    registered = scaling.describe_scalable_targets(
        ServiceNamespace=SCALING_NAMESPACE, ResourceIds=[target["ResourceId"]],
        ScalableDimension=SCALABLE_DIMENSION).get("ScalableTargets", [])
    if any(t["ResourceId"] == target["ResourceId"] for t in registered):
        scaling.deregister_scalable_target(**target)
        deleted.append(f"scalable target {target['ResourceId']}")
    for what, call, key, names in (
            ("endpoint", sagemaker.delete_endpoint, "EndpointName", [endpoint_name]),
            ("endpoint configuration", sagemaker.delete_endpoint_config, "EndpointConfigName",
             config_names),
            ("model", sagemaker.delete_model, "ModelName", model_names)):
        for name in dict.fromkeys(names):
            try:
                call(**{key: name})
                deleted.append(f"{what} {name}")
            except ClientError as error:
                if not _is_missing(error):
                    raise
    for line in deleted:
        echo(f"deleted {line}")
    if not deleted:
        echo(f"nothing named {endpoint_name} to delete")
    return deleted


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    return f"{days} d {hours} h" if days else f"{hours} h {minutes} min"


def _instances(sagemaker_client, name: str) -> Tuple[Optional[str], Optional[int]]:
    """(instance type, current instance count) of the endpoint's variant; (None, None) for what is
    gone meanwhile or has no instances (a failed endpoint)."""
    try:
        endpoint = sagemaker_client.describe_endpoint(EndpointName=name)
        config = sagemaker_client.describe_endpoint_config(
            EndpointConfigName=endpoint["EndpointConfigName"])
    except ClientError as error:
        if _is_missing(error):
            return None, None
        raise
    variants = {v["VariantName"]: v for v in config.get("ProductionVariants", [])}
    current = {v["VariantName"]: v for v in endpoint.get("ProductionVariants", [])}
    variant = variants.get(VARIANT) or next(iter(variants.values()), {})
    count = current.get(variant.get("VariantName"), {}).get("CurrentInstanceCount")
    return variant.get("InstanceType"), count


def endpoints(sagemaker_client, deployment: Deployment, cloudwatch_client=None,
              now: Optional[datetime.datetime] = None) -> List[dict]:
    """The deployment's endpoints, newest first: what costs money now. Each: name, status,
    created, age, instance type and count, the type's hourly price class per instance
    (instances.PRICE_CLASSES), and with `cloudwatch_client` its idle alarm's state (None: no
    alarm)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    found = []
    for page in sagemaker_client.get_paginator("list_endpoints").paginate(
            NameContains=deployment.job_name_prefix, SortBy="CreationTime",
            SortOrder="Descending"):
        for e in page["Endpoints"]:
            name = e["EndpointName"]
            if not name.startswith(f"{deployment.job_name_prefix}-"):
                continue
            instance_type, count = _instances(sagemaker_client, name)
            created = e["CreationTime"]
            if created.tzinfo is None:
                created = created.replace(tzinfo=datetime.timezone.utc)
            found.append({"name": name, "status": e["EndpointStatus"], "created": str(created),
                          "age": _age((now - created).total_seconds()),
                          "instance_type": instance_type, "instance_count": count,
                          "price_class": instances.price_class(instance_type) if instance_type
                          else None})
    if cloudwatch_client is not None and found:
        states = {}
        names = [idle_alarm_name(e["name"]) for e in found]
        for start in range(0, len(names), 100):  # DescribeAlarms takes 100 names at most
            for alarm in cloudwatch_client.describe_alarms(
                    AlarmNames=names[start:start + 100], AlarmTypes=["MetricAlarm"])["MetricAlarms"]:
                states[alarm["AlarmName"]] = alarm["StateValue"]
        for e in found:
            e["idle_alarm"] = states.get(idle_alarm_name(e["name"]))
    return found


def endpoint_lines(found: List[dict]) -> List[str]:
    """One line per endpoint of `endpoints`, for people: what bills, how much, since when."""
    lines = []
    for e in found:
        shape = (f"{e['instance_count'] if e['instance_count'] is not None else '?'} x "
                 f"{e['instance_type']} ({e['price_class']} per instance-hour)"
                 if e["instance_type"] else "no instances")
        alarm = e.get("idle_alarm", "n/a") or "no idle alarm"
        lines.append(f"{e['name']}: {e['status']}, {shape}, up {e['age']}, idle alarm {alarm}")
    return lines


# --- invoking -------------------------------------------------------------------------------------

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
