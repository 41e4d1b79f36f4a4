"""Data preparation, each step safe to re-run: a dataset staged into S3 (COCO 2017 from its
archives, or a labeling tool's export uploaded below the imports prefix), DataSync S3 -> EFS (one
task per prefix: every dataset, the backbones), the import status of the FSx data repository
associations, and the datasets staged so far."""

import os
import time
from typing import Callable, List, Optional

from maskrcnn_contract import job_io
from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER

from maskrcnn_launcher import follow, inputs
from maskrcnn_launcher.options import LaunchRequestError
from maskrcnn_launcher.settings import Deployment

DATASYNC_DONE = ("SUCCESS", "ERROR")


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


def upload_import(s3_client, deployment: Deployment, dataset: str, directory: str,
                  echo: Callable[[str], None] = print) -> int:
    """Uploads a labeling tool's export (a directory, or a .zip file) below the dataset's import
    prefix, where the staging job converts it from. Returns the number of files."""
    prefix = deployment.import_key_prefix(dataset)
    if os.path.isfile(directory):
        files = [(directory, os.path.basename(directory))]
    elif os.path.isdir(directory):
        files = sorted((os.path.join(root, name),
                        os.path.relpath(os.path.join(root, name), directory).replace(os.sep, "/"))
                       for root, _, names in os.walk(directory) for name in names)
    else:
        raise LaunchRequestError(f"export {directory!r} is neither a directory nor a file")
    if not files:
        raise LaunchRequestError(f"export {directory!r} holds no file")
    for path, relative in files:
        s3_client.upload_file(path, deployment.data_bucket, prefix + relative)
    echo(f"uploaded {len(files)} file(s) to {deployment.import_s3_uri(dataset)}")
    return len(files)


def datasets(s3_client, deployment: Deployment) -> List[dict]:
    """The datasets below the datasets prefix and the exports below the imports prefix: name,
    whether it is staged, its classes (from dataset_info.json) and whether an export waits."""
    def folders(prefix: str) -> List[str]:
        names = []
        for page in s3_client.get_paginator("list_objects_v2").paginate(
                Bucket=deployment.data_bucket, Prefix=prefix, Delimiter="/"):
            names += [p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", [])]
        return names

    staged = folders(deployment.datasets_prefix)
    uploaded = set(folders(deployment.imports_prefix))
    found = []
    for name in sorted(set(staged) | uploaded):
        entry = {"dataset": name, "staged": False, "export_uploaded": name in uploaded}
        if name in staged and inputs.dataset_staged(s3_client, deployment, name):
            info = inputs.dataset_info(s3_client, deployment, name)
            entry.update(staged=True, classes=[c.get("name") for c in info.get("categories", [])],
                         images={split: value.get("num_images")
                                 for split, value in info.get("splits", {}).items()})
        found.append(entry)
    return found


def sync_to_efs(datasync_client, deployment: Deployment, poll: Optional[float] = None,
                echo: Callable[[str], None] = print) -> List[dict]:
    """Runs the deployment's DataSync tasks (one per bucket prefix copied to EFS) one after
    another: each is started unless an execution is already running (then that one is followed)
    and waited for. DataSync copies only what changed, so a second run is cheap. Returns the
    executions in task order; raises at the first that does not succeed."""
    poll = follow.poll_seconds() if poll is None else poll
    tasks = deployment.datasync_task_arns
    return [_run_datasync_task(datasync_client, task_arn, f"DataSync task {number}/{len(tasks)}",
                               poll, echo)
            for number, task_arn in enumerate(tasks, start=1)]


def _run_datasync_task(datasync_client, task_arn: str, label: str, poll: float,
                       echo: Callable[[str], None]) -> dict:
    # The launcher does not know which prefix a task copies: the messages name its ARN.
    task = datasync_client.describe_task(TaskArn=task_arn)
    execution_arn = task.get("CurrentTaskExecutionArn")
    if task["Status"] == "RUNNING" and execution_arn:
        echo(f"{label} {task_arn}: following the execution already running, {execution_arn}")
    else:
        execution_arn = datasync_client.start_task_execution(TaskArn=task_arn)["TaskExecutionArn"]
        echo(f"{label} {task_arn}: started {execution_arn}")
    last = None
    while True:
        execution = datasync_client.describe_task_execution(TaskExecutionArn=execution_arn)
        if execution["Status"] != last:
            last = execution["Status"]
            echo(f"{label}: {last}")
        if last in DATASYNC_DONE:
            break
        time.sleep(poll)
    if last != "SUCCESS":
        raise RuntimeError(f"DataSync execution {execution_arn} ended {last}: "
                           f"{execution.get('Result', {})}")
    return execution


def fsx_import_status(fsx_client, deployment: Deployment) -> List[dict]:
    """The data repository associations of the deployment's FSx file system: lifecycle
    (AVAILABLE once linked), S3 path, file-system path and the auto-import events."""
    if not deployment.fsx_enabled:
        return []
    found = []
    paginator_kwargs = {"Filters": [{"Name": "file-system-id", "Values": [deployment.fsx_id]}]}
    while True:
        page = fsx_client.describe_data_repository_associations(**paginator_kwargs)
        for association in page["Associations"]:
            events = (association.get("S3", {}).get("AutoImportPolicy", {}) or {}).get("Events", [])
            found.append({
                "association": association["AssociationId"],
                "lifecycle": association["Lifecycle"],
                "s3": association["DataRepositoryPath"],
                "fsx_path": association["FileSystemPath"],
                "auto_import": ",".join(events) or "off",
                "failure": (association.get("FailureDetails") or {}).get("Message", ""),
            })
        if not page.get("NextToken"):
            return found
        paginator_kwargs["NextToken"] = page["NextToken"]


def stage_dataset(boto_session, deployment: Deployment, dataset: str = job_io.DEFAULT_DATASET,
                  wait: bool = True, dry_run: bool = False,
                  echo: Callable[[str], None] = print, **options) -> Optional[str]:
    """Runs the staging job of `dataset` unless it and the backbone checkpoint are both staged,
    or such a job is running (then follows that one). `options`: jobs.staging_job's (val_fraction,
    split_seed, crowd_as_instances, boxes_without_mask, strict, stage_backbone). Returns the job name, or None when
    there was nothing to do. Refused (LaunchRequestError) for a dataset other than COCO 2017
    whose export is not uploaded."""
    from maskrcnn_launcher import jobs, submit  # the SDK is imported only to send

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
        raise LaunchRequestError(inputs.missing_dataset(s3, deployment, dataset).problem)
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
