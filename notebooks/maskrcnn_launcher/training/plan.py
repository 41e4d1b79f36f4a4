"""A training launch resolved once, before anything is built or sent.

`training_plan` reads the user's options and hyperparameters once and decides everything a launch
depends on: the distribution (the option or the `distribution` hyperparameter, given twice they must
agree), Horovod's ranks per host, the hyperparameters parsed as the job will parse them, the
dictionary sent, the input channels and how they are read, the run's names, checkpoint and
TensorBoard locations, and what to tell the user. Refused here (LaunchRequestError,
InstanceTypeError), naming each bad value: options SageMaker would refuse or the SDK would drop
(`options.option_problems`: a count, volume or run time of 0, a negative run time, a spot wait
shorter than the run), what the request could no longer show (a strategy given twice, Horovod's
settings with another, a toolkit hyperparameter of the user's that the launcher's would replace), a
hyperparameter named like SageMaker's or its toolkit's, a bad run name, hyperparameters the job's
parser rejects, inputs not staged (`inputs`), a warmup or evaluation period that the run's length
(the staged dataset's training images, the replicas) would not keep (`run_length_notes`), a data
source the deployment lacks, an input mode or warm pool that cannot work (FastFile for a file
system, a warm pool with spot). The request built from the plan is checked again as it is sent
(`validation`, through `session`).

No SageMaker SDK here: `jobs` turns a plan into the SDK's ModelTrainer.
"""

import dataclasses
import re
import secrets
from typing import Dict, List, Optional, Tuple

from maskrcnn_contract import hyperparameters, job_io
from maskrcnn_contract.hyperparameters import Hyperparameters

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.training import init_from, inputs, tracking, validation
from maskrcnn_launcher.training.options import (
    DATA_SOURCES,
    DEFAULT_DISTRIBUTION,
    FAST_FILE,
    FILE,
    HOROVOD,
    MWMS,
    PARAMETER_SERVER,
    LaunchOptions,
    LaunchRequestError,
    option_problems,
)

# The split a job trains on, in dataset_info.json's `splits` (the job's data/layout.py TRAIN).
TRAIN_SPLIT = "train"
_RUN_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# Staging jobs are named <prefix>-stage-<dataset>-<time> (jobs.staging_job): a run may not look so.
STAGING_RUN = "stage"
# The SDK appends "-YYYYmmddHHMMSS" and cuts the name at SageMaker's 63 characters: a longer base
# would lose the time stamp that keeps job names unique.
MAX_BASE_NAME = 63 - 15
FROM_SCRATCH_WARNING = (
    "warning: no pretrained backbone; the backbone starts from random weights. The reference "
    "box AP ~37.7 / mask AP ~33.9 after 12 epochs starts from ImageNet weights; from scratch, "
    "Mask R-CNN needs about 3x longer schedules and synchronized batch norm to catch up (He et "
    "al. 2018, 'Rethinking ImageNet Pre-training').")


@dataclasses.dataclass(frozen=True)
class Channel:
    """One input of the job, as SageMaker reads it: an S3 prefix, or a directory of the
    deployment's EFS or FSx file system."""

    name: str  # one of job_io.TRAINING_CHANNELS
    location: str  # the S3 URI, or the directory path in the file system
    file_system_type: Optional[str] = None  # None for S3; "EFS" or "FSxLustre"
    file_system_id: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """Everything a training launch depends on, decided once; `jobs.training_job` builds the
    request from it."""

    distribution: str
    ranks_per_host: int  # processes the toolkit starts on every host
    hyperparameters: Hyperparameters  # as the job will parse what is sent
    sent_hyperparameters: Dict[str, object]  # the user's, batch_norm, distribution, toolkit's
    dataset: str  # the staged dataset the `train` channel reads
    channels: Tuple[Channel, ...]
    run_name: str
    base_job_name: str  # the job is named <base_job_name>-<time>
    checkpoint_s3_uri: str  # shared by every job of the run
    # How the job reads its channels: FastFile (S3, streamed) or File (S3 copied at the start,
    # or a file system mounted), docs/aws-rules.md TRN-1.
    input_mode: str
    # Where SageMaker uploads the job's TensorBoard summaries while it runs (TRN-2): one folder
    # per run, below the deployment's output prefix.
    tensorboard_s3_uri: str
    keep_alive_seconds: int  # managed warm pool after the job; 0: none (TRN-3)
    max_run_seconds: int
    max_wait_seconds: Optional[int]  # managed spot only
    notes: Tuple[str, ...]  # the warnings and the choices made for the user, to show
    init: Optional[init_from.InitSource] = None  # the earlier run a fine-tune starts from
    # The request's Environment: MLflow's variables when the run is logged (tracking.py).
    environment: Dict[str, str] = dataclasses.field(default_factory=dict)


