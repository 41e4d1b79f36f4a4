"""Where a job's inputs and outputs are, as both the job and the launcher must name them."""

import re
from typing import Mapping, Optional

# Input channels of the training job (training_code/README.md, "Data layout").
TRAIN_CHANNEL = "train"            # the dataset: tfrecords/, annotations/, dataset_info.json
PRETRAINED_CHANNEL = "pretrained"  # optional ImageNet backbone checkpoint
# Optional: an earlier run's checkpoints (its CheckpointConfig S3 URI, or a local run's checkpoint
# or model directory) with their RUN_INFO: the job restores every variable whose shape matches and
# re-initializes the class-specific layers (fine-tuning). An S3 channel for every data source.
INIT_CHANNEL = "init"
TRAINING_CHANNELS = (TRAIN_CHANNEL, PRETRAINED_CHANNEL, INIT_CHANNEL)
# Written by the job's chief beside its checkpoints (and into its model's code/ directory): the
# backbone, model preset, image size and categories the run trains, so that a job or a launcher
# asked to fine-tune from it can refuse a checkpoint of another model before anything runs.
RUN_INFO = "run_info.json"

# Datasets by name: s3://<bucket>/<datasets prefix><name>/, and the same path below the file
# systems' datasets directory. COCO 2017 is one of them, staged from its published archives; any
# other is converted from a labeling tool's COCO export that the user uploads below
# <imports prefix><name>/.
DEFAULT_DATASET = "coco2017"
# Lowercase letters and digits, '-' inside, at most 63 characters (a DNS label): a key segment and a
# directory name as it is, with nothing to quote or escape.
DATASET_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
DATASET_NAME_RULE = ("1 to 63 lowercase letters, digits and '-', starting and ending with a "
                     "letter or a digit, e.g. 'coco2017' or 'parts-v2'")


class DatasetNameError(ValueError):
    """A dataset name that is not a key segment and a directory name as it is."""


def check_dataset_name(name) -> str:
    """The name, or DatasetNameError naming the value and the rule."""
    if not isinstance(name, str) or not DATASET_NAME.match(name):
        raise DatasetNameError(f"dataset name {name!r}: expected {DATASET_NAME_RULE}")
    return name


def dataset_key_prefix(datasets_prefix: str, name: str) -> str:
    """Where a staged dataset lives in the bucket: the `train` channel of a job that trains on it
    (and its path below the file systems' datasets directory, without the datasets prefix)."""
    return f"{datasets_prefix}{check_dataset_name(name)}/"


def import_key_prefix(imports_prefix: str, name: str) -> str:
    """Where a user uploads the labeling tool's export that the staging job converts into the
    dataset `name`."""
    return f"{imports_prefix}{check_dataset_name(name)}/"

# The container directory SageMaker syncs with the job's CheckpointConfig S3 URI.
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
# The container directory SageMaker uploads to the request's TensorBoardOutputConfig S3OutputPath
# while the job runs (SageMaker API reference, TensorBoardOutputConfig LocalPath, whose default
# this is): the job writes its TensorBoard summaries here, so that TensorBoard shows a running
# job's curves (docs/aws-rules.md TRN-2).
TENSORBOARD_LOCAL_PATH = "/opt/ml/output/tensorboard"
# Below the deployment's output prefix: s3://<bucket>/<output prefix>tensorboard/<run>/, one folder
# per run (every job of a run, resumed or not, below it).
TENSORBOARD_FOLDER = "tensorboard/"
# A managed warm pool (docs/aws-rules.md TRN-3, TRN-4): the longest ResourceConfig
# KeepAlivePeriodInSeconds the launcher sends, and the cap the notebook role's IAM puts on
# sagemaker:KeepAlivePeriod (stacks/notebook.py). 3600 is what SageMaker certainly accepts: the
# developer guide ("SageMaker AI Managed Warm Pools", "Use SageMaker AI managed warm pools") and the
# English API reference of ResourceConfigForUpdate say at most 3600 seconds, botocore 1.44's
# service model 21600; nothing here can ask the service which it enforces.
MAX_KEEP_ALIVE_SECONDS = 3600

