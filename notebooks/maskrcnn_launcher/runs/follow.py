"""Following a job: status until it ends, its CloudWatch log lines, its metrics.

Polling intervals come from $MASKRCNN_POLL_SECONDS (default 60) so that tests and pipelines
need not sleep for real.
"""

import os
import re
import time
from typing import Callable, Dict, Iterator, List, Optional

from maskrcnn_contract import metrics as job_metrics

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
TERMINAL = ("Completed", "Failed", "Stopped")


def poll_seconds(default: float = 60.0) -> float:
    return float(os.environ.get("MASKRCNN_POLL_SECONDS", default))


def wait_for_job(sagemaker_client, job_name: str, poll: Optional[float] = None,
                 timeout_s: Optional[float] = None, echo: Callable[[str], None] = print) -> dict:
    """Prints each status change; returns the final DescribeTrainingJob. Raises if it failed."""
    poll = poll_seconds() if poll is None else poll
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last = None
    while True:
        job = sagemaker_client.describe_training_job(TrainingJobName=job_name)
        state = (job["TrainingJobStatus"], job.get("SecondaryStatus"))
        if state != last:
            echo(f"{job_name}: {state[0]} ({state[1]})")
            last = state
        if job["TrainingJobStatus"] in TERMINAL:
            break
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"{job_name} still {state[0]} after {timeout_s} s")
        time.sleep(poll)
    if job["TrainingJobStatus"] != "Completed":
        raise RuntimeError(f"{job_name} {job['TrainingJobStatus']}: "
                           f"{job.get('FailureReason', 'no reason given')}")
    return job


def log_lines(logs_client, job_name: str) -> Iterator[str]:
    """Every log line of the job, host by host (one stream per host: <job>/algo-N-<time>)."""
    try:
        streams = logs_client.describe_log_streams(
            logGroupName=LOG_GROUP, logStreamNamePrefix=job_name + "/")["logStreams"]
    except logs_client.exceptions.ResourceNotFoundException:
        return
    for stream in sorted(streams, key=lambda s: s["logStreamName"]):
        kwargs = {"logGroupName": LOG_GROUP, "logStreamName": stream["logStreamName"],
                  "startFromHead": True}
        while True:
            page = logs_client.get_log_events(**kwargs)
            for event in page["events"]:
                yield event["message"]
            if not page["events"] or page["nextForwardToken"] == kwargs.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextForwardToken"]


def metrics_from_lines(lines: List[str]) -> Dict[str, float]:
    """The last value of every metric, read with the job's own metric definitions (the same
    regexes SageMaker applies)."""
    patterns = [(d["Name"], re.compile(d["Regex"])) for d in job_metrics.METRIC_DEFINITIONS]
    values: Dict[str, float] = {}
    for line in lines:
        for name, pattern in patterns:
            match = pattern.search(line)
            if match:
                values[name] = float(match.group(1))
    return values


def final_metrics(job: dict) -> Dict[str, float]:
    """SageMaker's final value of each metric definition (DescribeTrainingJob)."""
    return {m["MetricName"]: m["Value"] for m in job.get("FinalMetricDataList", [])}


def dashboard_name(job_name_prefix: str, region: str) -> str:
    """The deployment's CloudWatch dashboard (stacks/monitoring.py names it so)."""
    return f"{job_name_prefix}-{region}"


def console_urls(region: str, job_name: str,
                 job_name_prefix: Optional[str] = None) -> Dict[str, str]:
    """The console pages of a job, and with `job_name_prefix` the deployment's dashboard; China's
    regions have their own console domain."""
    base = ("https://console.amazonaws.cn" if region.startswith("cn-")
            else f"https://{region}.console.aws.amazon.com")
    urls = {
        "job": f"{base}/sagemaker/home?region={region}#/jobs/{job_name}",
        "logs": (f"{base}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/"
                 f"$252Faws$252Fsagemaker$252FTrainingJobs$3FlogStreamNameFilter$3D{job_name}"),
    }
    if job_name_prefix:
        urls["dashboard"] = (f"{base}/cloudwatch/home?region={region}#dashboards:name="
                             f"{dashboard_name(job_name_prefix, region)}")
    return urls
