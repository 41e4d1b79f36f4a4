"""Data preparation, each step safe to re-run: COCO staging into S3, DataSync S3 -> EFS (one task
per prefix), the import status of the FSx data repository associations."""

import time
from typing import Callable, List, Optional

from maskrcnn_contract import job_io
from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER

from maskrcnn_launcher import follow, inputs
from maskrcnn_launcher.settings import Deployment

DATASYNC_DONE = ("SUCCESS", "ERROR")


def _missing(s3_client, deployment: Deployment) -> List[str]:
    """What the staging job would still write: the dataset, the published backbone checkpoints."""
    missing = [] if inputs.dataset_staged(s3_client, deployment) else [
        f"COCO 2017 ({deployment.data_s3_uri}{DATASET_COMPLETE_MARKER})"]
    missing += [f"the {backbone} checkpoint ({deployment.pretrained_s3_uri}{backbone}/)"
                for backbone in job_io.STAGED_BACKBONES
                if not inputs.backbone_staged(s3_client, deployment, backbone)]
    return missing


def running_staging_job(sagemaker_client, deployment: Deployment) -> Optional[str]:
    """A staging job of this deployment still in progress (e.g. started from another tab)."""
    jobs = sagemaker_client.list_training_jobs(
        NameContains=f"{deployment.job_name_prefix}-stage-coco", StatusEquals="InProgress",
        MaxResults=10)["TrainingJobSummaries"]
    return jobs[0]["TrainingJobName"] if jobs else None


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


def stage_coco(boto_session, deployment: Deployment, wait: bool = True, dry_run: bool = False,
               echo: Callable[[str], None] = print) -> Optional[str]:
    """Runs the staging job unless the dataset and the backbone checkpoint are both staged, or a
    staging job is running (then follows that one). Returns the job name, or None when there
    was nothing to do."""
    from maskrcnn_launcher import jobs, submit  # the SDK is imported only to send

    s3 = boto_session.client("s3")
    sagemaker_client = boto_session.client("sagemaker")
    missing = _missing(s3, deployment)
    if not missing:
        echo(f"COCO 2017 ({deployment.data_s3_uri}) and the "
             f"{', '.join(job_io.STAGED_BACKBONES)} checkpoint ({deployment.pretrained_s3_uri}) "
             "are staged already")
        return None
    launch = jobs.staging_job(deployment, boto_session)
    if dry_run:
        request = submit.send(launch, deployment, dry_run=True)
        echo(f"would start {request['TrainingJobName']} to stage {'; '.join(missing)}")
        return None
    name = running_staging_job(sagemaker_client, deployment)
    if name:
        echo(f"staging job {name} is already running: following it")
    else:
        name = submit.send(launch, deployment)["TrainingJobName"]
        echo(f"started {name} to stage {'; '.join(missing)} (COCO: downloads ~19 GB, converts, "
             "uploads)")
    if wait:
        follow.wait_for_job(sagemaker_client, name, echo=echo)
        still_missing = _missing(s3, deployment)
        if still_missing:
            raise RuntimeError(f"{name} completed but {'; '.join(still_missing)} is missing: see "
                               "the job's log")
        echo(f"staged: {deployment.data_s3_uri} and {deployment.pretrained_s3_uri}")
    return name