# Written last into a dataset prefix (or channel): its presence means the dataset is complete.
DATASET_COMPLETE_MARKER = "dataset_info.json"
# Written last into a backbone's prefix, <pretrained prefix><backbone>/, by the staging job: where
# the checkpoint came from, its files' sizes and MD5s.
PRETRAINED_COMPLETE_MARKER = "checkpoint_info.json"

# The staging job: program in /opt/ml/code and the hyperparameters it reads. One program for every
# dataset: COCO 2017 from its archives, any other from an export below the imports prefix.
STAGING_PROGRAM = "stage_dataset.py"
STAGING_DATASET = "dataset"    # the dataset's name (DEFAULT_DATASET: COCO 2017's archives)
STAGING_S3_URI = "s3_uri"      # destination prefix, s3://<bucket>/<datasets prefix><name>/
# The export to convert, s3://<bucket>/<imports prefix><name>/ (absent for COCO 2017).
STAGING_IMPORT_S3_URI = "import_s3_uri"
# An export with one annotations file is split into train and val: this share of its images (at
# least one) goes to val, drawn with this seed; the split is recorded in the dataset.
STAGING_VAL_FRACTION = "val_fraction"
STAGING_SPLIT_SEED = "split_seed"
DEFAULT_VAL_FRACTION = 0.2
DEFAULT_SPLIT_SEED = 0
# "true": annotations marked iscrowd=1 are trained as instances (CVAT writes every mask so).
STAGING_CROWD_AS_INSTANCES = "crowd_as_instances"
# "true": invalid annotations and images fail the job instead of being skipped and reported.
STAGING_STRICT = "strict"
STAGING_WORK_DIR = "work_dir"  # downloads, images and TFRecords on the job's volume
# Its work directory in a SageMaker job: on the job's volume, but outside SM_OUTPUT_DATA_DIR, which
# SageMaker would tar up and upload (~40 GB of archives and images for COCO).
STAGING_CONTAINER_WORK_DIR = "/opt/ml/input/staging-work"
STAGING_PRETRAINED_S3_URI = "pretrained_s3_uri"  # s3://<bucket>/<pretrained prefix>
STAGING_BACKBONES = "backbones"  # comma-separated backbones whose checkpoint to stage
# The backbones whose ImageNet checkpoint the staging job fetches: Model Garden publishes one for
# ResNet-50 only (training_code/maskrcnn_job/staging/stage_backbone.py).
STAGED_BACKBONES = ("resnet50",)


def pretrained_key_prefix(pretrained_prefix: str, backbone: str) -> str:
    """Where one backbone's checkpoint lives in the bucket (and below the file systems' pretrained
    directory): the `pretrained` channel of a job with that backbone."""
    return f"{pretrained_prefix}{backbone}/"


