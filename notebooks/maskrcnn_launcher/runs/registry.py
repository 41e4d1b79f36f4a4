"""The deployment's model registry: finished training jobs as versions of its SageMaker model
package group, approved or rejected by a person, and the approved one served.

    version = registry.register(deployment, job_name, boto_session)       # PendingManualApproval
    registry.decide(deployment, version.arn, registry.APPROVED, "mask AP 0.38 on val2017",
                    boto_session)
    for line in registry.version_lines(registry.versions(deployment, boto_session)): print(line)
    arn = registry.latest_approved(deployment, sagemaker_client)

`register` refuses (RegistryRequestError, nothing written or created) a job that is not this
deployment's, not Completed, has no model, or whose model.tar.gz holds no evaluation report, and a
job registered already. It copies the report to `s3://<bucket>/<output prefix>model-registry/<job>/
report.json` (the notebook role writes the output prefix already), then creates the version: the
job's model.tar.gz with the region's TensorFlow Serving GPU image (the image `deploy` serves a job
with, docs/aws-rules.md EP-2), the report as ModelQuality statistics with its SHA-256, the job's
ARN as MetadataProperties.GeneratedBy, status PendingManualApproval (the only status the notebook
role may register with: REG-4). A version's AP is read back from that report, its digest checked.
Boto3 only. docs/serving.md, "Promoting a model", has the team's path.
"""

import dataclasses
import datetime
import hashlib
import json
import re
from typing import List, Optional

from botocore.exceptions import ClientError

from maskrcnn_contract import evaluation_report as report_contract
from maskrcnn_contract import model_registry, s3_objects
from maskrcnn_contract.model_registry import APPROVED, PENDING, REJECTED  # noqa: F401  (API)

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import evaluation_report, lookup

# Below the output prefix, one folder per registered job: the report a version cites (REG-6).
REPORTS_FOLDER = "model-registry/"
REPORT_CONTENT_TYPE = "application/json"
LATEST_APPROVED = "latest-approved"
# What the endpoint handler takes and answers (docs/aws-rules.md EP-6).
CONTENT_TYPES = ["image/jpeg", "image/png", "application/json"]
RESPONSE_TYPES = ["application/json"]
# ApprovalDescription: at most 1024 characters (UpdateModelPackage, botocore's model).
REASON_MAX = 1024
# A version of a group (REG-2):
# arn:<partition>:sagemaker:<region>:<account>:model-package/<group>/<n>
VERSION_ARN = re.compile(r"^arn:aws[a-z-]*:sagemaker:([a-z0-9-]+):([0-9]{12}):model-package/"
                         r"([a-zA-Z0-9](?:-*[a-zA-Z0-9]){0,62})/([0-9]{1,9})$")


class RegistryRequestError(lookup.RunRequestError):
    """The registry request cannot be done as asked; nothing was written or created. The message
    names the job or version and why."""


@dataclasses.dataclass(frozen=True)
class Version:
    """One version of the deployment's group, with the AP of the report it cites."""

    arn: str
    number: int
    approval: str                  # ModelApprovalStatus
    status: str                    # ModelPackageStatus (Completed once SageMaker validated it)
    created: datetime.datetime
    training_job: Optional[str]
    model_data_url: str
    image: str
    mask_ap: Optional[float]       # the report's segm summary AP (None: no segm, or unreadable)
    box_ap: Optional[float]
    report_uri: Optional[str]
    reason: Optional[str] = None   # ApprovalDescription
    problem: Optional[str] = None  # why the report could not be read


def report_s3_uri(deployment: Deployment, job_name: str) -> str:
    return (f"s3://{deployment.data_bucket}/{deployment.output_prefix}{REPORTS_FOLDER}"
            f"{job_name}/{report_contract.REPORT_FILE}")


