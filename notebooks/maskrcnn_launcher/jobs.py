"""The SageMaker SDK 3 objects of a launch, built once from the deployment and the user's options.

A launch is a `ModelTrainer` (the training image, the toolkit's hyperparameters of its
distribution, the deployment's VPC, roles, bucket and key) plus what the launcher must know
before it is sent: its kind and its run name. The SDK names the job `<run name>-<time>` when it
sends it; everything that depends on the name (the checkpoint location) is derived from the run
name, so nothing is renamed afterwards.
`submit.send` validates the request the SDK actually sends.
"""

import dataclasses
import os
import re
import secrets
from typing import Callable, Optional

from maskrcnn_contract import job_io, metrics
from maskrcnn_contract.hyperparameters import Hyperparameters

from maskrcnn_launcher import inputs, instances, submit, validation
from maskrcnn_launcher.options import DATA_SOURCES, LaunchOptions, LaunchRequestError
from maskrcnn_launcher.settings import Deployment
from maskrcnn_launcher.validation import STAGING, TRAINING

# The launcher checks the role itself (it must be the deployment's training or staging role).
# The SDK's own check needs iam:SimulatePrincipalPolicy and iam:GetRole, which the notebook role
# does not have (least privilege), so it could only print warnings.
os.environ.setdefault("SAGEMAKER_VALIDATE_ROLE", "false")

# Imported after the line above; the SDK is large (~2 s to import).
from sagemaker.core.helper.session_helper import Session  # noqa: E402
from sagemaker.core.training.configs import (  # noqa: E402
    CheckpointConfig, Compute, FileSystemDataSource, InputData, MetricDefinition, Networking,
    OutputDataConfig, S3DataSource, StoppingCondition)
from sagemaker.train import ModelTrainer  # noqa: E402

_RUN_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# The SDK appends "-YYYYmmddHHMMSS" and cuts the name at SageMaker's 63 characters: a longer base
# would lose the time stamp that keeps job names unique.
MAX_BASE_NAME = 63 - 15


@dataclasses.dataclass(frozen=True)
class Launch:
    trainer: ModelTrainer
    kind: str                                 # TRAINING or STAGING
    base_job_name: str                        # the job is named <base_job_name>-<time>
    checkpoint_s3_uri: Optional[str] = None   # shared by every job of the run


def sagemaker_session(boto_session, deployment: Deployment) -> Session:
    """A session whose default bucket is the deployment's: the notebook role may not create the
    SDK's `sagemaker-<region>-<account>` bucket, and nothing should land outside the prefixes.
    The launcher's check of outgoing requests is registered first, before the SDK's clients."""
    submit.watch(boto_session)
    return Session(boto_session=boto_session, default_bucket=deployment.data_bucket,
                   default_bucket_prefix=deployment.output_prefix.rstrip("/"))


def _s3_channel(name: str, uri: str) -> InputData:
    return InputData(channel_name=name, data_source=S3DataSource(
        s3_data_type="S3Prefix", s3_uri=uri, s3_data_distribution_type="FullyReplicated"))


def _channel(deployment: Deployment, data_source: str, name: str, s3_uri: str,
             efs_path: str, fsx_path: Optional[str]) -> InputData:
    """One input, read-only, from the launch's data source: every job of the deployment shares
    it. The file systems hold the bucket's prefixes at the same relative paths."""
    if data_source == "s3":
        return _s3_channel(name, s3_uri)
    if data_source == "efs":
        fs_id, fs_type, path = deployment.efs_id, "EFS", efs_path
    elif data_source == "fsx":
        if not deployment.fsx_enabled:
            raise LaunchRequestError(
                f"data source 'fsx': this deployment has no FSx file system (no "
                f"{deployment.ssm_path}/fsx-id parameter); deploy with maskrcnn:fsx_enabled=true "
                "or use data source s3 or efs")
        fs_id, fs_type, path = deployment.fsx_id, "FSxLustre", fsx_path
    else:
        raise LaunchRequestError(
            f"data source {data_source!r} is not one of {', '.join(DATA_SOURCES)}")
    return InputData(channel_name=name, data_source=FileSystemDataSource(
        file_system_id=fs_id, file_system_type=fs_type, file_system_access_mode="ro",
        directory_path=path))