def distribution_of(options: LaunchOptions, decoded: Dict[str, object]) -> str:
    """The launch's distribution: `options.distribution`, else the `distribution` hyperparameter
    (`decoded`: the user's, decoded), else horovod. Raises LaunchRequestError for what the request
    could no longer show: two different values, an unknown one, and Horovod's own settings with
    another distribution."""
    problems = []
    chosen = options.distribution
    given = decoded.get("distribution")
    if given is not None:
        given = str(given)
    if chosen is not None and given is not None and chosen != given:
        problems.append(
            f"distribution {chosen!r} (--distribution, distribution= or DISTRIBUTION in a "
            f"notebook) and the hyperparameter distribution={given!r} differ: give the strategy "
            "once")
    distribution = chosen or given or DEFAULT_DISTRIBUTION
    if distribution not in hyperparameters.DISTRIBUTIONS:
        problems.append(f"distribution {distribution!r}: expected one of "
                        f"{', '.join(hyperparameters.DISTRIBUTIONS)}")
    elif distribution != HOROVOD:
        if options.processes_per_host not in (None, 1):
            problems.append(
                f"processes per host {options.processes_per_host} (--processes-per-host) sets "
                f"Horovod's ranks per instance; distribution={distribution} runs one process per "
                "host that uses all its GPUs: leave it unset, or choose distribution=horovod")
        if options.mpi_options != job_io.DEFAULT_MPI_OPTIONS:
            problems.append(
                f"mpi_options {options.mpi_options!r} are mpirun's, and only distribution=horovod "
                f"starts mpirun; distribution={distribution} would ignore them: leave them unset, "
                "or choose distribution=horovod")
    if problems:
        raise LaunchRequestError("invalid launch:\n  - " + "\n  - ".join(problems))
    return distribution


def ranks_per_host(distribution: str, options: LaunchOptions) -> int:
    """Processes the toolkit starts on every host: one Horovod rank per GPU (mpirun), or one
    process using all the host's GPUs for the tf.distribute strategies."""
    if distribution == HOROVOD:
        return instances.processes_per_host(options.instance_type, options.processes_per_host)
    instances.check_instance_type(options.instance_type)
    return 1


def base_job_name(deployment: Deployment, run_name: str) -> str:
    if not _RUN_NAME.match(run_name):
        raise LaunchRequestError(f"run name {run_name!r}: lowercase letters and digits in groups "
                                 "joined by single hyphens, e.g. 'fsx-baseline-1'")
    if run_name == STAGING_RUN or run_name.startswith(STAGING_RUN + "-"):
        raise LaunchRequestError(f"run name {run_name!r}: names starting '{STAGING_RUN}-' are "
                                 "the staging jobs'; choose another")
    base = f"{deployment.job_name_prefix}-{run_name}"
    if len(base) > MAX_BASE_NAME:
        raise LaunchRequestError(
            f"run name {run_name!r}: '{base}' is {len(base)} characters; at most {MAX_BASE_NAME} "
            "leave room for the time stamp SageMaker job names get")
    return base