def gpu_instance_types(sagemaker_client) -> List[str]:
    """The real-time instance types (SageMaker's own enum, ProductionVariantInstanceType) of the
    GPU families the launcher serves on: where a version's GPU image runs."""
    enum = sagemaker_client.meta.service_model.shape_for("ProductionVariantInstanceType").enum
    return [t for t in enum if t.split(".")[1] in instances.HOSTING_GPU_FAMILIES]


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _ap(report: dict, task: str) -> Optional[float]:
    return ((report.get("tasks") or {}).get(task) or {}).get("summary", {}).get("AP")


def _job_name(package: dict) -> Optional[str]:
    generated_by = (package.get("MetadataProperties") or {}).get("GeneratedBy") or ""
    return generated_by.rpartition("/")[2] or None


def _group_exists(sagemaker_client, deployment: Deployment) -> None:
    try:
        sagemaker_client.describe_model_package_group(
            ModelPackageGroupName=deployment.model_package_group)
    except ClientError as error:
        if not lookup.is_missing(error):
            raise
        raise RegistryRequestError(
            f"the deployment's model package group {deployment.model_package_group!r} does not "
            f"exist in {deployment.region}: deploy the stack (npx cdk deploy) to create it") \
            from None


def _summaries(sagemaker_client, deployment: Deployment, approval: Optional[str] = None):
    """The group's version summaries, newest first."""
    extra = {"ModelApprovalStatus": approval} if approval else {}
    for page in sagemaker_client.get_paginator("list_model_packages").paginate(
            ModelPackageGroupName=deployment.model_package_group, SortBy="CreationTime",
            SortOrder="Descending", **extra):
        yield from page["ModelPackageSummaryList"]


# --- registering ----------------------------------------------------------------------------------

def registration_request(deployment: Deployment, job: dict, report_uri: str, digest: str,
                         instance_types: List[str], summary: str) -> dict:
    """CreateModelPackage of a version of the deployment's group from a finished job (REG-1..4,
    REG-6): no Tags (a version takes its group's), status PendingManualApproval."""
    return {
        "ModelPackageGroupName": deployment.model_package_group,
        "ModelPackageDescription": f"Mask R-CNN of training job {job['TrainingJobName']}: "
                                   f"{summary}",
        "InferenceSpecification": {
            "Containers": [{"Image": deployment.inference_image_gpu_uri,
                            "ModelDataUrl": job["ModelArtifacts"]["S3ModelArtifacts"]}],
            "SupportedContentTypes": list(CONTENT_TYPES),
            "SupportedResponseMIMETypes": list(RESPONSE_TYPES),
            "SupportedRealtimeInferenceInstanceTypes": list(instance_types),
        },
        "ModelApprovalStatus": model_registry.PENDING,
        "MetadataProperties": {"GeneratedBy": job["TrainingJobArn"]},
        "ModelMetrics": {"ModelQuality": {"Statistics": {
            "ContentType": REPORT_CONTENT_TYPE, "S3Uri": report_uri, "ContentDigest": digest}}},
    }


def _ap_summary(report: dict) -> str:
    parts = [f"{name} AP {value:.3f}" for name, value in
             (("mask", _ap(report, "segm")), ("box", _ap(report, "bbox"))) if value is not None]
    return (", ".join(parts) or "no AP") + f" on {report.get('images')} images"


def registered_version(sagemaker_client, deployment: Deployment, job_arn: str) -> Optional[str]:
    """The ARN of the group's version registered from the job `job_arn`, if any."""
    for summary in _summaries(sagemaker_client, deployment):
        package = sagemaker_client.describe_model_package(
            ModelPackageName=summary["ModelPackageArn"])
        if (package.get("MetadataProperties") or {}).get("GeneratedBy") == job_arn:
            return summary["ModelPackageArn"]
    return None


