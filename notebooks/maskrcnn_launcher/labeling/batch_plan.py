"""Batch predictions planned: a SageMaker Batch Transform of a trained model over an S3 prefix of
images, every request built and checked before the first call that creates anything.

    plan = batch_plan.plan(deployment, BatchOptions(input_uri="s3://<bucket>/samples/batch2/"),
                           boto_session)                      # reads only
    print("\\n".join(batch_plan.describe_plan(plan)))

The same model as an endpoint serves (serving/endpoint_plan.py: a training job's archive with the
TensorFlow Serving image, or an Approved version of the registry), the same handler (one image
per request, its JSON answer per image), in the deployment's VPC with the model role, the output
and the volume encrypted with the deployment's key (docs/aws-rules.md BT-1..BT-6). The images must
lie below the deployment's samples prefix, which the model role reads; the transform's answers,
one `<image key>.out` per image (BT-3), and the predictions files go below
`s3://<bucket>/<output prefix>predictions/<name>/`, where the model role writes.
"""

import dataclasses
import datetime
import math
import re
from typing import Dict, List, Optional

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import lookup
from maskrcnn_launcher.serving import endpoint_plan

# What the handler decodes (training_code/maskrcnn_job/serving/endpoint_handler.py: JPEG and PNG
# through TensorFlow's decode_image), by the key's suffix.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
# One content type for the whole transform (TransformInput.ContentType): the handler takes
# application/x-image for JPEG and PNG alike.
CONTENT_TYPE = "application/x-image"
ACCEPT = "application/json"
# The handler reads its score threshold from this variable of the container when a request
# carries none (a Batch Transform request carries no custom attributes): the handler's own name.
SCORE_THRESHOLD_ENV = "MASKRCNN_SCORE_THRESHOLD"
DEFAULT_SCORE_THRESHOLD = 0.3          # the handler's DEFAULT_SCORE_THRESHOLD
DEFAULT_INSTANCE_TYPE = "ml.g4dn.xlarge"   # 1 T4: the cheapest GPU type Batch Transform offers
# MaxPayloadInMB: at most 100, and MaxConcurrentTransforms x MaxPayloadInMB at most 100 (BT-2).
MAX_PAYLOAD_MB = 100
# One request at a time per instance: TensorFlow Serving runs one image per request on the GPU,
# and one at a time keeps the payload limit the largest image's whatever its size (BT-2).
MAX_CONCURRENT_TRANSFORMS = 1
# ModelClientConfig (BT-4): a request that hangs fails after this long; one retry for a transient
# failure (an image that cannot be decoded fails again and is reported).
INVOCATION_TIMEOUT_S = 600
INVOCATION_RETRIES = 1
PREDICTIONS_FOLDER = "predictions/"
TRANSFORM_FOLDER = "transform/"
# The transform job's name, shared by its model: the notebook role's IAM allows '<prefix>-*'.
NAME_PATTERN = endpoint_plan.NAME_PATTERN
NAME_MAX = endpoint_plan.NAME_MAX


class BatchRequestError(lookup.RunRequestError):
    """The batch predictions cannot go out as asked; nothing was created. The message names each
    bad value."""


@dataclasses.dataclass
class BatchOptions:
    """What the user chooses in the notebook or on the command line."""

    input_uri: str                          # s3://<data bucket>/<samples prefix>...
    job_name: Optional[str] = None          # None: the deployment's latest Completed training job
    model_package: Optional[str] = None     # an Approved version of the registry instead
    name: Optional[str] = None              # None: <prefix>-predict-<UTC time>
    instance_type: str = DEFAULT_INSTANCE_TYPE
    instance_count: int = 1
    score_threshold: float = DEFAULT_SCORE_THRESHOLD
    require_gpu: bool = True                # refuse a CPU instance (CLI --allow-cpu)


@dataclasses.dataclass(frozen=True)
class Plan:
    """Every request of a batch predictions run, built and checked; `batch_jobs.send` sends them
    in this order."""

    name: str
    training_job: str
    model_package: Optional[str]
    image_keys: List[str]        # the input images' keys, as listed
    largest_bytes: int
    output_uri: str              # s3://<bucket>/<output prefix>predictions/<name>/
    create_model: dict
    create_transform_job: dict

    def requests(self) -> Dict[str, dict]:
        return {"CreateModel": self.create_model, "CreateTransformJob": self.create_transform_job}


def default_name(deployment: Deployment, now: Optional[datetime.datetime] = None) -> str:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return f"{deployment.job_name_prefix}-predict-{now:%Y%m%d%H%M%S}"


def output_uri(deployment: Deployment, name: str) -> str:
    """Where a predictions run's files go: s3://<bucket>/<output prefix>predictions/<name>/."""
    return f"s3://{deployment.data_bucket}/{deployment.output_prefix}{PREDICTIONS_FOLDER}{name}/"


