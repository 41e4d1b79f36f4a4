"""Launches the Mask R-CNN training job (and the dataset staging job) on SageMaker, and takes its
runs to a served model.

Shared by the notebooks beside this package and usable as a CLI: `python -m maskrcnn_launcher -h`.
One folder per flow, each importing only the folders before it in this list:
  deployment/  the deployment the stack published (settings) and the instance types (instances)
  runs/        the deployment's training jobs by name (lookup), followed (follow), their curves
               (tensorboard_logs, read by event_files) and evaluation reports
               (evaluation_report), side by side (table, compare), tuning jobs' candidates
               (tuning_jobs), the model registry's versions (registry)
  training/    a launch: options, inputs, init_from, tracking, plan, validation, session, jobs,
               submit; tuning, warm_pools
  data/        exports uploaded and datasets listed (exports), staged (staging), copied to EFS and
               FSx (file_systems); staging runs a job built as a launch is
  serving/     endpoint_plan, endpoints, invocation, detections
  labeling/    batch predictions over an S3 prefix (batch_plan, batch_jobs; predictions: their
               COCO files), the labeling tools' pre-annotations (pre_annotations, polygons),
               which images to label next (ranking, contact_sheet), all handed back (handoff)
  cli/         `python -m maskrcnn_launcher`: main, and one module of commands per flow (data,
               training, runs, serving, labeling)
Importing the package does not import the SageMaker SDK; training's `jobs` and `session` alone
import it (`submit` through them).
"""

from maskrcnn_launcher.deployment.instances import (
    GPUS_PER_INSTANCE,
    InstanceTypeError,
    processes_per_host,
)
from maskrcnn_launcher.deployment.settings import Deployment, SettingsError, connect
from maskrcnn_launcher.training.options import (
    DATA_SOURCES,
    DISTRIBUTIONS,
    LaunchOptions,
    LaunchRequestError,
)

__all__ = [
    "DATA_SOURCES", "DISTRIBUTIONS", "Deployment", "GPUS_PER_INSTANCE", "InstanceTypeError",
    "LaunchOptions", "LaunchRequestError", "SettingsError", "connect", "processes_per_host",
]