def input_channels(deployment: Deployment, data_source: str, backbone: Optional[str]) -> list:
    """The `train` channel and, with a backbone, its checkpoint as the `pretrained` channel."""
    channels = [_channel(deployment, data_source, job_io.TRAIN_CHANNEL, deployment.data_s3_uri,
                         deployment.efs_data_path, deployment.fsx_data_path)]
    if backbone:
        below = job_io.pretrained_key_prefix("", backbone).rstrip("/")
        channels.append(_channel(
            deployment, data_source, job_io.PRETRAINED_CHANNEL,
            f"{deployment.pretrained_s3_uri}{below}/", f"{deployment.efs_pretrained_path}/{below}",
            deployment.fsx_pretrained_path and f"{deployment.fsx_pretrained_path}/{below}"))
    return channels


def _channel_location(channel: dict) -> str:
    source = channel["DataSource"]
    if "S3DataSource" in source:
        return source["S3DataSource"]["S3Uri"]
    fs = source["FileSystemDataSource"]
    return f"{fs['FileSystemType']} {fs['FileSystemId']}:{fs['DirectoryPath']}"


def _distribution(request: dict) -> str:
    """How the request's hosts run the job, from the hyperparameters it carries."""
    hps = request.get("HyperParameters", {})
    distribution = hps.get("distribution", Hyperparameters.distribution)
    resources = request.get("ResourceConfig", {})
    on = f"on {resources.get('InstanceCount')} x {resources.get('InstanceType')}"
    if distribution == validation.HOROVOD:
        ranks = hps.get("sagemaker_mpi_num_of_processes_per_host", "?")
        return f"{distribution}, {ranks} ranks per host (one per GPU) {on}"
    line = f"{distribution}, 1 process per host {on}"
    if distribution == validation.PARAMETER_SERVER:
        line += ": a worker and a parameter server on each, the coordinator on the first"
    return line


def describe_inputs(request: dict) -> list:
    """Lines saying what a CreateTrainingJob request trains from and how: the dataset, the
    backbone and its checkpoint, the batch-norm mode and the distribution over the instances."""
    hps = request.get("HyperParameters", {})
    channels = {c["ChannelName"]: c for c in request.get("InputDataConfig", [])}
    backbone = hps.get("backbone", Hyperparameters.backbone)
    pretrained = channels.get(job_io.PRETRAINED_CHANNEL)
    return [
        f"dataset:      {_channel_location(channels[job_io.TRAIN_CHANNEL])}",
        f"backbone:     {backbone}, ImageNet checkpoint from "
        f"{_channel_location(pretrained) if pretrained else 'nowhere (trained from scratch)'}",
        f"batch norm:   {hps.get('batch_norm', Hyperparameters.batch_norm)}",
        f"distribution: {_distribution(request)}",
    ]


def base_job_name(deployment: Deployment, run_name: str) -> str:
    if not _RUN_NAME.match(run_name):
        raise LaunchRequestError(f"run name {run_name!r}: lowercase letters and digits in groups "
                                 "joined by single hyphens, e.g. 'fsx-baseline-1'")
    base = f"{deployment.job_name_prefix}-{run_name}"
    if len(base) > MAX_BASE_NAME:
        raise LaunchRequestError(
            f"run name {run_name!r}: '{base}' is {len(base)} characters; at most {MAX_BASE_NAME} "
            "leave room for the time stamp SageMaker job names get")
    return base


def _trainer(deployment: Deployment, boto_session, *, role: str, base: str, instance_type: str,
             instance_count: int, volume_size_gb: int, stopping: StoppingCondition,
             use_spot: bool, hyperparameters: dict, channels: list,
             checkpoint_s3_uri: Optional[str]) -> ModelTrainer:
    """What every job of the deployment shares: image, VPC, output location, KMS key."""
    trainer = ModelTrainer(
        sagemaker_session=sagemaker_session(boto_session, deployment),
        role=role,
        base_job_name=base,
        training_image=deployment.training_image_uri,
        training_input_mode="File",
        compute=Compute(instance_type=instance_type, instance_count=instance_count,
                        volume_size_in_gb=volume_size_gb,
                        # Local NVMe is encrypted by the instance's hardware, and SageMaker
                        # rejects a volume key for it (docs/aws-rules.md).
                        volume_kms_key_id=(None if instances.has_local_storage(instance_type)
                                           else deployment.kms_key_arn),
                        enable_managed_spot_training=use_spot),
        networking=Networking(subnets=list(deployment.subnet_ids),
                              security_group_ids=list(deployment.security_group_ids)),
        stopping_condition=stopping,
        output_data_config=OutputDataConfig(s3_output_path=deployment.output_s3_uri,
                                            kms_key_id=deployment.kms_key_arn),
        checkpoint_config=(CheckpointConfig(s3_uri=checkpoint_s3_uri,
                                            local_path=job_io.CHECKPOINT_LOCAL_PATH)
                           if checkpoint_s3_uri else None),
        hyperparameters=hyperparameters,
        input_data_config=channels or None,
    )
    return trainer


