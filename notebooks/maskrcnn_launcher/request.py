"""Builds a CreateTrainingJob request from the deployment and the user's choices, and validates it.

The request is a plain dict in the API's own shape: what `validate` checks and what the CLI's
--dry-run prints is exactly what `submit` hands to the SageMaker SDK. Neither botocore nor moto checks
enums, id patterns or counts, so a mistake here would otherwise surface minutes later as a failed
job (or never, locally).
"""

import dataclasses
import re
import time
from typing import Dict, List, Mapping, Optional

from maskrcnn_job import hyperparameters as job_hyperparameters
from maskrcnn_job import metrics as job_metrics

from maskrcnn_launcher import instances
from maskrcnn_launcher.settings import Deployment

DATA_SOURCES = ("s3", "efs", "fsx")
# The training job's channels (training_code/README.md): `train` required, `pretrained` optional.
TRAIN_CHANNEL = "train"
PRETRAINED_CHANNEL = "pretrained"
JOB_CHANNELS = (TRAIN_CHANNEL, PRETRAINED_CHANNEL)
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
# Forwarded by mpirun to every rank: the image sets them, but ranks on other hosts start via ssh,
# which does not carry the container's environment.
DEFAULT_MPI_OPTIONS = "-x HOROVOD_FUSION_THRESHOLD -x HOROVOD_CYCLE_TIME -x NCCL_DEBUG=WARN"

_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
_FILE_SYSTEM_ID = re.compile(r"^fs-[0-9a-f]{8,21}$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8,17}$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::[0-9]{12}:role/[\w+=,.@\-/]{1,}$")
_IMAGE_URI = re.compile(r"^[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9._/\-]+[:@][\w.\-:]+$")
_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")
_FSX_MOUNT_NAME = re.compile(r"^([a-z0-9]{8}|fsx)$")
FILE_SYSTEM_TYPES = ("EFS", "FSxLustre")
ACCESS_MODES = ("ro", "rw")


class LaunchRequestError(ValueError):
    """The request would be rejected by SageMaker or fail the job; the message lists every problem."""


@dataclasses.dataclass
class LaunchOptions:
    """What the user chooses in a notebook or on the command line."""

    data_source: str = "fsx"
    instance_type: str = "ml.p4d.24xlarge"
    instance_count: int = 2
    processes_per_host: Optional[int] = None  # None: one per GPU of instance_type
    hyperparameters: Dict[str, str] = dataclasses.field(default_factory=dict)
    use_pretrained: bool = True
    use_spot: bool = False
    max_run_hours: float = 72.0
    max_wait_hours: Optional[float] = None  # spot only; None: twice max_run_hours
    volume_size_gb: int = 200  # File mode copies the S3 channel (~20 GB) onto it
    mpi_options: str = DEFAULT_MPI_OPTIONS
    job_name: Optional[str] = None  # None: <prefix>-<data source>-<UTC time>


def default_job_name(prefix: str, data_source: str, now: Optional[float] = None) -> str:
    # The SDK's own suffix format (sagemaker.train.utils._get_unique_name): submit strips it.
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(now))
    return f"{prefix}-{data_source}-{stamp}"


def _train_data_source(deployment: Deployment, data_source: str) -> dict:
    if data_source == "s3":
        return {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": deployment.data_s3_uri,
                                 "S3DataDistributionType": "FullyReplicated"}}
    if data_source == "efs":
        return {"FileSystemDataSource": {
            "FileSystemId": deployment.efs_id, "FileSystemType": "EFS",
            "FileSystemAccessMode": "ro", "DirectoryPath": deployment.efs_data_path}}
    if data_source == "fsx":
        if not deployment.fsx_enabled:
            raise LaunchRequestError(
                f"data source 'fsx': this deployment has no FSx file system (no "
                f"{deployment.ssm_path}/fsx-id parameter); deploy with maskrcnn:fsx_enabled=true "
                "or use --data-source s3 or efs")
        return {"FileSystemDataSource": {
            "FileSystemId": deployment.fsx_id, "FileSystemType": "FSxLustre",
            "FileSystemAccessMode": "ro", "DirectoryPath": deployment.fsx_data_path}}
    raise LaunchRequestError(
        f"data source {data_source!r} is not one of {', '.join(DATA_SOURCES)}")


