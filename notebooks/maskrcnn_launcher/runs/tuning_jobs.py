"""Following a hyperparameter tuning job: its candidates, their status and objective, the best.

A tuning job (training/tuning.py) starts training jobs of its own, its candidates; SageMaker
lists them (ListTrainingJobsForHyperParameterTuningJob) with the values it chose and each one's
final objective value, and names the best so far (DescribeHyperParameterTuningJob
BestTrainingJob). `lookup.training_job` resolves the tuning job's name to that best candidate for
`report`, `deploy --job` and registering.
"""

import time
from typing import Callable, Dict, List, Optional

from maskrcnn_launcher.runs import follow, lookup

TERMINAL = ("Completed", "Failed", "Stopped")


def candidates(sagemaker_client, name: str) -> List[dict]:
    """Every candidate's summary (name, status, tuned values, final objective), oldest first."""
    found = []
    for page in sagemaker_client.get_paginator(
            "list_training_jobs_for_hyper_parameter_tuning_job").paginate(
            HyperParameterTuningJobName=name):
        found += page["TrainingJobSummaries"]
    return sorted(found, key=lambda summary: (summary["CreationTime"], summary["TrainingJobName"]))


def _objective(summary: dict) -> str:
    metric = summary.get("FinalHyperParameterTuningJobObjectiveMetric")
    return f"{metric['Value']:.4g}" if metric else "-"


def lines(tuning: dict, found: List[dict]) -> List[str]:
    """What the tuning job has done: its status and counters, one line per candidate (status,
    objective, the values it tried), and the best so far."""
    config = tuning["HyperParameterTuningJobConfig"]
    objective = config.get("HyperParameterTuningJobObjective", {})
    counters = tuning.get("TrainingJobStatusCounters", {})
    limits = config["ResourceLimits"]
    out = [f"{tuning['HyperParameterTuningJobName']}: {tuning['HyperParameterTuningJobStatus']}, "
           f"{len(found)} of at most {limits.get('MaxNumberOfTrainingJobs')} candidates "
           f"({', '.join(f'{k} {v}' for k, v in counters.items() if v)}); objective "
           f"{objective.get('MetricName')} ({objective.get('Type')})"]
    for summary in found:
        tried = ", ".join(f"{k}={v}" for k, v in sorted(summary.get("TunedHyperParameters",
                                                                    {}).items()))
        out.append(f"  {summary['TrainingJobName']}  {summary['TrainingJobStatus']:<10} "
                   f"objective {_objective(summary):>8}  {tried}")
    best = tuning.get("BestTrainingJob") or {}
    if best.get("TrainingJobName"):
        out.append(f"best so far: {best['TrainingJobName']} (objective {_objective(best)})")
    else:
        out.append("best so far: none (no candidate has reported its objective yet)")
    return out


def summary(tuning: dict, found: List[dict]) -> Dict[str, object]:
    """The same as JSON: status, best candidate, and each candidate's status, objective, values."""
    best = tuning.get("BestTrainingJob") or {}
    return {"tuning_job": tuning["HyperParameterTuningJobName"],
            "status": tuning["HyperParameterTuningJobStatus"],
            "best_candidate": best.get("TrainingJobName"),
            "best_objective": (best.get("FinalHyperParameterTuningJobObjectiveMetric")
                               or {}).get("Value"),
            "candidates": [{"name": s["TrainingJobName"], "status": s["TrainingJobStatus"],
                            "objective": (s.get("FinalHyperParameterTuningJobObjectiveMetric")
                                          or {}).get("Value"),
                            "values": s.get("TunedHyperParameters", {})} for s in found]}


def wait(sagemaker_client, deployment, name: str, poll: Optional[float] = None,
         echo: Callable[[str], None] = print) -> dict:
    """Prints the candidates whenever they change until the tuning job ends; returns its last
    DescribeHyperParameterTuningJob. Refused (RunRequestError) for a name that is not this
    deployment's tuning job."""
    poll = follow.poll_seconds() if poll is None else poll
    last = None
    while True:
        tuning = lookup.describe_tuning_job(sagemaker_client, deployment, name)
        if tuning is None:
            raise lookup.RunRequestError(
                f"tuning job {name!r} does not exist in {deployment.region} (its name starts "
                f"with {deployment.job_name_prefix}- and has at most "
                f"{lookup.MAX_TUNING_JOB_NAME} characters)")
        found = candidates(sagemaker_client, name)
        shown = lines(tuning, found)
        if shown != last:
            for line in shown:
                echo(line)
            last = shown
        if tuning["HyperParameterTuningJobStatus"] in TERMINAL:
            return tuning
        time.sleep(poll)
