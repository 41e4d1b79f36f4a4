"""Where a job's inputs and outputs are, as both the job and the launcher must name them."""

# Input channels of the training job (training_code/README.md, "Data layout").
TRAIN_CHANNEL = "train"            # the dataset: tfrecords/, annotations/, dataset_info.json
PRETRAINED_CHANNEL = "pretrained"  # optional ImageNet backbone checkpoint
TRAINING_CHANNELS = (TRAIN_CHANNEL, PRETRAINED_CHANNEL)

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

# Written last into a dataset prefix (or channel): its presence means the dataset is complete.
DATASET_COMPLETE_MARKER = "dataset_info.json"
# Written last into a backbone's prefix, <pretrained prefix><backbone>/, by the staging job: where
# the checkpoint came from, its files' sizes and MD5s.
PRETRAINED_COMPLETE_MARKER = "checkpoint_info.json"

# The COCO staging job: program in /opt/ml/code and the hyperparameters it reads.
STAGING_PROGRAM = "stage_coco.py"
STAGING_S3_URI = "s3_uri"      # destination prefix, s3://<bucket>/<data prefix>
STAGING_WORK_DIR = "work_dir"  # downloads, images and TFRecords on the job's volume
# Its work directory in a SageMaker job: on the job's volume, but outside SM_OUTPUT_DATA_DIR, which
# SageMaker would tar up and upload (~40 GB of archives and images).
STAGING_CONTAINER_WORK_DIR = "/opt/ml/input/coco2017-work"
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