def build_training_request(deployment: Deployment, options: LaunchOptions,
                           now: Optional[float] = None) -> dict:
    """The CreateTrainingJob request for one Mask R-CNN training run, validated."""
    ranks_per_host = instances.processes_per_host(options.instance_type, options.processes_per_host)
    job_name = options.job_name or default_job_name(
        deployment.job_name_prefix, options.data_source, now)
    channels = [{"ChannelName": TRAIN_CHANNEL,
                 "DataSource": _train_data_source(deployment, options.data_source),
                 "InputMode": "File"}]
    if options.use_pretrained:
        channels.append({"ChannelName": PRETRAINED_CHANNEL, "InputMode": "File", "DataSource": {
            "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": deployment.pretrained_s3_uri,
                             "S3DataDistributionType": "FullyReplicated"}}})
    hyperparameters = {k: str(v) for k, v in options.hyperparameters.items()}
    # The training toolkit's MPI runner: one process per GPU on every host (NOTES §2-3).
    hyperparameters.update({
        "sagemaker_mpi_enabled": "true",
        "sagemaker_mpi_num_of_processes_per_host": str(ranks_per_host),
        "sagemaker_mpi_custom_mpi_options": options.mpi_options,
    })
    max_run = int(options.max_run_hours * 3600)
    stopping = {"MaxRuntimeInSeconds": max_run}
    if options.use_spot:
        wait_hours = options.max_wait_hours or 2 * options.max_run_hours
        stopping["MaxWaitTimeInSeconds"] = int(wait_hours * 3600)
    request = {
        "TrainingJobName": job_name,
        "AlgorithmSpecification": {
            "TrainingImage": deployment.training_image_uri,
            "TrainingInputMode": "File",
            "MetricDefinitions": [dict(d) for d in job_metrics.METRIC_DEFINITIONS],
        },
        "RoleArn": deployment.training_role_arn,
        "HyperParameters": hyperparameters,
        "InputDataConfig": channels,
        "OutputDataConfig": {"S3OutputPath": deployment.output_s3_uri,
                             "KmsKeyId": deployment.kms_key_arn},
        "ResourceConfig": {"InstanceType": options.instance_type,
                           "InstanceCount": options.instance_count,
                           "VolumeSizeInGB": options.volume_size_gb,
                           "VolumeKmsKeyId": deployment.kms_key_arn},
        "VpcConfig": {"Subnets": list(deployment.subnet_ids),
                      "SecurityGroupIds": list(deployment.security_group_ids)},
        "StoppingCondition": stopping,
        "EnableManagedSpotTraining": options.use_spot,
        "CheckpointConfig": {"S3Uri": deployment.checkpoint_s3_uri(job_name),
                             "LocalPath": CHECKPOINT_LOCAL_PATH},
        "Environment": {},
    }
    validate(request, deployment, job_channels=True)
    return request


def build_staging_request(deployment: Deployment, instance_type: str = "ml.m5.4xlarge",
                          volume_size_gb: int = 200, max_run_hours: float = 12.0,
                          job_name: Optional[str] = None, now: Optional[float] = None) -> dict:
    """The COCO 2017 staging job (training_code/maskrcnn_job/stage_coco.py) in the training
    image, as the staging role: downloads, converts and uploads to the data prefix. No channels;
    it needs internet access (the NAT gateway)."""
    job_name = job_name or default_job_name(deployment.job_name_prefix, "stage-coco", now)
    request = {
        "TrainingJobName": job_name,
        "AlgorithmSpecification": {"TrainingImage": deployment.training_image_uri,
                                   "TrainingInputMode": "File", "MetricDefinitions": []},
        "RoleArn": deployment.staging_role_arn,
        "HyperParameters": {
            "sagemaker_program": "stage_coco.py",
            "s3_uri": deployment.data_s3_uri,
            # On the job's volume but outside SM_OUTPUT_DATA_DIR (which SageMaker would tar up
            # and upload: ~40 GB of archives and images).
            "work_dir": "/opt/ml/input/coco2017-work",
        },
        "InputDataConfig": [],
        "OutputDataConfig": {"S3OutputPath": deployment.output_s3_uri,
                             "KmsKeyId": deployment.kms_key_arn},
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": 1,
                           "VolumeSizeInGB": volume_size_gb,
                           "VolumeKmsKeyId": deployment.kms_key_arn},
        "VpcConfig": {"Subnets": list(deployment.subnet_ids),
                      "SecurityGroupIds": list(deployment.security_group_ids)},
        "StoppingCondition": {"MaxRuntimeInSeconds": int(max_run_hours * 3600)},
        "EnableManagedSpotTraining": False,
        "Environment": {},
    }
    validate(request, deployment, job_channels=False)
    return request


