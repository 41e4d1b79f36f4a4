"""What a user chooses for a launch, its check, and the error a launch that cannot go out raises."""

import dataclasses
import math
from typing import Dict, List, Optional

from maskrcnn_contract import job_io
from maskrcnn_contract.hyperparameters import DISTRIBUTIONS, Hyperparameters

DATA_SOURCES = ("s3", "efs", "fsx")
# How SageMaker hands an S3 channel to the job (docs/aws-rules.md TRN-1): FastFile streams the
# objects as they are read, behind a POSIX file view of the channel; File copies the whole channel
# onto every instance's volume before the job starts. A file-system channel (EFS, FSx) is mounted,
# and its jobs send File.
FAST_FILE, FILE = "FastFile", "File"
INPUT_MODES = (FAST_FILE, FILE)
# ResourceConfig KeepAlivePeriodInSeconds: 0 to 3600, what SageMaker certainly accepts (the
# contract's, which the notebook role's IAM caps too: docs/aws-rules.md TRN-3).
MAX_KEEP_ALIVE_SECONDS = job_io.MAX_KEEP_ALIVE_SECONDS
HOROVOD, MWMS, PARAMETER_SERVER = DISTRIBUTIONS
DEFAULT_DISTRIBUTION = Hyperparameters.distribution


class LaunchRequestError(ValueError):
    """The launch would be refused by the deployment's policy or fail the job; the message lists
    every problem."""


@dataclasses.dataclass
class LaunchOptions:
    """What the user chooses in a notebook or on the command line."""

    data_source: str = "fsx"
    # The staged dataset to train on, by name: s3://<bucket>/<datasets prefix><name>/ and the same
    # path on EFS and FSx (prepare-data.ipynb, `stage-dataset`).
    dataset: str = job_io.DEFAULT_DATASET
    instance_type: str = "ml.p4d.24xlarge"
    instance_count: int = 2
    # How the hosts share the work (DISTRIBUTIONS; notebooks/README.md, "Choosing a
    # distribution"). None: the `distribution` hyperparameter if given, else horovod.
    distribution: Optional[str] = None
    processes_per_host: Optional[int] = None  # horovod: None is one rank per GPU of instance_type
    hyperparameters: Dict[str, object] = dataclasses.field(default_factory=dict)
    use_pretrained: bool = True
    use_spot: bool = False
    max_run_hours: float = 72.0
    max_wait_hours: Optional[float] = None  # spot only; None: twice max_run_hours
    volume_size_gb: int = 200  # File mode copies an S3 channel (~20 GB) onto it
    # S3 channels only (data_source "s3"): None is FastFile, streamed from S3 as the job reads;
    # "File" copies the dataset onto every instance before the job starts (INPUT_MODES).
    input_mode: Optional[str] = None
    # Managed warm pool: seconds SageMaker keeps the instances after the job for the next job
    # of the same shape (role, instance type and count, volume, VPC) to start on them at once.
    # 0: none. Billed while kept; not with spot; needs a warm-pool quota (docs/aws-rules.md TRN-3).
    keep_alive_seconds: int = 0
    # horovod only: extra mpirun options (why these: the contract)
    mpi_options: str = job_io.DEFAULT_MPI_OPTIONS
    # Names the run: its jobs are `<prefix>-<run name>-<time>` and share the checkpoints in
    # s3://<bucket>/checkpoints/<prefix>-<run name>/, so launching a run again resumes it.
    # None: `<data source>-<6 random hex digits>`, a new run.
    run_name: Optional[str] = None
    # Fine-tune: start from an earlier run's checkpoints, named by its training job or by their
    # S3 URI below the deployment's checkpoint prefix (init_from.py). None: from the ImageNet
    # backbone (use_pretrained) or from scratch.
    init_from: Optional[str] = None
    # MLflow (training/tracking.py): None logs the run to the deployment's tracking server when
    # it has one (maskrcnn:mlflow), False logs none, True insists on it; the experiment, None:
    # the dataset's name.
    mlflow: Optional[bool] = None
    mlflow_experiment: Optional[str] = None


# StoppingCondition MaxRuntimeInSeconds: 1 second to 28 days (SageMaker API reference,
# StoppingCondition). MaxWaitTimeInSeconds (managed spot) has no maximum of its own there: at
# least 1 second, and at least MaxRuntimeInSeconds.
MAX_RUN_SECONDS = 28 * 24 * 3600


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _seconds(hours) -> Optional[int]:
    """Whole seconds of a number of hours, as the request carries them; None for what is no
    finite number."""
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not math.isfinite(hours):
        return None
    return int(hours * 3600)


