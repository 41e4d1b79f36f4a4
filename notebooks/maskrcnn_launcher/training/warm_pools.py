"""Managed warm pools: which of the deployment's training jobs keep their instances now, and
ending one early.

    found = warm_pools.warm_pools(sagemaker_client, deployment)   # what bills now, newest first
    for line in warm_pools.warm_pool_lines(found): print(line)
    warm_pools.release(sagemaker_client, deployment, job_name)    # UpdateTrainingJob, keep-alive 0

A job launched with a keep-alive (`--keep-alive-seconds`, `keep_alive_seconds`) keeps its
instances `Available` for the next job of the same shape for that long after it ends, billed per
instance-hour, and they count against the account's training instance quota. Stopping the job does
not end the pool; only UpdateTrainingJob with ResourceConfig KeepAlivePeriodInSeconds 0 does, once
the job has finished and its pool is `Available` (docs/aws-rules.md TRN-4). `release` checks
that first and refuses (WarmPoolRequestError, naming the job) a job of another deployment, one that
does not exist, one still running and one without a live pool, so that nothing is sent for those;
the notebook role may send UpdateTrainingJob for the deployment's jobs only, and only with a
keep-alive of 0 (TRN-5).
"""

import datetime
from typing import List, Optional

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import lookup

AVAILABLE = "Available"
FINISHED = ("Completed", "Failed", "Stopped")


class WarmPoolRequestError(ValueError):
    """The release would be refused or would do nothing; the message names the job and why."""


def release_command(job_name: str) -> str:
    return f"python -m maskrcnn_launcher release-warm-pool {job_name}"


def _utc(value: datetime.datetime) -> datetime.datetime:
    return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)


def _pool(job: dict, now: datetime.datetime) -> dict:
    """One Available pool, from its job's DescribeTrainingJob."""
    resources = job.get("ResourceConfig", {})
    keep = resources.get("KeepAlivePeriodInSeconds") or 0
    count, instance_type = resources.get("InstanceCount"), resources.get("InstanceType")
    ended = _utc(job.get("TrainingEndTime") or job.get("LastModifiedTime") or now)
    kept_s = max(0.0, (now - ended).total_seconds())
    return {"job": job["TrainingJobName"], "status": job["WarmPoolStatus"]["Status"],
            "instance_type": instance_type, "instance_count": count,
            "price_class": instances.price_class(instance_type) if instance_type else "?",
            "job_ended": str(ended), "keep_alive_seconds": keep,
            "kept_hours": round(kept_s / 3600, 2),
            "ends_in_minutes": max(0, round((keep - kept_s) / 60)),
            "instance_hours": round(kept_s / 3600 * (count or 0), 2),
            "release": release_command(job["TrainingJobName"])}


def warm_pools(sagemaker_client, deployment: Deployment,
               now: Optional[datetime.datetime] = None) -> List[dict]:
    """The deployment's training jobs whose warm pool is Available now (kept and billed), newest
    first: the job, instance type and count, their hourly price class (instances.PRICE_CLASSES),
    the job's end, its keep-alive, the hours kept so far, the minutes before it ends by itself
    (unless a job of the same shape takes it over first), the instance-hours kept so far and the
    command that ends it."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    prefix = f"{deployment.job_name_prefix}-"
    found = []
    for page in sagemaker_client.get_paginator("list_training_jobs").paginate(
            NameContains=deployment.job_name_prefix, WarmPoolStatusEquals=AVAILABLE,
            SortBy="CreationTime", SortOrder="Descending"):
        for summary in page["TrainingJobSummaries"]:
            name = summary["TrainingJobName"]
            if not name.startswith(prefix):
                continue
            try:
                job = lookup.describe_job(sagemaker_client, deployment, name, WarmPoolRequestError)
            except WarmPoolRequestError:
                continue  # gone meanwhile
            if (job.get("WarmPoolStatus") or {}).get("Status") == AVAILABLE:
                found.append((_utc(job["CreationTime"]), _pool(job, now)))
    return [pool for _, pool in sorted(found, key=lambda item: item[0], reverse=True)]


def warm_pool_lines(found: List[dict]) -> List[str]:
    """One line per pool of `warm_pools`, for people: what bills, how much, since when, how to
    end it."""
    return [f"{p['job']}: {p['instance_count']} x {p['instance_type']} ({p['price_class']} per "
            f"instance-hour) kept {p['kept_hours']:g} h ({p['instance_hours']:g} instance-hours), "
            f"ends by itself in {p['ends_in_minutes']} min of {p['keep_alive_seconds']} s "
            f"keep-alive; end it now: {p['release']}" for p in found]


def _refusal(job: dict) -> Optional[str]:
    """Why the job's warm pool cannot be released, or None."""
    name, status = job["TrainingJobName"], job.get("TrainingJobStatus")
    keep = (job.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds") or 0
    pool = job.get("WarmPoolStatus") or {}
    if status not in FINISHED:
        return (f"training job {name!r} is {status}: its warm pool starts when it ends"
                + (f" and lasts {keep} s; release it then" if keep else
                   " (it has none: launched without a keep-alive)"))
    if not pool:
        return (f"training job {name!r} has no warm pool: it was launched without a keep-alive "
                "(--keep-alive-seconds, keep_alive_seconds), or the account's warm-pool quota for "
                f"{(job.get('ResourceConfig') or {}).get('InstanceType')} kept none")
    if pool.get("Status") == "Reused":
        return (f"training job {name!r}: its warm pool moved to job {pool.get('ReusedByJob')!r} "
                "(Reused); if that job keeps it, release that job's (`warm-pools` lists them)")
    if pool.get("Status") == "Terminated":
        return (f"training job {name!r}: its warm pool is Terminated (released, expired or ended "
                "for a patch update): nothing to release")
    if pool.get("Status") != AVAILABLE:
        return (f"training job {name!r}: its warm pool is {pool.get('Status')}, not Available: "
                "nothing to release")
    return None


def release(sagemaker_client, deployment: Deployment, job_name: str) -> dict:
    """Ends the job's warm pool now: UpdateTrainingJob with KeepAlivePeriodInSeconds 0. Refuses
    (WarmPoolRequestError, nothing sent) a job outside the deployment's prefix, a job that does
    not exist, one still running and one whose pool is not Available. Returns the pool as it was
    (`warm_pools`' fields)."""
    job = lookup.describe_job(sagemaker_client, deployment, job_name, WarmPoolRequestError)
    problem = _refusal(job)
    if problem:
        raise WarmPoolRequestError(problem)
    pool = _pool(job, datetime.datetime.now(datetime.timezone.utc))
    sagemaker_client.update_training_job(TrainingJobName=job_name,
                                         ResourceConfig={"KeepAlivePeriodInSeconds": 0})
    return pool