def _check_file_system(channel: str, source: Mapping, deployment: Deployment) -> List[str]:
    problems = []
    fs_id = source.get("FileSystemId", "")
    fs_type = source.get("FileSystemType")
    mode = source.get("FileSystemAccessMode")
    path = source.get("DirectoryPath", "")
    if not _FILE_SYSTEM_ID.match(fs_id):
        problems.append(f"channel {channel}: file system id {fs_id!r} does not match fs-<hex>")
    if fs_type not in FILE_SYSTEM_TYPES:
        problems.append(f"channel {channel}: file system type {fs_type!r} is not one of "
                        f"{', '.join(FILE_SYSTEM_TYPES)}")
    if mode not in ACCESS_MODES:
        problems.append(f"channel {channel}: access mode {mode!r} is not one of "
                        f"{', '.join(ACCESS_MODES)}")
    elif channel == TRAIN_CHANNEL and mode != "ro":
        problems.append(f"channel {channel}: access mode {mode!r}; the dataset is shared by every "
                        "job and must be mounted read-only ('ro')")
    if not path.startswith("/"):
        problems.append(f"channel {channel}: directory path {path!r} must be absolute")
    if fs_type == "FSxLustre":
        mount = deployment.fsx_mount_name or ""
        if not _FSX_MOUNT_NAME.match(mount):
            problems.append(f"FSx mount name {mount!r} (SSM {deployment.ssm_path}/fsx-mount-name) "
                            "is not an 8-character Lustre mount name")
        elif not path.startswith(f"/{mount}/"):
            problems.append(f"channel {channel}: FSx directory path {path!r} must start with the "
                            f"file system's mount name, /{mount}/ (e.g. /{mount}/datasets/coco2017)")
    return problems


