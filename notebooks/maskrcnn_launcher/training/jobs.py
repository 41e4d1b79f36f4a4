"""The SageMaker SDK 3 objects of a launch, built from its plan.

A training launch is resolved once (`plan.training_plan`: distribution, ranks per host,
hyperparameters, channels, names); this module turns the plan into a `ModelTrainer` (the training
image, the deployment's VPC, roles, bucket and key) on a session whose outgoing request is
checked (`session`). The SDK names the job `<run name>-<time>` when it sends it; everything that
depends on the name (the checkpoint location) is derived from the run name, so nothing is renamed
afterwards. `submit.send` sends it.
"""

from typing import Callable, Optional

from maskrcnn_contract import job_io, labeling, metrics
from maskrcnn_contract.hyperparameters import Hyperparameters

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.training import tracking
from maskrcnn_launcher.training.options import (
    HOROVOD,
    PARAMETER_SERVER,
    LaunchOptions,
    LaunchRequestError,
)
from maskrcnn_launcher.training.plan import MAX_BASE_NAME, STAGING_RUN, Channel, training_plan
from maskrcnn_launcher.training.session import Launch, sagemaker_session
from maskrcnn_launcher.training.validation import STAGING, TRAINING

# isort: split
# After `session`, which sets the SDK's environment before the SDK is first imported.
from sagemaker.core.training.configs import (
    CheckpointConfig,
    Compute,
    FileSystemDataSource,
    InputData,
    MetricDefinition,
    Networking,
    OutputDataConfig,
    S3DataSource,
    StoppingCondition,
    TensorBoardOutputConfig,
)
from sagemaker.train import ModelTrainer


def _input_data(channel: Channel) -> InputData:
    if channel.file_system_type is None:
        return InputData(channel_name=channel.name, data_source=S3DataSource(
            s3_data_type="S3Prefix", s3_uri=channel.location,
            s3_data_distribution_type="FullyReplicated"))
    # Read-only: every job of the deployment shares the file system's inputs.
    return InputData(channel_name=channel.name, data_source=FileSystemDataSource(
        file_system_id=channel.file_system_id, file_system_type=channel.file_system_type,
        file_system_access_mode="ro", directory_path=channel.location))


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
    if distribution == HOROVOD:
        ranks = hps.get(job_io.MPI_PROCESSES_PER_HOST, "?")
        return f"{distribution}, {ranks} ranks per host (one per GPU) {on}"
    line = f"{distribution}, 1 process per host {on}"
    if distribution == PARAMETER_SERVER:
        line += ": a worker and a parameter server on each, the coordinator on the first"
    return line


INPUT_MODE_LINES = {
    "FastFile": "FastFile: streamed from S3 as the job reads it, no copy before the start",
    "File": "File: copied from S3 onto every instance before the job starts",
}


def _input_mode(request: dict) -> str:
    mode = request.get("AlgorithmSpecification", {}).get("TrainingInputMode", "File")
    channels = request.get("InputDataConfig", [])
    if channels and all("FileSystemDataSource" in c["DataSource"] for c in channels):
        return "File: the file system is mounted, nothing copied"
    return INPUT_MODE_LINES.get(mode, mode)


def describe_inputs(request: dict) -> list:
    """Lines saying what a CreateTrainingJob request trains from and how: the dataset and how it
    is read, the backbone and its checkpoint, the batch-norm mode, the distribution over the
    instances, where TensorBoard's summaries go, where MLflow logs the run, and a warm pool if
    one is asked for."""
    hps = request.get("HyperParameters", {})
    channels = {c["ChannelName"]: c for c in request.get("InputDataConfig", [])}
    backbone = hps.get("backbone", Hyperparameters.backbone)
    pretrained = channels.get(job_io.PRETRAINED_CHANNEL)
    init = channels.get(job_io.INIT_CHANNEL)
    if init:
        start = f"the earlier run's checkpoints in {_channel_location(init)} (fine-tuning)"
    elif pretrained:
        start = f"ImageNet checkpoint from {_channel_location(pretrained)}"
    else:
        start = "ImageNet checkpoint from nowhere (trained from scratch)"
    lines = [
        f"dataset:      {_channel_location(channels[job_io.TRAIN_CHANNEL])}",
        f"input mode:   {_input_mode(request)}",
        f"backbone:     {backbone}, {start}",
        f"batch norm:   {hps.get('batch_norm', Hyperparameters.batch_norm)}",
        f"distribution: {_distribution(request)}",
    ]
    tensorboard = request.get("TensorBoardOutputConfig")
    if tensorboard:
        lines.append(f"tensorboard:  {tensorboard['S3OutputPath']} (uploaded while the job runs)")
    logged = tracking.describe(request)
    if logged:
        lines.append(logged)
    keep = request.get("ResourceConfig", {}).get("KeepAlivePeriodInSeconds")
    if keep:
        lines.append(f"warm pool:    instances kept {keep} s after the job for the next job of "
                     "the same shape (billed while kept)")
    return lines