def payload_mb(size_bytes: int) -> int:
    """MaxPayloadInMB for an image of `size_bytes`: the whole megabytes (10^6 bytes, the larger
    reading of 'MB') that hold it, at least 1."""
    return max(1, math.ceil(size_bytes / 1_000_000))


def _input_problems(deployment: Deployment, input_uri: str) -> List[str]:
    allowed = f"s3://{deployment.data_bucket}/{deployment.samples_prefix}"
    if not isinstance(input_uri, str) or not input_uri.startswith(allowed):
        return [f"input {input_uri!r} (--input): the images must lie below {allowed} (the model "
                "role reads there and nowhere else); upload them there first, e.g. aws s3 sync "
                f"<folder> {allowed}<batch>/"]
    if not input_uri.endswith("/"):
        return [f"input {input_uri!r} (--input): name a prefix ending in '/' (every image below "
                "it is predicted)"]
    return []


def list_images(s3_client, input_uri: str) -> Dict[str, int]:
    """{key: size in bytes} of every object below the prefix (all pages)."""
    bucket, prefix = input_uri[len("s3://"):].split("/", 1)
    found = {}
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            found[item["Key"]] = item["Size"]
    return found


def image_problems(objects: Dict[str, int], input_uri: str) -> List[str]:
    """Why the objects below the prefix cannot be one transform: none, a file the handler cannot
    read (the transform sends every object below the prefix), an image above the payload limit."""
    keys = [k for k in objects if not k.endswith("/")]   # a console "folder" marker is no object
    if not keys:
        return [f"input {input_uri!r}: no object below it; upload the images first"]
    problems = []
    other = [k for k in keys if not k.lower().endswith(IMAGE_SUFFIXES)]
    if other:
        problems.append(f"input {input_uri!r}: {len(other)} object(s) are not JPEG or PNG "
                        f"images ({', '.join(sorted(other)[:5])}"
                        f"{', ...' if len(other) > 5 else ''}):"
                        f" the transform sends every object below the prefix to the model, which "
                        f"reads {', '.join(IMAGE_SUFFIXES)}; move them elsewhere")
    large = [k for k in keys if payload_mb(objects[k]) > MAX_PAYLOAD_MB]
    if large:
        problems.append(f"input {input_uri!r}: {', '.join(sorted(large)[:5])} exceed(s) "
                        f"{MAX_PAYLOAD_MB} MB, Batch Transform's largest request (BT-2); "
                        "downscale them")
    return problems


def _option_problems(options: BatchOptions) -> List[str]:
    problems = []
    count = options.instance_count
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        problems.append(f"instance count {count!r} (--instance-count): expected a whole number "
                        "of at least 1")
    threshold = options.score_threshold
    if (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
            or not 0 <= threshold <= 1):
        problems.append(f"score threshold {threshold!r} (--score-threshold): expected a number "
                        "from 0 to 1 (detections scoring below it are not kept)")
    if options.model_package and options.job_name:
        problems.append(f"a training job ({options.job_name}) and a model package "
                        f"({options.model_package}): predict with one or the other")
    return problems


def _instance_problems(options: BatchOptions, transform_types) -> List[str]:
    if options.instance_type not in transform_types:
        gpu = [t for t in transform_types if t.startswith(("ml.g4dn.", "ml.g5.", "ml.g6."))]
        return [f"instance type {options.instance_type!r} (--instance-type): Batch Transform "
                f"does not offer it (BT-5); GPU types it offers include "
                f"{', '.join(sorted(gpu)[:6])}"]
    return []


