"""The deployment's values, read from SSM Parameter Store: nothing copied from stack outputs.

The training stack publishes one parameter per value under a path (default `/maskrcnn`), with the
names in `maskrcnn_contract.ssm`. On the notebook instance the lifecycle configuration writes that
path to `~/.maskrcnn/ssm-path`.
"""

import dataclasses
import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from maskrcnn_contract import job_io, ssm, tracking

DEFAULT_SSM_PATH = "/maskrcnn"
SSM_PATH_FILE = Path("~/.maskrcnn/ssm-path")
SSM_PATH_ENV = "MASKRCNN_SSM_PATH"


class SettingsError(RuntimeError):
    """A parameter the launcher needs is missing or malformed."""


@dataclasses.dataclass(frozen=True)
class Deployment:
    """Every value a launcher needs, one field per SSM parameter of `maskrcnn_contract.ssm`
    (leaf name with '-' -> '_')."""

    ssm_path: str
    region: str
    job_name_prefix: str
    data_bucket: str
    datasets_prefix: str      # every dataset below it: <datasets prefix><name>/
    imports_prefix: str       # exports users upload for the staging job: <imports prefix><name>/
    pretrained_prefix: str
    output_prefix: str
    checkpoint_prefix: str
    samples_prefix: str       # images for inference.ipynb
    kms_key_arn: str
    efs_id: str
    efs_datasets_path: str    # a dataset's directory is <efs datasets path>/<name>
    efs_pretrained_path: str
    # One DataSync task per bucket prefix copied to EFS (the datasets, the pretrained backbones).
    datasync_task_arns: Tuple[str, ...]
    subnet_ids: Tuple[str, ...]
    security_group_ids: Tuple[str, ...]
    training_role_arn: str
    staging_role_arn: str
    training_image_uri: str
    # Serving (serving/endpoint_plan.py): the role a SageMaker Model runs as, and the region's
    # TensorFlow Serving inference images, one per processor (instances.hosting_processor).
    model_role_arn: str
    inference_image_gpu_uri: str
    inference_image_cpu_uri: str
    # Whether jobs reach the internet (NAT): an isolated VPC cannot run the staging job.
    internet_egress: bool
    # The SNS topic of the deployment's notifications; serving's idle alarms notify it.
    notification_topic_arn: str
    # The model registry's group (runs/registry.py): versions registered, approved, deployed.
    model_package_group: str
    # Absent when the deployment has FSx disabled.
    fsx_id: Optional[str] = None
    fsx_mount_name: Optional[str] = None
    fsx_datasets_path: Optional[str] = None
    fsx_pretrained_path: Optional[str] = None
    # The MLflow tracking server launches log to by default (training/tracking.py); absent when
    # the deployment has none (maskrcnn:mlflow off).
    mlflow_tracking_server_arn: Optional[str] = None

    def dataset_key_prefix(self, name: str) -> str:
        return job_io.dataset_key_prefix(self.datasets_prefix, name)

    def dataset_s3_uri(self, name: str) -> str:
        """Where the dataset `name` is staged (its `train` channel from S3)."""
        return f"s3://{self.data_bucket}/{self.dataset_key_prefix(name)}"

    def import_key_prefix(self, name: str) -> str:
        return job_io.import_key_prefix(self.imports_prefix, name)

    def import_s3_uri(self, name: str) -> str:
        """Where the user uploads the export the staging job converts into the dataset `name`."""
        return f"s3://{self.data_bucket}/{self.import_key_prefix(name)}"

    def efs_dataset_path(self, name: str) -> str:
        return f"{self.efs_datasets_path}/{job_io.check_dataset_name(name)}"

    def fsx_dataset_path(self, name: str) -> Optional[str]:
        if self.fsx_datasets_path is None:
            return None
        return f"{self.fsx_datasets_path}/{job_io.check_dataset_name(name)}"

    @property
    def checkpoints_s3_uri(self) -> str:
        """Every run's checkpoints are below it (one folder per run)."""
        return f"s3://{self.data_bucket}/{self.checkpoint_prefix}"

    @property
    def pretrained_s3_uri(self) -> str:
        return f"s3://{self.data_bucket}/{self.pretrained_prefix}"

    @property
    def samples_s3_uri(self) -> str:
        return f"s3://{self.data_bucket}/{self.samples_prefix}"

    @property
    def output_s3_uri(self) -> str:
        return f"s3://{self.data_bucket}/{self.output_prefix}"

    def tensorboard_s3_uri(self, run: str) -> str:
        """TensorBoard summaries of a run: SageMaker uploads each job's below it, in
        <job name>/tensorboard-output/ (docs/aws-rules.md TRN-2)."""
        return f"{self.output_s3_uri}{job_io.TENSORBOARD_FOLDER}{run}/"

    def checkpoint_s3_uri(self, run: str) -> str:
        """Checkpoints of a run (every job named <run>-<time> resumes from them)."""
        return f"s3://{self.data_bucket}/{self.checkpoint_prefix}{run}/"

    @property
    def fsx_enabled(self) -> bool:
        return self.fsx_id is not None


