"""The SageMaker training-container contract, read once at start-up (pure Python, no TensorFlow).

Where things are: SM_* environment variables when the toolkit set them, else the /opt/ml layout
(whose root can be moved with OPT_ML_ROOT for local runs). What a failed job leaves: the cause in
<output>/failure, and a non-zero exit.
"""

import dataclasses
import json
import os
from typing import Dict, List, Optional

from maskrcnn_contract import job_io

CONTAINER_OPT_ML = "/opt/ml"


class ContractError(RuntimeError):
    """The container's inputs are missing or malformed."""


@dataclasses.dataclass(frozen=True)
class JobEnvironment:
    opt_ml: str
    hyperparameters_file: str
    channels: Dict[str, str]          # channel name -> directory
    model_dir: str                    # SavedModel goes here; SageMaker uploads it
    output_data_dir: str              # TensorBoard summaries and eval results
    checkpoint_dir: str               # synced to S3 by SageMaker; resume reads it
    tensorboard_dir: str              # uploaded during the run (TensorBoardOutputConfig)
    failure_file: str
    hosts: List[str]
    current_host: str
    job_name: Optional[str] = None    # the training job's (TRAINING_JOB_NAME), None outside one

    def channel(self, name: str) -> str:
        if name not in self.channels:
            raise ContractError(
                f"input channel {name!r} is missing: the job has channels "
                f"{sorted(self.channels) or 'none'}; pass the dataset as channel {name!r}")
        path = self.channels[name]
        if not os.path.isdir(path):
            raise ContractError(f"input channel {name!r}: directory {path} does not exist")
        return path

    def optional_channel(self, name: str) -> Optional[str]:
        return self.channel(name) if name in self.channels else None


def _channels_from_layout(opt_ml: str) -> Dict[str, str]:
    """Channels named in inputdataconfig.json, at /opt/ml/input/data/<name>."""
    config = os.path.join(opt_ml, "input", "config", "inputdataconfig.json")
    if not os.path.exists(config):
        return {}
    with open(config, encoding="utf-8") as f:
        names = list(json.load(f))
    return {name: os.path.join(opt_ml, "input", "data", name) for name in names}


def load(environ=None) -> JobEnvironment:
    env = os.environ if environ is None else environ
    opt_ml = env.get("OPT_ML_ROOT", CONTAINER_OPT_ML)
    channels = _channels_from_layout(opt_ml)
    # The toolkit exports SM_CHANNEL_<NAME> for every channel; they win over the layout.
    for key, value in env.items():
        if key.startswith("SM_CHANNEL_"):
            channels[key[len("SM_CHANNEL_"):].lower()] = value
    resource_file = os.path.join(opt_ml, "input", "config", "resourceconfig.json")
    # The host this process runs on: resourceconfig.json, which SageMaker writes on every host.
    # Not SM_CURRENT_HOST: the training toolkit's MPI runner forwards the master's SM_* variables
    # to every rank (sagemaker-training-toolkit issue #158), so on algo-2 it says algo-1.
    if os.path.exists(resource_file):
        with open(resource_file, encoding="utf-8") as f:
            resource = json.load(f)
        hosts, current = resource["hosts"], resource["current_host"]
    else:
        hosts = json.loads(env.get("SM_HOSTS", '["algo-1"]'))
        current = env.get("SM_CURRENT_HOST", hosts[0])
    output = os.path.join(opt_ml, "output")
    return JobEnvironment(
        opt_ml=opt_ml,
        hyperparameters_file=os.path.join(opt_ml, "input", "config", "hyperparameters.json"),
        channels=channels,
        model_dir=env.get("SM_MODEL_DIR", os.path.join(opt_ml, "model")),
        output_data_dir=env.get("SM_OUTPUT_DATA_DIR", os.path.join(output, "data")),
        # Where the launcher's CheckpointConfig has SageMaker sync checkpoints (below a moved root
        # in local runs).
        checkpoint_dir=env.get("SM_CHECKPOINT_DIR", os.path.join(
            opt_ml, os.path.relpath(job_io.CHECKPOINT_LOCAL_PATH, CONTAINER_OPT_ML))),
        # Where the launcher's TensorBoardOutputConfig has SageMaker upload summaries from while
        # the job runs (docs/aws-rules.md TRN-2).
        tensorboard_dir=os.path.join(
            opt_ml, os.path.relpath(job_io.TENSORBOARD_LOCAL_PATH, CONTAINER_OPT_ML)),
        failure_file=os.path.join(output, "failure"),
        hosts=hosts,
        current_host=current,
        # SageMaker sets it in the container (docs/aws-rules.md SM-17); on other hosts the ranks
        # mpirun starts get it too (the worker's toolkit writes its environment to
        # /etc/environment, which sshd applies).
        job_name=env.get(job_io.TRAINING_JOB_NAME_ENV),
    )


def own_checkpoint_dir(env: JobEnvironment) -> str:
    """This job's checkpoint directory within the synced one (job_io.own_checkpoints): the
    checkpoint directory for a launch, <checkpoint dir>/<job name> for a tuning job's candidate,
    which shares the synced directory with the tuning job's other candidates."""
    with open(env.hyperparameters_file, encoding="utf-8") as f:
        raw = json.load(f)
    try:
        return job_io.own_checkpoints(env.checkpoint_dir, raw, env.job_name)
    except ValueError as error:
        raise ContractError(str(error)) from None


def write_failure(failure_file: str, message: str) -> None:
    """Appends the cause: with several ranks on one host, each failing rank adds its line."""
    os.makedirs(os.path.dirname(failure_file), exist_ok=True)
    with open(failure_file, "a", encoding="utf-8") as f:
        f.write(message.rstrip() + "\n")


def quiet_for_the_failure_scan(text: str) -> str:
    """`text` without the words at which the training toolkit starts quoting a failure: it quotes
    the job's stdout and stderr from the first line containing an exception class name
    (IndexError, Exception, ...; docs/aws-rules.md SM-9) into the 1024 characters of the
    FailureReason. A warning logged before a failure must not name one, or the failure's own
    lines fall outside them. "IndexError: x" becomes "Index error: x"."""
    return text.replace("Error", " error").replace("Exception", " exception")