def option_problems(options: LaunchOptions) -> List[str]:
    """Every option of a launch that SageMaker would refuse, or that would not reach it as given:
    the SDK leaves a 0 out of the request (SageMaker's default then replaces the user's value)
    and sends a negative run time as it is. Each names the value, the CLI flag and the
    LaunchOptions field, and what is allowed."""
    problems = []
    for value, what, where in (
            (options.instance_count, "instance count", "--instances, instance_count"),
            (options.volume_size_gb, "volume size", "--volume-gb, volume_size_gb")):
        if not _whole(value) or value < 1:
            unit = " GB" if what == "volume size" else ""
            problems.append(f"{what} {value!r}{unit} ({where}): expected a whole number, 1 or more")
    if options.processes_per_host is not None and (
            not _whole(options.processes_per_host) or options.processes_per_host < 1):
        problems.append(f"processes per host {options.processes_per_host!r} (--processes-per-host, "
                        "processes_per_host): expected a whole number, 1 or more, or unset (one "
                        "per GPU)")
    run = _seconds(options.max_run_hours)
    if run is None or not 1 <= run <= MAX_RUN_SECONDS:
        problems.append(
            f"max run hours {options.max_run_hours!r} (--max-run-hours, max_run_hours): expected "
            f"more than 0 (at least 1 second) and at most {MAX_RUN_SECONDS // 3600} (28 days: "
            "SageMaker's longest MaxRuntimeInSeconds)")
    if options.max_wait_hours is not None:
        wait = _seconds(options.max_wait_hours)
        if not options.use_spot:
            problems.append(
                f"max wait hours {options.max_wait_hours!r} (max_wait_hours) limits a managed "
                "spot job, and this launch is on demand: leave it unset, or use spot "
                "(--spot, use_spot=True)")
        elif wait is None or wait < 1 or (run is not None and wait < run):
            problems.append(
                f"max wait hours {options.max_wait_hours!r} (max_wait_hours): expected at least "
                f"max_run_hours ({options.max_run_hours!r}): SageMaker's MaxWaitTimeInSeconds "
                "counts the wait for spot capacity and the run; unset, it is twice max_run_hours")
    for value, where in ((options.use_spot, "--spot, use_spot"),
                         (options.use_pretrained, "--no-pretrained, use_pretrained")):
        if not isinstance(value, bool):
            problems.append(f"{value!r} ({where}): expected True or False")
    try:
        job_io.check_dataset_name(options.dataset)
    except job_io.DatasetNameError as error:
        problems.append(f"{error} (--dataset, dataset)")
    if options.init_from is not None and (not isinstance(options.init_from, str)
                                          or not options.init_from.strip()):
        problems.append(f"init from {options.init_from!r} (--init-from, init_from): expected a "
                        "training job name or a checkpoint s3:// URI, or unset")
    if options.data_source not in DATA_SOURCES:
        problems.append(f"data source {options.data_source!r} (--data-source, data_source): "
                        f"expected one of {', '.join(DATA_SOURCES)}")
    if options.input_mode is not None and options.input_mode not in INPUT_MODES:
        problems.append(f"input mode {options.input_mode!r} (--input-mode, input_mode): expected "
                        f"one of {', '.join(INPUT_MODES)}, or unset ({FAST_FILE} for S3)")
    elif options.input_mode is not None and options.data_source in ("efs", "fsx") \
            and options.input_mode != FILE:
        problems.append(
            f"input mode {options.input_mode!r} (--input-mode, input_mode) streams S3 objects; "
            f"data source {options.data_source!r} is a file system SageMaker mounts (File mode): "
            "leave it unset, or use data source s3")
    keep = options.keep_alive_seconds
    if not _whole(keep) or not 0 <= keep <= MAX_KEEP_ALIVE_SECONDS:
        problems.append(f"keep-alive {keep!r} seconds (--keep-alive-seconds, keep_alive_seconds): "
                        f"expected a whole number from 0 (no warm pool) to "
                        f"{MAX_KEEP_ALIVE_SECONDS} (SageMaker's KeepAlivePeriodInSeconds)")
    elif keep and options.use_spot is True:
        problems.append(f"keep-alive {keep} seconds (--keep-alive-seconds, keep_alive_seconds): "
                        "SageMaker's managed warm pools cannot be used with spot instances; "
                        "choose one (--spot, use_spot)")
    if not isinstance(options.hyperparameters, dict):
        problems.append(f"hyperparameters {options.hyperparameters!r} (--hp, hyperparameters): "
                        "expected a dictionary of names and values")
    return problems
