"""This deployment's training jobs, looked up by name: the one to serve, report, fine-tune from.

Every flow that takes a job's name (serving, reports, fine-tuning, warm pools) reads it here, so
that a job of another deployment, a staging job, an unfinished job or one whose model.tar.gz is
gone is refused the same way everywhere, naming the job and why. A finished run may also be named
by its hyperparameter tuning job: `training_job` takes the tuning job's best candidate and says
which (docs/tuning.md).
"""

import datetime
import sys
from typing import Callable, List, Optional, Tuple

from botocore.exceptions import ClientError

from maskrcnn_contract import job_io, s3_objects

from maskrcnn_launcher.deployment.settings import Deployment


class RunRequestError(ValueError):
    """The named run cannot be used as asked; nothing was sent or created. The message names the
    job and why."""


def describe_job(sagemaker_client, deployment: Deployment, job_name: str,
                 refuse: Callable[[str], Exception]) -> dict:
    """DescribeTrainingJob of a training job of this deployment; `refuse(problem)` is raised when
    the job is another deployment's or does not exist."""
    if not job_name.startswith(f"{deployment.job_name_prefix}-"):
        raise refuse(f"training job {job_name!r} is not this deployment's: its jobs start with "
                     f"{deployment.job_name_prefix}-")
    try:
        return sagemaker_client.describe_training_job(TrainingJobName=job_name)
    except ClientError as error:
        if is_missing(error):
            raise refuse(f"training job {job_name!r} does not exist in "
                         f"{deployment.region}") from None
        raise


def is_missing(error: ClientError) -> bool:
    """SageMaker answers a describe or delete of something that does not exist with a
    ValidationException: 'Could not find endpoint ...' (models, endpoint configurations,
    endpoints), 'Requested resource not found.' (training jobs)."""
    code = error.response.get("Error", {}).get("Code", "")
    message = error.response.get("Error", {}).get("Message", "").lower()
    return code in ("ResourceNotFound", "ResourceNotFoundException") or (
        code in ("ValidationException", "ValidationError")
        and any(words in message for words in ("could not find", "not found", "does not exist")))


def is_staging_job(deployment: Deployment, name: str, job: Optional[dict] = None) -> bool:
    if name.startswith(f"{deployment.job_name_prefix}-stage-"):  # jobs.staging_job_name
        return True
    if not job:
        return False
    return (job.get("Environment") or {}).get(job_io.PROGRAM_ENV) == job_io.STAGING_PROGRAM


def latest_completed_job(sagemaker_client, deployment: Deployment) -> Optional[str]:
    """The name of the deployment's most recent Completed training job (not a staging job)."""
    prefix = f"{deployment.job_name_prefix}-"
    found: List[Tuple[datetime.datetime, str]] = []
    for page in sagemaker_client.get_paginator("list_training_jobs").paginate(
            NameContains=deployment.job_name_prefix, StatusEquals="Completed",
            SortBy="CreationTime", SortOrder="Descending"):
        for summary in page["TrainingJobSummaries"]:
            name = summary["TrainingJobName"]
            if name.startswith(prefix) and not is_staging_job(deployment, name):
                found.append((summary["CreationTime"], name))
    return max(found)[1] if found else None


# HyperParameterTuningJobName: at most 32 characters (docs/aws-rules.md TUN-1); a longer name is
# a training job's.
MAX_TUNING_JOB_NAME = 32


def describe_tuning_job(sagemaker_client, deployment: Deployment, name: str) -> Optional[dict]:
    """DescribeHyperParameterTuningJob of this deployment's tuning job `name`, or None when there
    is no tuning job of that name (a training job's name, then)."""
    if not name.startswith(f"{deployment.job_name_prefix}-") or len(name) > MAX_TUNING_JOB_NAME:
        return None
    try:
        return sagemaker_client.describe_hyper_parameter_tuning_job(
            HyperParameterTuningJobName=name)
    except ClientError as error:
        if is_missing(error):
            return None
        raise


def best_candidate(tuning: dict, refuse: Callable[[str], Exception]) -> str:
    """The name of a tuning job's best candidate so far (SageMaker's BestTrainingJob: the best
    objective value among its candidates that reported one)."""
    best = tuning.get("BestTrainingJob") or {}
    name = tuning["HyperParameterTuningJobName"]
    if not best.get("TrainingJobName"):
        raise refuse(f"tuning job {name!r} ({tuning['HyperParameterTuningJobStatus']}) has no "
                     "best candidate yet: none of its training jobs has reported its objective")
    return best["TrainingJobName"]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def s3_object_problem(s3_client, uri: str) -> Optional[str]:
    try:
        if s3_objects.object_exists(s3_client, *s3_objects.split_object_uri(uri)):
            return None
    except ClientError as error:  # not a missing object: denied, or another error
        code = error.response.get("Error", {}).get("Code", "")
        return f"model artifacts {uri} cannot be read ({code}: {error})"
    return f"model artifacts {uri} do not exist (deleted?)"


def training_job(sagemaker_client, s3_client, deployment: Deployment,
                 job_name: Optional[str] = None,
                 refuse: Callable[[str], Exception] = RunRequestError,
                 echo: Callable[[str], None] = _stderr) -> dict:
    """DescribeTrainingJob of a finished run: the named one (a tuning job's name: its best
    candidate, which `echo` names), else the latest Completed one. Refused (`refuse(problem)`
    raised) unless it is this deployment's, Completed, a training (not staging) job, and its
    model.tar.gz exists."""
    if job_name is None:
        job_name = latest_completed_job(sagemaker_client, deployment)
        if job_name is None:
            raise refuse(
                f"no Completed training job named {deployment.job_name_prefix}-* in "
                f"{deployment.region}: train one first (mask-rcnn-*.ipynb or `launch`), or name "
                "one with --job / JOB_NAME")
    tuning = describe_tuning_job(sagemaker_client, deployment, job_name)
    if tuning is not None:
        best = best_candidate(tuning, refuse)
        metric = (tuning.get("BestTrainingJob") or {}).get(
            "FinalHyperParameterTuningJobObjectiveMetric") or {}
        echo(f"tuning job {job_name}: its best candidate {best}"
             + (f" ({metric['MetricName']} {metric['Value']:g})" if metric else ""))
        job_name = best
    job = describe_job(sagemaker_client, deployment, job_name, refuse)
    if is_staging_job(deployment, job_name, job):
        raise refuse(f"training job {job_name!r} is a dataset staging job: it trains no model")
    status = job["TrainingJobStatus"]
    if status != "Completed":
        reason = f": {job['FailureReason']}" if job.get("FailureReason") else ""
        raise refuse(f"training job {job_name!r} is {status}{reason}; only a Completed job "
                     "has a model")
    url = job.get("ModelArtifacts", {}).get("S3ModelArtifacts")
    if not url:
        raise refuse(f"training job {job_name!r} has no model artifacts "
                     "(ModelArtifacts.S3ModelArtifacts is empty)")
    problem = s3_object_problem(s3_client, url)
    if problem:
        raise refuse(f"training job {job_name!r}: {problem}")
    return job
