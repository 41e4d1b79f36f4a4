"""A dataset staged into S3 by the staging job (COCO 2017 from its archives, or a labeling tool's
export uploaded below the imports prefix: data/exports.py), with the published backbone; safe to
re-run: what is staged is skipped, a staging job still running is followed instead."""

from typing import Callable, List, Optional

from maskrcnn_contract import job_io
from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import follow
from maskrcnn_launcher.training import inputs
from maskrcnn_launcher.training.options import LaunchRequestError


def _missing(s3_client, deployment: Deployment, dataset: str, backbone: bool = True) -> List[str]:
    """What the staging job would still write: the dataset, the published backbone checkpoints."""
    what = "COCO 2017" if dataset == job_io.DEFAULT_DATASET else f"dataset {dataset!r}"
    missing = [] if inputs.dataset_staged(s3_client, deployment, dataset) else [
        f"{what} ({deployment.dataset_s3_uri(dataset)}{DATASET_COMPLETE_MARKER})"]
    if backbone:
        missing += [f"the {name} checkpoint ({deployment.pretrained_s3_uri}{name}/)"
                    for name in job_io.STAGED_BACKBONES
                    if not inputs.backbone_staged(s3_client, deployment, name)]
    return missing


def running_staging_job(sagemaker_client, deployment: Deployment,
                        dataset: str = job_io.DEFAULT_DATASET) -> Optional[str]:
    """A staging job of this deployment for `dataset` still in progress (e.g. started from
    another tab): the deployment's jobs named <prefix>-stage-..., whose dataset hyperparameter is
    `dataset` (names are cut to fit, so the hyperparameter decides)."""
    jobs = sagemaker_client.list_training_jobs(
        NameContains=f"{deployment.job_name_prefix}-stage-", StatusEquals="InProgress",
        MaxResults=100)["TrainingJobSummaries"]
    for summary in jobs:
        name = summary["TrainingJobName"]
        job = sagemaker_client.describe_training_job(TrainingJobName=name)
        hps = job.get("HyperParameters") or {}
        if hps.get(job_io.STAGING_DATASET, job_io.DEFAULT_DATASET).strip('"') == dataset:
            return name
    return None


def stage_dataset(boto_session, deployment: Deployment, dataset: str = job_io.DEFAULT_DATASET,
                  wait: bool = True, dry_run: bool = False,
                  echo: Callable[[str], None] = print, **options) -> Optional[str]:
    """Runs the staging job of `dataset` unless it and the backbone checkpoint are both staged,
    or such a job is running (then follows that one). `options`: jobs.staging_job's (val_fraction,
    split_seed, crowd_as_instances, boxes_without_mask, strict, stage_backbone). Returns the job
    name, or None when there was nothing to do. Refused (LaunchRequestError) for a dataset other
    than COCO 2017 whose export is not uploaded."""
    from maskrcnn_launcher.training import jobs, submit  # the SDK is imported only to send

    job_io.check_dataset_name(dataset)
    s3 = boto_session.client("s3")
    sagemaker_client = boto_session.client("sagemaker")
    backbone = options.get("stage_backbone", True)
    missing = _missing(s3, deployment, dataset, backbone)
    if not missing:
        echo(f"dataset {dataset!r} ({deployment.dataset_s3_uri(dataset)})"
             + (f" and the {', '.join(job_io.STAGED_BACKBONES)} checkpoint "
                f"({deployment.pretrained_s3_uri}) are" if backbone else " is")
             + " staged already")
        return None
    dataset_missing = not inputs.dataset_staged(s3, deployment, dataset)
    if dataset_missing and dataset != job_io.DEFAULT_DATASET \
            and not inputs.import_uploaded(s3, deployment, dataset):
        unstaged = inputs.missing_dataset(s3, deployment, dataset)
        assert unstaged is not None  # not staged, as dataset_staged said
        raise LaunchRequestError(unstaged.problem)
    # The backbone step only when it has something to do: a job that downloads nothing also
    # runs in a deployment without internet egress.
    options["stage_backbone"] = backbone and any(
        not inputs.backbone_staged(s3, deployment, name) for name in job_io.STAGED_BACKBONES)
    launch = jobs.staging_job(deployment, boto_session, dataset=dataset, **options)
    if dry_run:
        request = submit.send(launch, deployment, dry_run=True)
        echo(f"would start {request['TrainingJobName']} to stage {'; '.join(missing)}")
        return None
    name = running_staging_job(sagemaker_client, deployment, dataset)
    if name:
        echo(f"staging job {name} is already running: following it")
    else:
        name = submit.send(launch, deployment)["TrainingJobName"]
        how = ("COCO: downloads ~19 GB, converts, uploads" if dataset == job_io.DEFAULT_DATASET
               else f"converts the export in {deployment.import_s3_uri(dataset)}")
        echo(f"started {name} to stage {'; '.join(missing)} ({how})")
    if wait:
        follow.wait_for_job(sagemaker_client, name, echo=echo)
        still_missing = _missing(s3, deployment, dataset, backbone)
        if still_missing:
            raise RuntimeError(f"{name} completed but {'; '.join(still_missing)} is missing: see "
                               "the job's log")
        echo(f"staged: {deployment.dataset_s3_uri(dataset)}"
             + (f" and {deployment.pretrained_s3_uri}" if backbone else ""))
    return name


def stage_coco(boto_session, deployment: Deployment, wait: bool = True, dry_run: bool = False,
               echo: Callable[[str], None] = print) -> Optional[str]:
    """COCO 2017 and the backbone: `stage_dataset` of the default dataset."""
    return stage_dataset(boto_session, deployment, job_io.DEFAULT_DATASET, wait=wait,
                         dry_run=dry_run, echo=echo)
