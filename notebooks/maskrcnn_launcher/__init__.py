"""Launches the Mask R-CNN training job (and the COCO staging job) on SageMaker.

Shared by the notebooks beside this package and usable as a CLI: `python -m maskrcnn_launcher -h`.
Modules: settings (SSM -> Deployment), instances (GPU table), request (build + validate),
submit (SageMaker SDK 3 ModelTrainer), follow (status, logs, metrics), data_prep (staging,
DataSync, FSx import status).
"""

from maskrcnn_launcher.instances import GPUS_PER_INSTANCE, InstanceTypeError, processes_per_host
from maskrcnn_launcher.request import (
    DATA_SOURCES, LaunchOptions, LaunchRequestError, build_staging_request, build_training_request)
from maskrcnn_launcher.settings import Deployment, SettingsError, connect

__all__ = [
    "DATA_SOURCES", "Deployment", "GPUS_PER_INSTANCE", "InstanceTypeError", "LaunchOptions",
    "LaunchRequestError", "SettingsError", "build_staging_request", "build_training_request",
    "connect", "processes_per_host",
]
