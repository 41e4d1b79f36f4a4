"""Data preparation, each step safe to re-run: COCO staging into S3, DataSync S3 -> EFS, the
FSx data repository association's import status."""

import time
from typing import Callable, List, Optional

from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER

from maskrcnn_launcher import follow
from maskrcnn_launcher.settings import Deployment

DATASYNC_DONE = ("SUCCESS", "ERROR")


def dataset_staged(s3_client, deployment: Deployment) -> bool:
    key = deployment.data_prefix + DATASET_COMPLETE_MARKER
    try:
        s3_client.head_object(Bucket=deployment.data_bucket, Key=key)
        return True
    except s3_client.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return False
        raise


def running_staging_job(sagemaker_client, deployment: Deployment) -> Optional[str]:
    """A staging job of this deployment still in progress (e.g. started from another tab)."""
    jobs = sagemaker_client.list_training_jobs(
        NameContains=f"{deployment.job_name_prefix}-stage-coco", StatusEquals="InProgress",
        MaxResults=10)["TrainingJobSummaries"]
    return jobs[0]["TrainingJobName"] if jobs else None


def sync_to_efs(datasync_client, deployment: Deployment, poll: Optional[float] = None,
                echo: Callable[[str], None] = print) -> dict:
    """Starts the DataSync task unless an execution is already running (then follows that one);
    waits for the end. DataSync copies only what changed, so a second run is cheap."""
    poll = follow.poll_seconds() if poll is None else poll
    task = datasync_client.describe_task(TaskArn=deployment.datasync_task_arn)
    execution_arn = task.get("CurrentTaskExecutionArn")
    if task["Status"] == "RUNNING" and execution_arn:
        echo(f"DataSync: following the execution already running, {execution_arn}")
    else:
        execution_arn = datasync_client.start_task_execution(
            TaskArn=deployment.datasync_task_arn)["TaskExecutionArn"]
        echo(f"DataSync: started {execution_arn}")
    last = None
    while True:
        execution = datasync_client.describe_task_execution(TaskExecutionArn=execution_arn)
        if execution["Status"] != last:
            last = execution["Status"]
            echo(f"DataSync: {last}")
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
    """Runs the staging job unless the data prefix is complete or a staging job is running
    (then follows that one). Returns the job name, or None when there was nothing to do."""
    from maskrcnn_launcher import jobs, submit  # the SDK is imported only to send

    s3 = boto_session.client("s3")
    sagemaker_client = boto_session.client("sagemaker")
    if dataset_staged(s3, deployment):
        echo(f"{deployment.data_s3_uri}{DATASET_COMPLETE_MARKER} exists: COCO 2017 is already "
             "staged")
        return None
    launch = jobs.staging_job(deployment, boto_session)
    if dry_run:
        request = submit.send(launch, deployment, dry_run=True)
        echo(f"would start {request['TrainingJobName']} writing {deployment.data_s3_uri}")
        return None
    name = running_staging_job(sagemaker_client, deployment)
    if name:
        echo(f"staging job {name} is already running: following it")
    else:
        name = submit.send(launch, deployment)["TrainingJobName"]
        echo(f"started {name}: downloads ~19 GB, converts, uploads to {deployment.data_s3_uri}")
    if wait:
        follow.wait_for_job(sagemaker_client, name, echo=echo)
        if not dataset_staged(s3, deployment):
            raise RuntimeError(f"{name} completed but {deployment.data_s3_uri}"
                               f"{DATASET_COMPLETE_MARKER} is missing: see the job's log")
        echo(f"staged: {deployment.data_s3_uri}")
    return name