def processes_per_host(distribution: str, options: LaunchOptions) -> int:
    """Processes the toolkit starts on every host: one Horovod rank per GPU (mpirun), or one
    process using all the host's GPUs for the tf.distribute strategies."""
    if distribution == validation.HOROVOD:
        return instances.processes_per_host(options.instance_type, options.processes_per_host)
    instances.check_instance_type(options.instance_type)
    return 1


def training_job(deployment: Deployment, options: LaunchOptions, boto_session,
                 echo: Callable[[str], None] = print) -> Launch:
    """One Mask R-CNN training run, distributed as `options.distribution` says: the toolkit's
    MPI runner with one rank per GPU on every host (horovod), or one process per host (the
    toolkit's TF_CONFIG for multi_worker_mirrored; the job's own cluster for parameter_server).
    Raises LaunchRequestError when the options contradict each other (`validation`) or the
    inputs are not staged (`inputs`)."""
    distribution = validation.distribution_of(options)
    ranks_per_host = processes_per_host(distribution, options)
    run_name = options.run_name or f"{options.data_source}-{secrets.token_hex(3)}"
    base = base_job_name(deployment, run_name)
    # Refused here, before anything is sent, when the dataset or the backbone is not staged.
    hyperparameters = inputs.check_training_inputs(boto_session.client("s3"), deployment, options,
                                                   distribution, echo=echo)
    backbone = inputs.effective_hyperparameters(options).backbone
    channels = input_channels(deployment, options.data_source,
                              backbone if options.use_pretrained else None)
    hyperparameters["distribution"] = distribution
    hyperparameters.update(job_io.distribution_hyperparameters(distribution, ranks_per_host,
                                                               options.mpi_options))
    max_run = int(options.max_run_hours * 3600)
    max_wait = None
    if options.use_spot:
        max_wait = int((options.max_wait_hours or 2 * options.max_run_hours) * 3600)
    checkpoints = deployment.checkpoint_s3_uri(base)
    trainer = _trainer(
        deployment, boto_session, role=deployment.training_role_arn, base=base,
        instance_type=options.instance_type, instance_count=options.instance_count,
        volume_size_gb=options.volume_size_gb,
        stopping=StoppingCondition(max_runtime_in_seconds=max_run,
                                   max_wait_time_in_seconds=max_wait),
        use_spot=options.use_spot, hyperparameters=hyperparameters, channels=channels,
        checkpoint_s3_uri=checkpoints)
    trainer = trainer.with_metric_definitions(
        [MetricDefinition(name=d["Name"], regex=d["Regex"]) for d in metrics.METRIC_DEFINITIONS])
    return Launch(trainer, TRAINING, base, checkpoints)


def staging_job(deployment: Deployment, boto_session, instance_type: str = "ml.m5.4xlarge",
                volume_size_gb: int = 200, max_run_hours: float = 12.0) -> Launch:
    """The COCO 2017 staging job (training_code/maskrcnn_job/staging/stage_coco.py) in the training
    image, as the staging role: fetches the ImageNet backbone checkpoint into the pretrained
    prefix, downloads and converts COCO into the data prefix (each skipped when staged). No
    channels; it needs internet access (the NAT gateway)."""
    base = f"{deployment.job_name_prefix}-stage-coco"
    trainer = _trainer(
        deployment, boto_session, role=deployment.staging_role_arn, base=base,
        instance_type=instance_type, instance_count=1, volume_size_gb=volume_size_gb,
        stopping=StoppingCondition(max_runtime_in_seconds=int(max_run_hours * 3600)),
        use_spot=False, channels=[], checkpoint_s3_uri=None,
        hyperparameters={
            "sagemaker_program": job_io.STAGING_PROGRAM,
            job_io.STAGING_S3_URI: deployment.data_s3_uri,
            job_io.STAGING_PRETRAINED_S3_URI: deployment.pretrained_s3_uri,
            job_io.STAGING_BACKBONES: ",".join(job_io.STAGED_BACKBONES),
            # On the job's volume but outside SM_OUTPUT_DATA_DIR (which SageMaker would tar up
            # and upload: ~40 GB of archives and images).
            job_io.STAGING_WORK_DIR: "/opt/ml/input/coco2017-work",
        })
    return Launch(trainer, STAGING, base)