def _field_name(parameter: str) -> str:
    return parameter.replace("-", "_")


def parameter_names() -> Tuple[str, ...]:
    """The SSM parameters `load` reads: one per field of Deployment."""
    return tuple(f.name.replace("_", "-") for f in dataclasses.fields(Deployment)
                 if f.name != "ssm_path")


def resolve_ssm_path(explicit: Optional[str] = None) -> str:
    """Explicit argument, else $MASKRCNN_SSM_PATH, else ~/.maskrcnn/ssm-path, else /maskrcnn."""
    path = explicit or os.environ.get(SSM_PATH_ENV)
    if not path:
        path_file = SSM_PATH_FILE.expanduser()
        path = path_file.read_text().strip() if path_file.exists() else DEFAULT_SSM_PATH
    if not path.startswith("/"):
        raise SettingsError(f"SSM path {path!r} must start with '/', e.g. {DEFAULT_SSM_PATH}")
    return path.rstrip("/")


def from_parameters(ssm_path: str, values: Dict[str, str]) -> Deployment:
    """Builds the Deployment from {leaf name: value}; names every missing parameter at once."""
    missing = [n for n in ssm.REQUIRED if n not in values]
    if missing:
        raise SettingsError(
            f"SSM parameters missing under {ssm_path}/: {', '.join(missing)}. Is the training "
            f"stack of this deployment deployed, and is {ssm_path} its path?")
    fields: Dict[str, Any] = {"ssm_path": ssm_path}
    for name in ssm.ALL:
        if name not in values:
            continue
        value = values[name].strip()
        if name in ssm.LISTS:
            items = tuple(v.strip() for v in value.split(",") if v.strip())
            fields[_field_name(name)] = items
        elif name in ssm.BOOLEANS:
            if value not in ("true", "false"):
                raise SettingsError(f"SSM parameter {ssm_path}/{name}={value!r}: expected true "
                                    "or false")
            fields[_field_name(name)] = value == "true"
        else:
            fields[_field_name(name)] = value
    arn = fields.get("mlflow_tracking_server_arn")
    if arn is not None and not tracking.is_tracking_server_arn(arn):
        raise SettingsError(f"SSM parameter {ssm_path}/mlflow-tracking-server-arn={arn!r}: "
                            "expected a SageMaker MLflow tracking server's ARN "
                            "(arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>)")
    for prefix in ssm.PREFIXES:
        if not values[prefix].endswith("/") or values[prefix].startswith("/"):
            raise SettingsError(f"SSM parameter {ssm_path}/{prefix}={values[prefix]!r}: "
                                "expected a key prefix like 'datasets/'")
    return Deployment(**fields)


def load(ssm_client, ssm_path: Optional[str] = None) -> Deployment:
    """Reads every parameter under the path (GetParametersByPath, all pages)."""
    path = resolve_ssm_path(ssm_path)
    values: Dict[str, str] = {}
    try:
        for page in ssm_client.get_paginator("get_parameters_by_path").paginate(
                Path=path, Recursive=False, WithDecryption=True):
            for parameter in page["Parameters"]:
                values[parameter["Name"][len(path) + 1:]] = parameter["Value"]
    except ssm_client.exceptions.ClientError as error:
        # A notebook role reads its own deployment's path only: another path is refused.
        code = error.response.get("Error", {}).get("Code", "")
        if code not in ("AccessDeniedException", "AccessDenied"):
            raise
        raise SettingsError(
            f"may not read the SSM parameters under {path}/ ({code}): the notebook's role reads "
            f"its own deployment's path only. Is {path} the deployment's path? Point "
            f"{SSM_PATH_ENV} (or ~/.maskrcnn/ssm-path) at it") from None
    if not values:
        raise SettingsError(
            f"no SSM parameters under {path}/ in region {ssm_client.meta.region_name}. Deploy "
            f"the stacks, or point {SSM_PATH_ENV} (or ~/.maskrcnn/ssm-path) at the deployment's "
            "path")
    return from_parameters(path, values)


def connect(ssm_path: Optional[str] = None, boto_session=None):
    """(Deployment, boto3 Session) for the current credentials and region; the region must be the
    deployment's (its SSM `region` parameter)."""
    import boto3

    session = boto_session or boto3.session.Session()
    if not session.region_name:
        raise SettingsError("no AWS region configured: set AWS_DEFAULT_REGION (the notebook "
                            "instance has it already)")
    deployment = load(session.client("ssm"), ssm_path)
    if deployment.region != session.region_name:
        raise SettingsError(f"the deployment under {deployment.ssm_path} is in "
                            f"{deployment.region}, this session in {session.region_name}: set "
                            f"AWS_DEFAULT_REGION={deployment.region}")
    return deployment, session
