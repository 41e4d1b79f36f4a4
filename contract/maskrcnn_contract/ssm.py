"""The SSM parameters a deployment publishes under `/<deployment name>/` for launchers.

The deployment publishes exactly these names (stacks/training.py), the launcher reads
them into its `Deployment` (notebooks/maskrcnn_launcher/deployment/settings.py), and the tests seed
their fake deployment from them; tests/infra checks that the synthesized parameters are these.
"""

# Published by every deployment.
REQUIRED = (
    "region",
    "job-name-prefix",
    "data-bucket",
    "datasets-prefix",     # every dataset below it, one folder per name: <datasets-prefix><name>/
    "imports-prefix",      # labeling tools' exports users upload, <imports-prefix><name>/
    "pretrained-prefix",
    "output-prefix",
    "checkpoint-prefix",
    "samples-prefix",      # images users upload for inference.ipynb
    "kms-key-arn",
    "efs-id",
    "efs-datasets-path",   # the datasets directory: a dataset's is <efs-datasets-path>/<name>
    "efs-pretrained-path",
    "datasync-task-arns",  # comma-separated: one DataSync task per prefix copied to EFS
    "subnet-ids",          # comma-separated
    "security-group-ids",  # comma-separated
    "training-role-arn",
    "staging-role-arn",
    "training-image-uri",
    "model-role-arn",           # the role SageMaker assumes to host a trained model (CreateModel)
    "inference-image-gpu-uri",  # the region's TensorFlow Serving inference DLC, GPU
    "inference-image-cpu-uri",  # the same, CPU
    # "true" when the VPC has NAT gateways: jobs can reach the internet (COCO, the backbone);
    # "false" for an isolated VPC, where a staging job could not download anything.
    "internet-egress",
    # The SNS topic the deployment's notifications go to (finished, failed and stopped jobs,
    # failed endpoints, idle endpoints' alarms): the stack's own, or
    # maskrcnn:notification_topic_arn.
    "notification-topic-arn",
    # The SageMaker model package group of the deployment's model registry (`register`, `approve`,
    # `deploy --model-package`: the launcher's runs/registry.py), <deployment name>-models.
    "model-package-group",
)
# Published only when the deployment has FSx for Lustre.
FSX = ("fsx-id", "fsx-mount-name", "fsx-datasets-path", "fsx-pretrained-path")
# Published only with maskrcnn:mlflow=tracking-server: the SageMaker managed MLflow tracking
# server's ARN, where launches log their runs by default (maskrcnn_contract.tracking).
MLFLOW = ("mlflow-tracking-server-arn",)
ALL = REQUIRED + FSX + MLFLOW
# Values that are comma-separated lists.
LISTS = ("subnet-ids", "security-group-ids", "datasync-task-arns")
# Values that are S3 key prefixes ('datasets/': no leading '/', a trailing '/').
PREFIXES = ("datasets-prefix", "imports-prefix", "pretrained-prefix", "output-prefix",
            "checkpoint-prefix", "samples-prefix")
# Values that are "true" or "false".
BOOLEANS = ("internet-egress",)
# Endpoint data capture goes to s3://<data-bucket>/<output-prefix><DATA_CAPTURE_PREFIX>...: the
# model role may write there and nowhere else (it only reads the rest of the output prefix).
DATA_CAPTURE_PREFIX = "data-capture/"
# Batch predictions (the launcher's predict-batch) go to
# s3://<data-bucket>/<output-prefix><PREDICTIONS_PREFIX><name>/: the transform's answers, written as
# the model role, and the predictions files the launcher writes there.
PREDICTIONS_PREFIX = "predictions/"


def parameter_name(ssm_path: str, leaf: str) -> str:
    """The full parameter name, e.g. /maskrcnn/data-bucket."""
    if leaf not in ALL:
        raise KeyError(f"{leaf!r} is not a deployment parameter; known: {', '.join(ALL)}")
    return f"{ssm_path.rstrip('/')}/{leaf}"