def register(deployment: Deployment, job_name: str, boto_session,
             echo=print) -> Version:
    """Registers the finished training job `job_name` as a version pending approval. Refused
    (RegistryRequestError, or lookup.RunRequestError from the job's checks) before anything is
    written: see the module's docstring."""
    sagemaker, s3 = boto_session.client("sagemaker"), boto_session.client("s3")
    job = lookup.training_job(sagemaker, s3, deployment, job_name, refuse=RegistryRequestError)
    _group_exists(sagemaker, deployment)
    existing = registered_version(sagemaker, deployment, job["TrainingJobArn"])
    if existing:
        raise RegistryRequestError(f"training job {job_name!r} is registered already: {existing}")
    job_name = job["TrainingJobName"]
    fetched = evaluation_report.fetch(deployment, job_name, boto_session)  # ReportMissingError
    with open(f"{fetched.directory}/{report_contract.REPORT_FILE}", "rb") as f:
        data = f.read()
    uri = report_s3_uri(deployment, job_name)
    request = registration_request(deployment, job, uri, _digest(data),
                                   gpu_instance_types(sagemaker), _ap_summary(fetched.report))
    bucket, key = s3_objects.split_object_uri(uri)
    s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType=REPORT_CONTENT_TYPE)
    arn = sagemaker.create_model_package(**request)["ModelPackageArn"]
    echo(f"registered {job_name} as {arn} ({_ap_summary(fetched.report)}), "
         f"{model_registry.PENDING}: approve it with `python -m maskrcnn_launcher approve {arn} "
         "--reason ...`")
    return version(sagemaker, s3, deployment, arn)


# --- reading --------------------------------------------------------------------------------------

def check_version_arn(deployment: Deployment, arn: str,
                      refuse=RegistryRequestError) -> int:
    """The version number of `arn`, a version of this deployment's group in its region; else
    `refuse(problem)` is raised."""
    match = VERSION_ARN.match(arn or "")
    if not match:
        raise refuse(f"{arn!r} is not a model package version ARN: expected arn:aws:sagemaker:"
                     f"<region>:<account>:model-package/{deployment.model_package_group}/<version>"
                     " (`python -m maskrcnn_launcher models` lists them)")
    region, _, group, number = match.groups()
    if group.lower() != deployment.model_package_group.lower() or region != deployment.region:
        raise refuse(f"{arn} is not a version of this deployment's model package group "
                     f"{deployment.model_package_group} in {deployment.region}")
    return int(number)


def describe_version(sagemaker_client, deployment: Deployment, arn: str,
                     refuse=RegistryRequestError) -> dict:
    """DescribeModelPackage of a version of this deployment's group; refused when the ARN is
    another group's or the version does not exist."""
    check_version_arn(deployment, arn, refuse)
    try:
        return sagemaker_client.describe_model_package(ModelPackageName=arn)
    except ClientError as error:
        if lookup.is_missing(error):
            raise refuse(f"model package version {arn} does not exist") from None
        raise


def _read_report(s3_client, metrics: Optional[dict]):
    """(report, problem) of the ModelQuality statistics a version cites, its digest checked."""
    statistics = ((metrics or {}).get("ModelQuality") or {}).get("Statistics") or {}
    uri = statistics.get("S3Uri")
    if not uri:
        return None, "no ModelQuality statistics"
    bucket, key = s3_objects.split_object_uri(uri)
    try:
        data = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as error:
        return None, f"{uri} cannot be read ({error.response.get('Error', {}).get('Code')})"
    if statistics.get("ContentDigest") and _digest(data) != statistics["ContentDigest"].lower():
        return None, f"{uri} changed since registration (its SHA-256 is not the version's)"
    return json.loads(data), None


