"""The file systems' copies of the bucket's inputs: DataSync S3 -> EFS (one task per prefix: every
dataset, the backbones), and the import status of the FSx data repository associations. Each step
is safe to re-run."""

import time
from typing import Callable, List, Optional

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import follow

DATASYNC_DONE = ("SUCCESS", "ERROR")


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
