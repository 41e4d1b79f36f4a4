"""Launches the Mask R-CNN training job (and the dataset staging job) on SageMaker.

Shared by the notebooks beside this package and usable as a CLI: `python -m maskrcnn_launcher -h`.
Modules: settings (SSM -> Deployment), instances (GPU table), options (the user's choices),
plan (a training launch resolved once: distribution, ranks per host, parsed hyperparameters,
channels, names), inputs (what a launch needs that is not staged in S3), init_from (the earlier
run a fine-tune starts from, checked), jobs (the plan as the SageMaker SDK 3 ModelTrainer),
session (the SDK session and the hook that checks each request it sends), validation (the one
check of the request as sent), submit (sends it), follow (status, logs, metrics), data_prep
(exports uploaded, datasets staged, DataSync, FSx import status), deploy (a finished job's model
on an auto-scaling endpoint, invocations, deletion; boto3 only), detections (an endpoint's answer
drawn, latency percentiles), warm_pools (the jobs whose managed warm pool is kept now, and ending
one). Importing the package does not import the SDK; `jobs`, `session`
and `submit` do.
"""

from maskrcnn_launcher.instances import GPUS_PER_INSTANCE, InstanceTypeError, processes_per_host
from maskrcnn_launcher.options import (DATA_SOURCES, DISTRIBUTIONS, LaunchOptions,
                                       LaunchRequestError)
from maskrcnn_launcher.settings import Deployment, SettingsError, connect

__all__ = [
    "DATA_SOURCES", "DISTRIBUTIONS", "Deployment", "GPUS_PER_INSTANCE", "InstanceTypeError",
    "LaunchOptions", "LaunchRequestError", "SettingsError", "connect", "processes_per_host",
]