def validate(request: Mapping, deployment: Deployment, job_channels: bool = True) -> None:
    """Raises LaunchRequestError naming every problem; `job_channels`: channels must be the
    training job's (train required, pretrained optional)."""
    problems: List[str] = []
    name = request["TrainingJobName"]
    if not _JOB_NAME.match(name):
        problems.append(f"job name {name!r}: 1-63 letters, digits and hyphens, starting and "
                        "ending with a letter or digit")
    if not name.startswith(deployment.job_name_prefix + "-"):
        problems.append(f"job name {name!r} must start with {deployment.job_name_prefix}- "
                        "(the notebook role may only create jobs with that prefix)")
    image = request["AlgorithmSpecification"]["TrainingImage"]
    if not _IMAGE_URI.match(image):
        problems.append(f"training image {image!r} is not an ECR image URI "
                        "(<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>)")
    role = request["RoleArn"]
    if not _ROLE_ARN.match(role):
        problems.append(f"role {role!r} is not an IAM role ARN")
    if role not in (deployment.training_role_arn, deployment.staging_role_arn):
        problems.append(f"role {role!r} is neither the deployment's training nor staging role "
                        "(the only roles the notebook role may pass)")
    resources = request["ResourceConfig"]
    try:
        instances.check_instance_type(resources["InstanceType"])
    except instances.InstanceTypeError as error:
        problems.append(str(error))
    if not isinstance(resources["InstanceCount"], int) or resources["InstanceCount"] < 1:
        problems.append(f"instance count {resources['InstanceCount']!r} must be an integer >= 1")
    if not 1 <= resources["VolumeSizeInGB"] <= 16384:
        problems.append(f"volume size {resources['VolumeSizeInGB']} GB must be 1-16384")

    vpc = request.get("VpcConfig") or {}
    subnets, groups = vpc.get("Subnets", []), vpc.get("SecurityGroupIds", [])
    if not 1 <= len(subnets) <= 16:
        problems.append(f"VPC config has {len(subnets)} subnets {subnets}; SageMaker takes 1-16 "
                        f"(SSM {deployment.ssm_path}/subnet-ids)")
    if not 1 <= len(groups) <= 5:
        problems.append(f"VPC config has {len(groups)} security groups {groups}; SageMaker takes "
                        f"1-5 (SSM {deployment.ssm_path}/security-group-ids)")
    problems += [f"subnet id {s!r} does not match subnet-<hex>" for s in subnets
                 if not _SUBNET_ID.match(s)]
    problems += [f"security group id {g!r} does not match sg-<hex>" for g in groups
                 if not _SECURITY_GROUP_ID.match(g)]
    if (list(subnets) != list(deployment.subnet_ids)
            or list(groups) != list(deployment.security_group_ids)):
        problems.append("VPC config differs from the deployment's subnet-ids/security-group-ids "
                        "(the notebook role may only create jobs inside those)")

    channels = request["InputDataConfig"]
    names = [c["ChannelName"] for c in channels]
    for channel in channels:
        cname = channel["ChannelName"]
        if not _CHANNEL_NAME.match(cname):
            problems.append(f"channel name {cname!r}: 1-64 of letters, digits, '.', '-', '_'")
        if job_channels and cname not in JOB_CHANNELS:
            problems.append(f"channel {cname!r} is not read by the training job; its channels "
                            f"are {', '.join(JOB_CHANNELS)}")
        source = channel["DataSource"]
        if "FileSystemDataSource" in source:
            problems += _check_file_system(cname, source["FileSystemDataSource"], deployment)
        else:
            uri = source["S3DataSource"]["S3Uri"]
            if not _S3_URI.match(uri):
                problems.append(f"channel {cname}: {uri!r} is not an s3:// URI")
    if len(set(names)) != len(names):
        problems.append(f"channel names repeat: {names}")
    if job_channels and TRAIN_CHANNEL not in names:
        problems.append(f"the training job needs a {TRAIN_CHANNEL!r} channel; got {names}")

    hps = request["HyperParameters"]
    if len(hps) > 100:
        problems.append(f"{len(hps)} hyperparameters; SageMaker takes at most 100")
    problems += [f"hyperparameter {k}: value longer than 2500 characters" for k, v in hps.items()
                 if len(v) > 2500]
    if job_channels:
        try:
            job_hyperparameters.parse(hps)
        except job_hyperparameters.HyperparameterError as error:
            problems.append(str(error))
        ranks = hps.get("sagemaker_mpi_num_of_processes_per_host", "")
        if hps.get("sagemaker_mpi_enabled") != "true" or not ranks.isdigit() or int(ranks) < 1:
            problems.append("the toolkit's MPI runner must be enabled (sagemaker_mpi_enabled=true, "
                            "sagemaker_mpi_num_of_processes_per_host >= 1)")

    stopping = request["StoppingCondition"]
    if not 1 <= stopping["MaxRuntimeInSeconds"] <= 28 * 24 * 3600:
        problems.append(f"max run time {stopping['MaxRuntimeInSeconds']} s must be 1 s to 28 days")
    if request["EnableManagedSpotTraining"]:
        wait = stopping.get("MaxWaitTimeInSeconds")
        if wait is None or wait < stopping["MaxRuntimeInSeconds"]:
            problems.append(f"managed spot: max wait time {wait} s must be >= the max run time "
                            f"{stopping['MaxRuntimeInSeconds']} s")
        if "CheckpointConfig" not in request:
            problems.append("managed spot without checkpoints would restart from step 0")
    checkpoint = request.get("CheckpointConfig")
    if checkpoint and not _S3_URI.match(checkpoint["S3Uri"]):
        problems.append(f"checkpoint location {checkpoint['S3Uri']!r} is not an s3:// URI")
    if problems:
        raise LaunchRequestError("invalid training job request:\n  - " + "\n  - ".join(problems))