def _trainer(deployment: Deployment, boto_session, *, role: str, base: str, instance_type: str,
             instance_count: int, volume_size_gb: int, stopping: StoppingCondition,
             use_spot: bool, hyperparameters: dict, channels: list,
             checkpoint_s3_uri: Optional[str],
             environment: Optional[dict] = None, input_mode: str = "File",
             keep_alive_seconds: int = 0) -> ModelTrainer:
    """What every job of the deployment shares: image, VPC, output location, KMS key."""
    compute = dict(instance_type=instance_type, instance_count=instance_count,
                   volume_size_in_gb=volume_size_gb,
                   # Local NVMe is encrypted by the instance's hardware, and SageMaker
                   # rejects a volume key for it (docs/aws-rules.md SM-1).
                   volume_kms_key_id=(None if instances.has_local_storage(instance_type)
                                      else deployment.kms_key_arn),
                   enable_managed_spot_training=use_spot)
    if keep_alive_seconds:  # ResourceConfig KeepAlivePeriodInSeconds (TRN-3)
        compute["keep_alive_period_in_seconds"] = keep_alive_seconds
    trainer = ModelTrainer(
        sagemaker_session=sagemaker_session(boto_session, deployment),
        role=role,
        base_job_name=base,
        training_image=deployment.training_image_uri,
        # The job's channels' mode (AlgorithmSpecification TrainingInputMode, TRN-1).
        training_input_mode=input_mode,
        compute=Compute(**compute),
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
        environment=environment or {},
    )
    return trainer


def training_job(deployment: Deployment, options: LaunchOptions, boto_session,
                 echo: Callable[[str], None] = print) -> Launch:
    """One Mask R-CNN training run, distributed as `options.distribution` says: the toolkit's
    MPI runner with one rank per GPU on every host (horovod), or one process per host (the
    toolkit's TF_CONFIG for multi_worker_mirrored; the job's own cluster for parameter_server).
    Raises LaunchRequestError when the launch cannot go out (`plan`); echoes the plan's notes."""
    plan = training_plan(deployment, options, boto_session.client("s3"),
                         boto_session.client("sagemaker"))
    for note in plan.notes:
        echo(note)
    trainer = _trainer(
        deployment, boto_session, role=deployment.training_role_arn, base=plan.base_job_name,
        instance_type=options.instance_type, instance_count=options.instance_count,
        volume_size_gb=options.volume_size_gb,
        stopping=StoppingCondition(max_runtime_in_seconds=plan.max_run_seconds,
                                   max_wait_time_in_seconds=plan.max_wait_seconds),
        use_spot=options.use_spot, hyperparameters=dict(plan.sent_hyperparameters),
        channels=[_input_data(channel) for channel in plan.channels],
        checkpoint_s3_uri=plan.checkpoint_s3_uri, input_mode=plan.input_mode,
        keep_alive_seconds=plan.keep_alive_seconds, environment=dict(plan.environment))
    trainer = trainer.with_metric_definitions(
        [MetricDefinition(name=d["Name"], regex=d["Regex"]) for d in metrics.METRIC_DEFINITIONS])
    # SageMaker uploads what the job writes below LocalPath to S3 while it runs (TRN-2).
    trainer = trainer.with_tensorboard_output_config(TensorBoardOutputConfig(
        s3_output_path=plan.tensorboard_s3_uri, local_path=job_io.TENSORBOARD_LOCAL_PATH))
    return Launch(trainer, TRAINING, plan.base_job_name, plan.checkpoint_s3_uri, plan)


def staging_job_name(deployment: Deployment, dataset: str) -> str:
    """The staging job's base name, <prefix>-stage-<dataset>, cut to leave room for the time
    stamp (SM-5); its dataset hyperparameter says which dataset it stages in any case."""
    return f"{deployment.job_name_prefix}-{STAGING_RUN}-{dataset}"[:MAX_BASE_NAME].rstrip("-")


