"""Serving a trained model, planned: every request of a deployment built and checked before the
first call that creates anything.

    plan = endpoint_plan.plan(deployment, DeployOptions(job_name=None), boto_session)  # reads only
    print("\n".join(endpoint_plan.describe_plan(plan)))

The training job (named, or the deployment's latest Completed one; its model.tar.gz must exist:
runs/lookup.py), the instance type and the TensorFlow Serving image it takes, the names
(docs/aws-rules.md EP-1..EP-6, AAS-1..3). A refused plan raises DeployRequestError naming each bad
value; `endpoints.deploy` sends it. Model, endpoint configuration and endpoint share one name,
`<job name prefix>-...` (what the notebook role's IAM allows); the scaling policy is
`<name>-invocations`; the idle alarm `<name>-idle` notifies the deployment's SNS topic when the
endpoint has had no invocations for `idle_hours` hours (docs/aws-rules.md CW-3). Boto3 only: no
SageMaker SDK needed to serve.
"""

import dataclasses
import datetime
import re
from typing import Any, Callable, Dict, List, Optional

from botocore.exceptions import ClientError

from maskrcnn_contract import ssm

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import lookup, registry

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
# Under the output prefix; the model role may write there and nowhere else (IAM-2).
DATA_CAPTURE_FOLDER = ssm.DATA_CAPTURE_PREFIX
# The idle alarm (CW-3): AWS/SageMaker Invocations of the variant, summed per hour, at most 0 for
# `idle_hours` hours in a row, missing hours counted as idle. An alarm evaluates at most 7 days
# (Period x EvaluationPeriods <= 604800 s for periods of an hour or more).
IDLE_SUFFIX = "-idle"
DEFAULT_IDLE_HOURS = 8
MAX_IDLE_HOURS = 7 * 24
IDLE_PERIOD_SECONDS = 3600


class DeployRequestError(lookup.RunRequestError):
    """The deployment cannot go out as asked; nothing was created. The message names each bad
    value."""


@dataclasses.dataclass
class DeployOptions:
    """What the user chooses in the notebook or on the command line."""

    job_name: Optional[str] = None         # None: the deployment's latest Completed training job
    # A version of the deployment's model registry instead of a job: its ARN, or
    # registry.LATEST_APPROVED; served only when Approved (runs/registry.py, REG-4).
    model_package: Optional[str] = None
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
    image: str = ""                          # the serving image (the version's, from a package)
    model_package: Optional[str] = None      # the registry version served, if one is

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


def model_request(deployment: Deployment, name: str, container: dict) -> dict:
    """CreateModel of `container` (an image and archive, or a model package version) as the
    deployment's model role, in the training VPC (what the notebook role's IAM allows): an
    endpoint's and a batch transform's alike."""
    return {
        "ModelName": name,
        "ExecutionRoleArn": deployment.model_role_arn,
        "PrimaryContainer": container,
        "VpcConfig": {"Subnets": list(deployment.subnet_ids),
                      "SecurityGroupIds": list(deployment.security_group_ids)},
    }


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
        if lookup.is_missing(error):
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
    if options.model_package and options.job_name:
        problems.append(f"a training job ({options.job_name}) and a model package "
                        f"({options.model_package}): serve one or the other")
    if problems:
        raise DeployRequestError("; ".join(problems))
    assert image is not None  # inference_image either gave one or added a problem
    if options.model_package:
        package = approved_package(deployment, options.model_package, options.instance_type,
                                   sagemaker)
        container = {"ModelPackageName": package["ModelPackageArn"]}
        spec = package["InferenceSpecification"]["Containers"][0]
        image, model_data_url = spec["Image"], spec["ModelDataUrl"]
        training_job = registry.version(sagemaker, boto_session.client("s3"), deployment,
                                        package["ModelPackageArn"]).training_job or "?"
    else:
        job = lookup.training_job(sagemaker, boto_session.client("s3"), deployment,
                                  options.job_name, refuse=DeployRequestError)
        model_data_url, training_job = job["ModelArtifacts"]["S3ModelArtifacts"], \
            job["TrainingJobName"]
        # The container serves the SavedModel of <archive>/1/ under the name "model" and runs
        # <archive>/code/inference.py around it (EP-2): no environment needed.
        container = {"Image": image, "ModelDataUrl": model_data_url}

    create_model = model_request(deployment, name, container)
    create_endpoint_config: Dict[str, Any] = {
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
        training_job=training_job, model_data_url=model_data_url, name=name, image=image,
        model_package=container.get("ModelPackageName"),
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


def approved_package(deployment: Deployment, model_package: str, instance_type: str,
                     sagemaker_client,
                     supported_key: str = "SupportedRealtimeInferenceInstanceTypes") -> dict:
    """DescribeModelPackage of the version to serve: `model_package` (an ARN, or
    registry.LATEST_APPROVED), refused (DeployRequestError) unless it is a version of this
    deployment's group, Approved, Completed, and holds an image for `instance_type` (REG-4) among
    the types its InferenceSpecification lists under `supported_key` (a Batch Transform's:
    SupportedTransformInstanceTypes)."""
    arn = model_package
    if model_package == registry.LATEST_APPROVED:
        arn = registry.latest_approved(deployment, sagemaker_client, refuse=DeployRequestError)
    package = registry.describe_version(sagemaker_client, deployment, arn,
                                        refuse=DeployRequestError)
    number = package["ModelPackageVersion"]
    approval = package.get("ModelApprovalStatus")
    if approval != registry.APPROVED:
        reason = f" ({package['ApprovalDescription']})" if package.get("ApprovalDescription") \
            else ""
        raise DeployRequestError(
            f"model package version {number} ({arn}) is {approval}{reason}: only an Approved "
            f"version is served. Approve it first: python -m maskrcnn_launcher approve {arn} "
            "--reason ...")
    if package["ModelPackageStatus"] != "Completed":
        raise DeployRequestError(f"model package version {number} ({arn}) is "
                                 f"{package['ModelPackageStatus']}, not Completed: SageMaker "
                                 "has not finished validating it; try again shortly")
    supported = package["InferenceSpecification"].get(supported_key)
    if supported is not None and instance_type not in supported:
        raise DeployRequestError(
            f"instance type {instance_type!r}: version {number} holds the TensorFlow Serving GPU "
            f"image and lists the GPU types it runs on, e.g. {DEFAULT_INSTANCE_TYPE}; a CPU "
            "endpoint serves a training job (--job) instead")
    return package


def describe_plan(p: Plan) -> List[str]:
    """What a plan creates, one line each."""
    variant = p.create_endpoint_config["ProductionVariants"][0]
    policy = p.put_scaling_policy["TargetTrackingScalingPolicyConfiguration"]
    capture = p.create_endpoint_config.get("DataCaptureConfig")
    return [
        f"training job:  {p.training_job}",
        *([f"model package: {p.model_package} (Approved)"] if p.model_package else []),
        f"model data:    {p.model_data_url}",
        f"image:         {p.image}",
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
        "("
        f"{instances.PRICE_CLASSES.get(instances.price_class(variant['InstanceType']), 'unknown')}"
        ")",
    ]