def _channel(deployment: Deployment, data_source: str, name: str, s3_uri: str,
             efs_path: str, fsx_path: Optional[str]) -> Channel:
    """One input from the launch's data source. The file systems hold the bucket's prefixes at
    the same relative paths."""
    if data_source == "s3":
        return Channel(name, s3_uri)
    if data_source == "efs":
        return Channel(name, efs_path, "EFS", deployment.efs_id)
    if data_source == "fsx":
        if not deployment.fsx_enabled:
            raise LaunchRequestError(
                f"data source 'fsx': this deployment has no FSx file system (no "
                f"{deployment.ssm_path}/fsx-id parameter); deploy with maskrcnn:fsx_enabled=true "
                "or use data source s3 or efs")
        assert fsx_path is not None  # the deployment has FSx: its paths are set
        return Channel(name, fsx_path, "FSxLustre", deployment.fsx_id)
    raise LaunchRequestError(
        f"data source {data_source!r} is not one of {', '.join(DATA_SOURCES)}")


def input_channels(deployment: Deployment, data_source: str, dataset: str,
                   backbone: Optional[str], init_s3_uri: Optional[str] = None
                   ) -> Tuple[Channel, ...]:
    """The dataset as the `train` channel; with a backbone, its checkpoint as the `pretrained`
    channel; with an earlier run to fine-tune from, its checkpoints as the `init` channel, from S3
    whatever the data source (the file systems hold the datasets and backbones only)."""
    channels = [_channel(deployment, data_source, job_io.TRAIN_CHANNEL,
                         deployment.dataset_s3_uri(dataset), deployment.efs_dataset_path(dataset),
                         deployment.fsx_dataset_path(dataset))]
    if backbone:
        below = job_io.pretrained_key_prefix("", backbone).rstrip("/")
        channels.append(_channel(
            deployment, data_source, job_io.PRETRAINED_CHANNEL,
            f"{deployment.pretrained_s3_uri}{below}/", f"{deployment.efs_pretrained_path}/{below}",
            deployment.fsx_pretrained_path and f"{deployment.fsx_pretrained_path}/{below}"))
    if init_s3_uri:
        channels.append(Channel(job_io.INIT_CHANNEL, init_s3_uri))
    return tuple(channels)


def step_replicas(distribution: str, options: LaunchOptions, ranks: int) -> Optional[int]:
    """The replicas of one step as the job counts them (its backend's size): every Horovod rank;
    every GPU of every host under multi_worker_mirrored; one worker's GPUs under parameter
    servers (the workers step on their own). None where the GPU count of the instance type is not
    in instances.GPUS_PER_INSTANCE (a CPU type, or one not listed): the job checks at start."""
    if distribution == HOROVOD:
        return options.instance_count * ranks
    gpus = instances.GPUS_PER_INSTANCE.get(options.instance_type)
    if gpus is None:
        return None
    return gpus * (options.instance_count if distribution == MWMS else 1)


def run_length_notes(hps: Hyperparameters, info: dict,
                     replicas: Optional[int]) -> List[str]:
    """The contract's run-length rule (hyperparameters.run_length_problems, the one the job
    applies at start) against the staged dataset's training images (its dataset_info.json):
    refused here, before anything is sent; its warnings, to show. Nothing where the images or
    the replicas are unknown (a dataset_info.json without the train split's size)."""
    images = ((info.get("splits") or {}).get(TRAIN_SPLIT) or {}).get("num_images")
    if replicas is None or not isinstance(images, int):
        return []
    length = hyperparameters.run_length(hps, images, replicas)
    problems = hyperparameters.run_length_problems(hps, length)
    if problems:
        raise LaunchRequestError("invalid launch:\n  - " + "\n  - ".join(problems))
    return hyperparameters.run_length_warnings(hps, length)


def _parsed(raw: Dict[str, object]) -> Hyperparameters:
    try:
        return hyperparameters.parse(raw)
    except hyperparameters.HyperparameterError as error:
        raise LaunchRequestError(str(error)) from None