# The training toolkits' own hyperparameter names, as their constants spell them (sagemaker-training
# `params.py`; sagemaker-tensorflow-training `training.py`): nowhere else in the project as
# literals; tests/contract/test_names.py compares them with the installed toolkits.
PROGRAM = "sagemaker_program"                               # params.USER_PROGRAM_PARAM
PROGRAM_ENV = "SAGEMAKER_PROGRAM"   # params.USER_PROGRAM_ENV: an environment variable, read first
MPI_ENABLED = "sagemaker_mpi_enabled"                       # params.MPI_ENABLED
MPI_PROCESSES_PER_HOST = "sagemaker_mpi_num_of_processes_per_host"  # MPI_NUM_PROCESSES_PER_HOST
MPI_CUSTOM_OPTIONS = "sagemaker_mpi_custom_mpi_options"     # params.MPI_CUSTOM_MPI_OPTIONS
# MultiWorkerMirroredStrategy: the TensorFlow training toolkit of the DLC writes TF_CONFIG (one
# worker per host, port 8890) and starts one process per host when this is set
# (sagemaker_tensorflow_container/training.py, _build_tf_config_for_mwms).
MWMS_TOOLKIT_FLAG = "sagemaker_multi_worker_mirrored_strategy_enabled"
# The toolkit's TF1 parameter-server cluster (not used: see distribution_hyperparameters).
PARAMETER_SERVER_TOOLKIT_FLAG = "sagemaker_parameter_server_enabled"
# SageMaker's data-parallel library and the toolkit's choice of hosts to distribute over (prefix
# and name): what the launcher refuses, since this job uses neither.
DATA_PARALLEL_PREFIX = "sagemaker_distributed_dataparallel_"
DISTRIBUTION_INSTANCE_GROUPS = "sagemaker_distribution_instance_groups"
# What SageMaker adds to the hyperparameters of each training job a tuning job starts: the
# objective's metric name (docs/aws-rules.md TUN-3).
TUNING_OBJECTIVE_METRIC = "_tuning_objective_metric"        # params.TUNING_METRIC_PARAM
# The environment variable SageMaker sets to the training job's name in its containers (SM-17),
# which the toolkit's environment reads as `job_name`.
TRAINING_JOB_NAME_ENV = "TRAINING_JOB_NAME"                 # params.TRAINING_JOB_ENV
# CreateTrainingJob TrainingJobName (botocore's model).
TRAINING_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def own_checkpoints(shared: str, hyperparameters: Mapping[str, object],
                    job_name: Optional[str]) -> str:
    """Where a training job keeps everything it writes beside its checkpoints (ckpt-N, best/,
    RUN_INFO) within its CheckpointConfig location `shared`, the LocalPath in the container or the
    S3Uri: `shared` itself for a launch (every job of a run resumes the run's checkpoints), and
    `<shared>/<job name>` for a tuning job's candidate, which SageMaker starts with the one
    CheckpointConfig of the tuning job's definition, the same for every candidate: each resumes
    its own only (docs/aws-rules.md TUN-6). A candidate is known as the training toolkit knows
    it, by TUNING_OBJECTIVE_METRIC among its hyperparameters. The result ends with '/' when
    `shared` does (an S3 prefix). ValueError when a candidate's `job_name` is not a training
    job's name."""
    if TUNING_OBJECTIVE_METRIC not in hyperparameters:
        return shared
    if not isinstance(job_name, str) or not TRAINING_JOB_NAME.match(job_name):
        raise ValueError(
            f"a tuning job's candidate ({TUNING_OBJECTIVE_METRIC} among its hyperparameters) "
            f"keeps its checkpoints below its training job's name, and {TRAINING_JOB_NAME_ENV}="
            f"{job_name!r} is not one (1 to 63 letters, digits and hyphens)")
    return shared.rstrip("/") + "/" + job_name + ("/" if shared.endswith("/") else "")


# The training toolkit's MPI runner (sagemaker-training): one process per GPU on every host.
# Extra mpirun options: ranks on other hosts do get the container's environment (HOROVOD_* from
# the image): the worker's toolkit writes it to /etc/environment, which sshd applies to the ranks
# mpirun starts there. Only what changes something is passed: the DLC's /etc/nccl.conf sets
# NCCL_DEBUG=INFO, one line per channel and rank; WARN keeps the log readable.
DEFAULT_MPI_OPTIONS = "-x NCCL_DEBUG=WARN"


def mpi_hyperparameters(processes_per_host: int,
                        custom_mpi_options: str = DEFAULT_MPI_OPTIONS) -> dict:
    """The hyperparameters that make the toolkit start the job with mpirun (the launcher sends
    them; local_run gives them to the emulated hosts)."""
    return {MPI_ENABLED: "true",
            MPI_PROCESSES_PER_HOST: str(processes_per_host),
            MPI_CUSTOM_OPTIONS: custom_mpi_options}


def distribution_hyperparameters(distribution: str, processes_per_host: int,
                                 custom_mpi_options: str = DEFAULT_MPI_OPTIONS) -> dict:
    """The platform hyperparameters that make the toolkit start the job as `distribution` needs:
    - horovod: mpirun, `processes_per_host` ranks per host;
    - multi_worker_mirrored: the toolkit's TF_CONFIG, one process per host;
    - parameter_server: nothing. The toolkit runs train.py once per host, and the job builds its
      own TF2 cluster from resourceconfig.json (the toolkit's `sagemaker_parameter_server_enabled`
      cluster is TF1's: a `master` task TF2's ParameterServerStrategy rejects; see
      training_code/README.md, "Distribution")."""
    if distribution == "horovod":
        return mpi_hyperparameters(processes_per_host, custom_mpi_options)
    if distribution == "multi_worker_mirrored":
        return {MWMS_TOOLKIT_FLAG: "true"}
    if distribution == "parameter_server":
        return {}
    raise ValueError(f"distribution {distribution!r}: expected horovod, multi_worker_mirrored "
                     "or parameter_server")