def plan(deployment: Deployment, options: BatchOptions, boto_session,
         transform_types=None) -> Plan:
    """Builds every request of the batch predictions; reads AWS (the images' list, the model),
    creates nothing. Raises BatchRequestError naming every bad value. `transform_types`: the
    instance types CreateTransformJob takes (default: botocore's model of the API, BT-5)."""
    sagemaker, s3 = boto_session.client("sagemaker"), boto_session.client("s3")
    if transform_types is None:
        transform_types = sagemaker.meta.service_model.shape_for("TransformInstanceType").enum
    problems = _option_problems(options) + _input_problems(deployment, options.input_uri)
    problems += _instance_problems(options, transform_types)
    image = None
    if not problems:
        try:
            image = endpoint_plan.inference_image(deployment, options.instance_type,
                                                  options.require_gpu)
        except (endpoint_plan.DeployRequestError, instances.InstanceTypeError) as error:
            problems.append(str(error))
    name = options.name or default_name(deployment)
    name_issues = endpoint_plan.name_problems(deployment, name, "predictions name")
    problems += name_issues
    if not name_issues:
        problems += _taken(sagemaker, name)
    objects = {}
    if not _input_problems(deployment, options.input_uri):
        objects = list_images(s3, options.input_uri)
        problems += image_problems(objects, options.input_uri)
    if problems:
        raise BatchRequestError("; ".join(problems))

    if options.model_package:
        try:
            package = endpoint_plan.approved_package(
                deployment, options.model_package, options.instance_type, sagemaker,
                supported_key="SupportedTransformInstanceTypes")
        except endpoint_plan.DeployRequestError as error:
            raise BatchRequestError(str(error)) from None
        container = {"ModelPackageName": package["ModelPackageArn"]}
        training_job = _package_training_job(package)
    else:
        job = lookup.training_job(sagemaker, s3, deployment, options.job_name,
                                  refuse=BatchRequestError)
        training_job = job["TrainingJobName"]
        container = {"Image": image, "ModelDataUrl": job["ModelArtifacts"]["S3ModelArtifacts"]}
    keys = sorted(k for k in objects if not k.endswith("/"))
    largest = max(objects[k] for k in keys)
    out = output_uri(deployment, name)
    create_model = endpoint_plan.model_request(deployment, name, container)
    resources = {"InstanceType": options.instance_type, "InstanceCount": options.instance_count}
    # The hardware encrypts local NVMe storage; a key is for an EBS volume only (BT-6, as EP-4).
    if not instances.has_local_storage(options.instance_type):
        resources["VolumeKmsKeyId"] = deployment.kms_key_arn
    create_transform_job = {
        "TransformJobName": name,
        "ModelName": name,
        "BatchStrategy": "SingleRecord",
        "MaxConcurrentTransforms": MAX_CONCURRENT_TRANSFORMS,
        "MaxPayloadInMB": payload_mb(largest),
        "ModelClientConfig": {"InvocationsTimeoutInSeconds": INVOCATION_TIMEOUT_S,
                              "InvocationsMaxRetries": INVOCATION_RETRIES},
        "Environment": {SCORE_THRESHOLD_ENV: repr(float(options.score_threshold))},
        "TransformInput": {
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix",
                                            "S3Uri": options.input_uri}},
            "ContentType": CONTENT_TYPE, "SplitType": "None", "CompressionType": "None"},
        "TransformOutput": {"S3OutputPath": out + TRANSFORM_FOLDER, "Accept": ACCEPT,
                            "AssembleWith": "None", "KmsKeyId": deployment.kms_key_arn},
        "TransformResources": resources,
    }
    return Plan(name=name, training_job=training_job,
                model_package=container.get("ModelPackageName"), image_keys=keys,
                largest_bytes=largest, output_uri=out, create_model=create_model,
                create_transform_job=create_transform_job)


def _taken(sagemaker, name: str) -> List[str]:
    from botocore.exceptions import ClientError

    taken = []
    for what, describe, key in (("a transform job", sagemaker.describe_transform_job,
                                 "TransformJobName"),
                                ("a model", sagemaker.describe_model, "ModelName")):
        try:
            describe(**{key: name})
            taken.append(what)
        except ClientError as error:
            if not lookup.is_missing(error):
                raise
    if taken:
        return [f"{' and '.join(taken)} named {name!r} exist(s) already: choose another name"]
    return []


def _package_training_job(package: dict) -> str:
    """The training job whose archive an Approved version holds (its ModelDataUrl's job folder)."""
    url = package["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]
    found = re.search(r"/([^/]+)/output/model\.tar\.gz$", url)
    return found.group(1) if found else "?"


def describe_plan(p: Plan) -> List[str]:
    """What a plan creates, one line each."""
    transform = p.create_transform_job
    resources = transform["TransformResources"]
    price = instances.price_class(resources["InstanceType"])
    return [
        f"training job:  {p.training_job}",
        *([f"model package: {p.model_package} (Approved)"] if p.model_package else []),
        f"images:        {len(p.image_keys)} below "
        f"{transform['TransformInput']['DataSource']['S3DataSource']['S3Uri']}"
        f" (largest {p.largest_bytes} bytes: MaxPayloadInMB {transform['MaxPayloadInMB']})",
        f"transform:     {p.name} (model and transform job share the name), "
        f"{resources['InstanceCount']} x {resources['InstanceType']}",
        f"score cut:     {transform['Environment'][SCORE_THRESHOLD_ENV]}",
        f"output:        {p.output_uri} (encrypted with the deployment's KMS key)",
        "volume key:    " + ("the deployment's KMS key" if "VolumeKmsKeyId" in resources
                             else "none (local NVMe storage, encrypted by the instance)"),
        f"price class:   {price} per instance-hour "
        f"({instances.PRICE_CLASSES.get(price, 'unknown')}), billed while the transform runs",
    ]