def training_plan(deployment: Deployment, options: LaunchOptions, s3_client,
                  sagemaker_client=None) -> LaunchPlan:
    """The plan of one Mask R-CNN training launch; raises naming what cannot go out (the module
    docstring lists it). `s3_client` looks up the staged inputs; `sagemaker_client` the training
    job a fine-tune names (`options.init_from`)."""
    problems = option_problems(options) + tracking.option_problems(
        deployment, options.mlflow, options.mlflow_experiment)
    if problems:
        raise LaunchRequestError("invalid launch:\n  - " + "\n  - ".join(problems))
    decoded = hyperparameters.decode(options.hyperparameters)
    distribution = distribution_of(options, decoded)
    ranks = ranks_per_host(distribution, options)
    toolkit = job_io.distribution_hyperparameters(distribution, ranks, options.mpi_options)
    problems = validation.toolkit_hyperparameter_problems(options.hyperparameters, distribution,
                                                          toolkit, from_user=True)
    if problems:
        raise LaunchRequestError("invalid launch:\n  - " + "\n  - ".join(problems))
    run_name = options.run_name or f"{options.data_source}-{secrets.token_hex(3)}"
    base = base_job_name(deployment, run_name)
    parsed = _parsed({**decoded, "distribution": distribution})
    notes: List[str] = []
    init = None
    if options.init_from is not None:
        # The earlier run's weights stand for the pretrained backbone (its batch-norm statistics
        # included): no `pretrained` channel is sent.
        init = init_from.resolve(sagemaker_client, s3_client, deployment, options.init_from,
                                 parsed)
    elif not options.use_pretrained:
        notes.append(FROM_SCRATCH_WARNING)
        # Frozen statistics need pretrained ones. A frozen choice of the user's is left for the
        # request check to refuse, with the request.
        if options.hyperparameters.get("batch_norm") is None:
            parsed = dataclasses.replace(
                parsed, batch_norm=hyperparameters.batch_norm_without_pretrained(distribution))
            why = "without pretrained statistics the backbone's batch norm cannot be frozen"
            if distribution == PARAMETER_SERVER:
                why += (", and parameter servers have no synchronous step to normalize over the "
                        "global batch")
            notes.append(f"batch_norm={parsed.batch_norm}: {why}")
    backbone = parsed.backbone if options.use_pretrained and init is None else None
    environment, logged = tracking.tracking_environment(
        deployment, options.mlflow, options.mlflow_experiment, options.dataset)
    if logged:
        notes.append(logged)
    missing = inputs.missing_training_inputs(s3_client, deployment, options.dataset, backbone)
    if missing:
        raise LaunchRequestError(inputs.refusal(missing, options.dataset))
    if init is not None and init.s3_uri == deployment.checkpoint_s3_uri(base):
        raise LaunchRequestError(
            f"cannot fine-tune (--init-from, init_from): {init.s3_uri} holds the checkpoints of "
            f"this run ({run_name}) itself; launching a run again resumes it without "
            "--init-from, and a fine-tune needs a run name of its own")
    info = inputs.dataset_info(s3_client, deployment, options.dataset)
    notes += run_length_notes(parsed, info, step_replicas(distribution, options, ranks))
    if init is not None:
        notes.append(init_from.describe(init, options.dataset, info.get("categories")))
    channels = input_channels(deployment, options.data_source, options.dataset, backbone,
                              init.s3_uri if init else None)
    sent = {**options.hyperparameters, "batch_norm": parsed.batch_norm,
            "distribution": distribution, **toolkit}
    max_wait = None
    if options.use_spot:
        wait_hours = options.max_wait_hours
        max_wait = int((2 * options.max_run_hours if wait_hours is None else wait_hours) * 3600)
    return LaunchPlan(
        distribution=distribution, ranks_per_host=ranks, hyperparameters=parsed,
        sent_hyperparameters=sent, dataset=options.dataset, channels=channels,
        run_name=run_name, base_job_name=base,
        checkpoint_s3_uri=deployment.checkpoint_s3_uri(base),
        input_mode=options.input_mode or (FAST_FILE if options.data_source == "s3" else FILE),
        tensorboard_s3_uri=deployment.tensorboard_s3_uri(base),
        keep_alive_seconds=options.keep_alive_seconds,
        max_run_seconds=int(options.max_run_hours * 3600), max_wait_seconds=max_wait,
        notes=tuple(notes), init=init, environment=environment)
