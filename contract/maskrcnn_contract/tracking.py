"""Experiment tracking with MLflow: what the launcher, the job and the stacks agree on.

The interface is MLflow's own environment variables, which the launcher puts in the training
request's Environment and the job reads (maskrcnn_job/training/tracking.py): the tracking URI, a
SageMaker managed MLflow tracking server's ARN (the sagemaker-mlflow plugin in the training image
signs and routes requests to it) or an http(s) URL (local runs), and the experiment name. The
deployment publishes its tracking server's ARN to SSM (ssm.MLFLOW) when maskrcnn:mlflow is on
(stacks/experiments.py). docs/experiments.md; docs/aws-rules.md MLF-1.
"""

import re
from typing import List

# MLflow's environment variables (mlflow/environment_variables.py).
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
ENVIRONMENT = (TRACKING_URI_ENV, EXPERIMENT_ENV)

# A tracking server's ARN (botocore's TrackingServerArn: at most 2048 characters), its name
# (TrackingServerName: 1-256 characters) at the end (docs/aws-rules.md MLF-1).
TRACKING_SERVER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$")
TRACKING_SERVER_ARN = re.compile(
    r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:mlflow-tracking-server/"
    r"([a-zA-Z0-9](-*[a-zA-Z0-9]){0,255})$")
# A CreateTrainingJob Environment value: at most 512 characters (botocore's model), which an
# ARN of a name up to 256 characters fits.
MAX_ENVIRONMENT_VALUE = 512
# MLflow's experiment names: not empty, at most 500 characters (mlflow/utils/validation.py,
# MAX_EXPERIMENT_NAME_LENGTH); within the Environment value's 512.
MAX_EXPERIMENT_NAME = 500


def tracking_server_name(deployment_name: str) -> str:
    """The deployment's tracking server: `<deployment name>-mlflow` (a deployment name's 24
    characters and 7 fit the 256 of TrackingServerName)."""
    return f"{deployment_name}-mlflow"


def experiment_name_problems(name: object) -> List[str]:
    """What MLflow refuses of an experiment name (a non-empty string of at most 500 characters);
    [] for a good one."""
    if not isinstance(name, str) or not name:
        return [f"experiment name {name!r}: expected a non-empty string (MLflow's rule)"]
    if len(name) > MAX_EXPERIMENT_NAME:
        return [f"experiment name {name[:40]!r}... ({len(name)} characters): MLflow takes at most "
                f"{MAX_EXPERIMENT_NAME}"]
    return []


def is_tracking_server_arn(uri: str) -> bool:
    return bool(TRACKING_SERVER_ARN.match(uri)) and len(uri) <= MAX_ENVIRONMENT_VALUE
