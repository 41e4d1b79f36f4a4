"""The one check of a launch: the CreateTrainingJob request as the SDK sends it, against this
deployment's policy and the rules SageMaker does not report clearly itself.

Checked: the job name prefix, the role and the VPC that the notebook role's IAM conditions allow
(a mismatch would come back as a bare AccessDenied); no volume key on instance types with local
storage (SageMaker rejects it; docs/aws-rules.md); the training job's channels (`train`
required and read-only, `pretrained` optional, FSx paths starting with the mount name); the job's
hyperparameters (with the job's own parser) and the toolkit's MPI runner. Limits that SageMaker
reports clearly by itself (name lengths, counts, id formats) are left to SageMaker.
"""

from typing import List, Mapping

from maskrcnn_contract import hyperparameters, job_io

from maskrcnn_launcher import instances
from maskrcnn_launcher.options import LaunchRequestError
from maskrcnn_launcher.settings import Deployment

TRAINING, STAGING = "training", "staging"


def _channel_problems(channels: List[Mapping], deployment: Deployment) -> List[str]:
    problems = []
    names = [c["ChannelName"] for c in channels]
    for name in names:
        if name not in job_io.TRAINING_CHANNELS:
            problems.append(f"channel {name!r} is not read by the training job; its channels "
                            f"are {', '.join(job_io.TRAINING_CHANNELS)}")
    if job_io.TRAIN_CHANNEL not in names:
        problems.append(f"the training job needs a {job_io.TRAIN_CHANNEL!r} channel; got {names}")
    for channel in channels:
        source = channel["DataSource"].get("FileSystemDataSource")
        if source is None:
            continue
        name, path = channel["ChannelName"], source.get("DirectoryPath", "")
        if source.get("FileSystemAccessMode") != "ro":
            problems.append(f"channel {name}: access mode {source.get('FileSystemAccessMode')!r}; "
                            "the inputs are shared by every job and must be mounted read-only ('ro')")
        if source.get("FileSystemType") == "FSxLustre":
            # CreateTrainingJob FileSystemDataSource: an FSx for Lustre DirectoryPath starts with
            # the file system's mount name.
            mount = deployment.fsx_mount_name or ""
            if not path.startswith(f"/{mount}/") or not mount:
                problems.append(
                    f"channel {name}: FSx directory path {path!r} must start with the file "
                    f"system's mount name, /{mount}/ (SSM {deployment.ssm_path}/fsx-mount-name "
                    f"and fsx-data-path)")
    return problems


def _hyperparameter_problems(hps: Mapping[str, str], channels: List[Mapping]) -> List[str]:
    problems = []
    try:
        parsed = hyperparameters.parse(hyperparameters.decode(hps))
        hyperparameters.check_pretrained_channel(
            parsed, any(c["ChannelName"] == job_io.PRETRAINED_CHANNEL for c in channels))
    except hyperparameters.HyperparameterError as error:
        problems.append(str(error))
    ranks = hps.get("sagemaker_mpi_num_of_processes_per_host", "")
    if hps.get("sagemaker_mpi_enabled") != "true" or not ranks.isdigit() or int(ranks) < 1:
        problems.append("the toolkit's MPI runner must be enabled (sagemaker_mpi_enabled=true, "
                        "sagemaker_mpi_num_of_processes_per_host >= 1)")
    return problems


def validate(request: Mapping, deployment: Deployment, kind: str) -> None:
    """Raises LaunchRequestError naming every problem of a CreateTrainingJob request."""
    problems: List[str] = []
    name = request["TrainingJobName"]
    if not name.startswith(deployment.job_name_prefix + "-"):
        problems.append(f"job name {name!r} must start with {deployment.job_name_prefix}- "
                        "(the notebook role may only create jobs with that prefix)")
    role = {TRAINING: deployment.training_role_arn, STAGING: deployment.staging_role_arn}[kind]
    if request["RoleArn"] != role:
        problems.append(f"role {request['RoleArn']!r} is not the deployment's {kind} role {role} "
                        "(the notebook role may pass only the deployment's job roles)")
    resources = request.get("ResourceConfig", {})
    if resources.get("VolumeKmsKeyId") and instances.has_local_storage(resources["InstanceType"]):
        problems.append(f"{resources['InstanceType']} has local NVMe storage: SageMaker rejects a "
                        "VolumeKmsKeyId for it (ResourceConfig reference); the hardware encrypts it")
    vpc = request.get("VpcConfig") or {}
    if (list(vpc.get("Subnets", [])) != list(deployment.subnet_ids)
            or list(vpc.get("SecurityGroupIds", [])) != list(deployment.security_group_ids)):
        problems.append(f"VPC config {vpc} differs from the deployment's subnet-ids and "
                        "security-group-ids (the notebook role may only create jobs inside those)")
    if kind == TRAINING:
        channels = request.get("InputDataConfig", [])
        problems += _channel_problems(channels, deployment)
        problems += _hyperparameter_problems(request.get("HyperParameters", {}), channels)
        if request.get("EnableManagedSpotTraining") and "CheckpointConfig" not in request:
            problems.append("managed spot without checkpoints would restart from step 0")
    if problems:
        raise LaunchRequestError(f"invalid {kind} job request:\n  - " + "\n  - ".join(problems))