def staging_job(deployment: Deployment, boto_session, dataset: str = job_io.DEFAULT_DATASET,
                val_fraction: float = job_io.DEFAULT_VAL_FRACTION,
                split_seed: int = job_io.DEFAULT_SPLIT_SEED, crowd_as_instances: bool = False,
                boxes_without_mask: str = labeling.REFUSE,
                strict: bool = False, stage_backbone: bool = True,
                instance_type: str = "ml.m5.4xlarge", volume_size_gb: int = 200,
                max_run_hours: float = 12.0) -> Launch:
    """The staging job (training_code/maskrcnn_job/staging/stage_dataset.py) in the training
    image, as the staging role: fetches the ImageNet backbone checkpoint into the pretrained
    prefix (unless `stage_backbone` is False), then stages the dataset: COCO 2017 downloaded from
    its archives, any other converted from the export below <imports prefix><dataset>/ (each
    skipped when staged). No channels. A job that downloads is refused in a deployment without
    internet egress (docs/aws-rules.md SM-15). `boxes_without_mask`: what the converter does with
    an export's boxes without a mask (maskrcnn_contract.labeling; refused by default)."""
    job_io.check_dataset_name(dataset)
    try:
        labeling.check_boxes_without_mask(boxes_without_mask)
    except ValueError as error:
        raise LaunchRequestError(str(error)) from None
    downloads = [what for what, needed in (("COCO 2017", dataset == job_io.DEFAULT_DATASET),
                                           ("the backbone", stage_backbone)) if needed]
    if downloads and not deployment.internet_egress:
        command = (f"  .venv/bin/python training_code/{job_io.STAGING_PROGRAM} --dataset {dataset} "
                   f"--s3-uri {deployment.dataset_s3_uri(dataset)} "
                   + ("" if dataset == job_io.DEFAULT_DATASET
                      else f"--import-s3-uri {deployment.import_s3_uri(dataset)} ")
                   + f"--pretrained-s3-uri {deployment.pretrained_s3_uri}")
        raise LaunchRequestError(
            f"the staging job downloads {' and '.join(downloads)} from the internet, and this "
            f"deployment's VPC has none (SSM {deployment.ssm_path}/internet-egress=false: "
            "maskrcnn:nat_gateways=0). Stage from a machine with internet access and credentials "
            "that may write the bucket, from a clone of this repository after `make setup`:\n"
            f"{command}\n"
            "then copy it to EFS with `python -m maskrcnn_launcher sync-efs` (FSx imports it by "
            "itself)" + ("" if dataset == job_io.DEFAULT_DATASET else
                         "; or, once the backbone is staged, stage this dataset here with the "
                         "backbone step left out (stage_backbone=False, --no-backbone)"))
    hyperparameters = {
        job_io.STAGING_DATASET: dataset,
        job_io.STAGING_S3_URI: deployment.dataset_s3_uri(dataset),
        job_io.STAGING_WORK_DIR: job_io.STAGING_CONTAINER_WORK_DIR,
    }
    if dataset != job_io.DEFAULT_DATASET:
        hyperparameters.update({
            job_io.STAGING_IMPORT_S3_URI: deployment.import_s3_uri(dataset),
            job_io.STAGING_VAL_FRACTION: str(val_fraction),
            job_io.STAGING_SPLIT_SEED: str(split_seed),
            job_io.STAGING_CROWD_AS_INSTANCES: str(bool(crowd_as_instances)).lower(),
        })
        if boxes_without_mask != labeling.REFUSE:  # the job's default
            hyperparameters[labeling.BOXES_WITHOUT_MASK] = boxes_without_mask
    if strict:
        hyperparameters[job_io.STAGING_STRICT] = "true"
    if stage_backbone:
        hyperparameters.update({
            job_io.STAGING_PRETRAINED_S3_URI: deployment.pretrained_s3_uri,
            job_io.STAGING_BACKBONES: ",".join(job_io.STAGED_BACKBONES),
        })
    base = staging_job_name(deployment, dataset)
    trainer = _trainer(
        deployment, boto_session, role=deployment.staging_role_arn, base=base,
        instance_type=instance_type, instance_count=1, volume_size_gb=volume_size_gb,
        stopping=StoppingCondition(max_runtime_in_seconds=int(max_run_hours * 3600)),
        use_spot=False, channels=[], checkpoint_s3_uri=None,
        # The image's ENV names train.py, and the toolkit reads the program from the environment
        # before the hyperparameter (docs/aws-rules.md SM-14): the request's Environment, which
        # overrides the image's, is what starts the staging program.
        environment={job_io.PROGRAM_ENV: job_io.STAGING_PROGRAM},
        hyperparameters=hyperparameters)
    return Launch(trainer, STAGING, base)