def _version(package: dict, s3_client) -> Version:
    container = package["InferenceSpecification"]["Containers"][0]
    report, problem = _read_report(s3_client, package.get("ModelMetrics"))
    statistics = (package.get("ModelMetrics") or {}).get("ModelQuality", {}).get("Statistics", {})
    return Version(
        arn=package["ModelPackageArn"], number=package["ModelPackageVersion"],
        approval=package.get("ModelApprovalStatus", model_registry.PENDING),
        status=package["ModelPackageStatus"], created=package["CreationTime"],
        training_job=_job_name(package), model_data_url=container.get("ModelDataUrl", ""),
        image=container.get("Image", ""), mask_ap=_ap(report, "segm") if report else None,
        box_ap=_ap(report, "bbox") if report else None, report_uri=statistics.get("S3Uri"),
        reason=package.get("ApprovalDescription"), problem=problem)


def version(sagemaker_client, s3_client, deployment: Deployment, arn: str) -> Version:
    return _version(describe_version(sagemaker_client, deployment, arn), s3_client)


def versions(deployment: Deployment, boto_session) -> List[Version]:
    """Every version of the deployment's group, newest first, with the AP of its report."""
    sagemaker, s3 = boto_session.client("sagemaker"), boto_session.client("s3")
    _group_exists(sagemaker, deployment)
    return [_version(sagemaker.describe_model_package(ModelPackageName=s["ModelPackageArn"]), s3)
            for s in _summaries(sagemaker, deployment)]


def latest_approved(deployment: Deployment, sagemaker_client,
                    refuse=RegistryRequestError) -> str:
    """The ARN of the group's newest Approved version; `refuse(problem)` when there is none."""
    for summary in _summaries(sagemaker_client, deployment, model_registry.APPROVED):
        return summary["ModelPackageArn"]
    raise refuse(f"no Approved version in the model package group "
                 f"{deployment.model_package_group}: register a finished job (`register JOB`) "
                 "and approve it (`approve ARN --reason ...`)")


def version_lines(found: List[Version]) -> List[str]:
    """One line per version: number, approval, mask and box AP, training job, age, ARN."""
    def cell(value):
        return "-" if value is None else f"{value:.3f}"

    lines = []
    for v in found:
        line = (f"v{v.number:<4} {v.approval:<21} mask AP {cell(v.mask_ap):>5}  box AP "
                f"{cell(v.box_ap):>5}  {v.training_job or '?'}  {v.created:%Y-%m-%d %H:%M}  "
                f"{v.arn}")
        if v.reason:
            line += f"  ({v.reason})"
        if v.problem:
            line += f"  [report: {v.problem}]"
        lines.append(line)
    return lines


# --- deciding -------------------------------------------------------------------------------------

def check_reason(reason: Optional[str]) -> str:
    """The approval description: required, at most REASON_MAX characters."""
    if not reason or not reason.strip():
        raise RegistryRequestError("a reason is required (--reason, reason=...): it is kept as the "
                                   "version's ApprovalDescription, the record of why")
    if len(reason) > REASON_MAX:
        raise RegistryRequestError(f"the reason has {len(reason)} characters; SageMaker keeps "
                                   f"at most {REASON_MAX}")
    return reason.strip()


def decide(deployment: Deployment, arn: str, decision: str, reason: str,
           boto_session) -> Version:
    """Approves or rejects (`decision`: APPROVED or REJECTED) a version of the deployment's
    group, keeping `reason` as its ApprovalDescription. Refused before anything is sent: another
    decision, an empty or too long reason, another group's or a missing version, one that has
    that status already."""
    if decision not in model_registry.DECISIONS:
        raise RegistryRequestError(f"decision {decision!r}: expected one of "
                                   f"{', '.join(model_registry.DECISIONS)}")
    reason = check_reason(reason)
    sagemaker, s3 = boto_session.client("sagemaker"), boto_session.client("s3")
    package = describe_version(sagemaker, deployment, arn)
    if package.get("ModelApprovalStatus") == decision:
        raise RegistryRequestError(f"version {package['ModelPackageVersion']} ({arn}) is "
                                   f"{decision} already")
    sagemaker.update_model_package(ModelPackageArn=arn, ModelApprovalStatus=decision,
                                   ApprovalDescription=reason)
    return version(sagemaker, s3, deployment, arn)
