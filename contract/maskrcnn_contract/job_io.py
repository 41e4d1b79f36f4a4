"""Where a job's inputs and outputs are, as both the job and the launcher must name them."""

# Input channels of the training job (training_code/README.md, "Data layout").
TRAIN_CHANNEL = "train"            # the dataset: tfrecords/, annotations/, dataset_info.json
PRETRAINED_CHANNEL = "pretrained"  # optional ImageNet backbone checkpoint
TRAINING_CHANNELS = (TRAIN_CHANNEL, PRETRAINED_CHANNEL)

# The container directory SageMaker syncs with the job's CheckpointConfig S3 URI.
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"

# Written last into a dataset prefix (or channel): its presence means the dataset is complete.
DATASET_COMPLETE_MARKER = "dataset_info.json"

# The COCO staging job: program in /opt/ml/code and the hyperparameters it reads.
STAGING_PROGRAM = "stage_coco.py"
STAGING_S3_URI = "s3_uri"      # destination prefix, s3://<bucket>/<data prefix>
STAGING_WORK_DIR = "work_dir"  # downloads, images and TFRecords on the job's volume
