"""This deployment's training jobs side by side: one row per job, sortable and filtered.

    rows = table.runs(deployment, boto_session, dataset="coco2017", last=20)
    print("\\n".join(table.lines(table.sort(rows, "mask_ap"))))

A row is read from the job's DescribeTrainingJob and, for a Completed job, its evaluation report
(runs/evaluation_report.py, downloaded once per job and kept): the dataset (from the `train`
channel: S3 prefix, EFS or FSx directory), the data source, the distribution, the instances, spot,
the hyperparameters that shape a run as the job parsed them (the contract's defaults where
none was sent), the tuning job that started it (a tuning candidate), the training time, the
instance-hours SageMaker bills and their cost, the final and best AP and the class of lowest AP.

What a run cost (docs/aws-rules.md TRN-6): SageMaker bills `BillableTimeInSeconds` ×
`InstanceCount` (a spot job's billable time is already less than its training time), plus a warm
pool's `ResourceRetainedBillableTimeInSeconds` × `InstanceCount` after the job. The cost is those
instance-hours × an hourly on-demand price the caller gives for the instance type (`prices`; the
CLI's `--price TYPE=USD`): the launcher keeps no price table (prices differ by region and change),
and a spot job's price is the spot market's, so its cost is `unknown` too. A running job has no
billable time yet: `-`.

Staging jobs are not runs (lookup.is_staging_job). A job's `final AP` is its last evaluation's
mask AP (the report's; else SageMaker's last `eval/segm_AP`, marked MARK and said under the
table), `best` the job's `eval/best_objective` (what the exported model scored on the run's
`objective_metric`), and `worst class` the class of lowest mask AP in the report. Hyperparameters
that no longer parse (a job of an older contract) are shown as sent, marked MARK and said under
the table.
"""

import dataclasses
import datetime
from typing import Any, Dict, Iterable, List, Optional, Tuple

from maskrcnn_contract import hyperparameters as contract_hyperparameters
from maskrcnn_contract import job_io
from maskrcnn_contract import metrics as job_metrics

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import evaluation_report, follow, lookup

# The hyperparameters shown: what sets a run's length, batch, rate and model.
KEY_HYPERPARAMETERS = ("max_steps", "epochs", "images_per_gpu", "base_learning_rate",
                       "batch_norm", "backbone", "image_size", "objective_metric")
# The report's task whose AP the table shows (masks), and SageMaker's metric of the same figure.
TASK = "segm"
FINAL_AP_METRIC = "eval/segm_AP"
# After a figure that is not what its column says (the notes under the table say why).
MARK = "*"
SORT_KEYS = ("created", "job", "dataset", "distribution", "instance_hours", "cost", "duration",
             "mask_ap", "best", "worst_ap")


class PriceError(lookup.RunRequestError):
    """A price given for an instance type is malformed."""


@dataclasses.dataclass(frozen=True)
class Run:
    job: str
    status: str
    created: datetime.datetime
    dataset: Optional[str]
    data_source: Optional[str]
    distribution: Optional[str]
    instance_type: str
    instance_count: int
    spot: bool
    hyperparameters: Dict[str, object]
    tuning_job: Optional[str]
    duration_s: Optional[float]          # TrainingTimeInSeconds
    instance_hours: Optional[float]      # billed: (billable + warm pool) seconds x instances
    cost: Optional[float]                # None: unknown (no price given, or spot)
    mask_ap: Optional[float]             # the last evaluation's
    best: Optional[float]                # eval/best_objective
    objective: Optional[str]             # what `best` measures
    worst_class: Optional[Tuple[str, float]]
    notes: Tuple[str, ...] = ()          # why a figure is missing or marked
    hyperparameters_as_sent: bool = False  # they did not parse: the sent strings
    mask_ap_from_metric: bool = False    # SageMaker's final eval/segm_AP, not the report's


def parse_prices(given: Iterable[str]) -> Dict[str, float]:
    """{instance type: USD per instance-hour} from 'TYPE=USD' strings; refuses a malformed one."""
    prices = {}
    for item in given:
        instance_type, _, price = item.partition("=")
        try:
            instances.check_instance_type(instance_type)
            value = float(price)
        except (instances.InstanceTypeError, ValueError):
            raise PriceError(f"price {item!r}: expected TYPE=USD, an instance type and its "
                             "on-demand price per instance-hour in your region, e.g. "
                             "ml.p4d.24xlarge=<USD>") from None
        if not value > 0:
            raise PriceError(f"price {item!r}: the price per instance-hour must be above 0")
        prices[instance_type] = value
    return prices


def dataset_of(deployment: Deployment, job: dict) -> Tuple[Optional[str], Optional[str]]:
    """(dataset, data source) of the job's `train` channel, as the launcher builds it
    (training/plan.py input_channels); (None, None) for a channel this deployment did not name."""
    for channel in job.get("InputDataConfig", []):
        if channel.get("ChannelName") != job_io.TRAIN_CHANNEL:
            continue
        source = channel.get("DataSource", {})
        if "S3DataSource" in source:
            place, data_source = source["S3DataSource"]["S3Uri"].rstrip("/"), "s3"
            root = f"s3://{deployment.data_bucket}/{deployment.datasets_prefix}"
        else:
            system = source.get("FileSystemDataSource", {})
            place = system.get("DirectoryPath", "").rstrip("/")
            efs = system.get("FileSystemType") == "EFS"
            root = (deployment.efs_datasets_path if efs else deployment.fsx_datasets_path) or ""
            root, data_source = root.rstrip("/") + "/", "efs" if efs else "fsx"
        name = place[len(root):] if root and place.startswith(root) else ""
        return (name, data_source) if name and "/" not in name else (None, data_source)
    return None, None


def _key_hyperparameters(sent: Dict[str, str]) -> Tuple[Dict[str, Any], Optional[str]]:
    """The key hyperparameters as the job parsed what was sent (defaults included), and None; the
    sent strings where they no longer parse (a job of an older contract), and why not."""
    ours = {k: v for k, v in sent.items()
            if not k.startswith(contract_hyperparameters.PLATFORM_PREFIXES)}
    try:
        parsed, error = dataclasses.asdict(contract_hyperparameters.parse(ours)), None
    except contract_hyperparameters.HyperparameterError as refused:
        parsed, error = ours, str(refused)
    return {k: parsed[k] for k in KEY_HYPERPARAMETERS if k in parsed}, error


def billed_instance_hours(job: dict) -> Optional[float]:
    """SageMaker's billed instance-hours of a job: its billable seconds and its warm pool's
    retained seconds, times its instances (TRN-6); None before the job has billable time."""
    billable = job.get("BillableTimeInSeconds")
    if billable is None:
        return None
    retained = (job.get("WarmPoolStatus") or {}).get("ResourceRetainedBillableTimeInSeconds", 0)
    return (billable + retained) * job["ResourceConfig"]["InstanceCount"] / 3600


def _worst_class(report: dict) -> Optional[Tuple[str, float]]:
    task = report["tasks"].get(TASK)
    rows = [(row["AP"], k, row["name"]) for k, row in enumerate(task["per_class"]) if
            row.get("AP") is not None] if task else []
    if not rows:
        return None
    ap, _, name = min(rows)  # the first of equal APs, in the report's order
    return name, ap


def row(deployment: Deployment, job: dict, boto_session,
        prices: Optional[Dict[str, float]] = None) -> Run:
    """The row of one training job (its DescribeTrainingJob)."""
    name, notes = job["TrainingJobName"], []
    resources = job["ResourceConfig"]
    dataset, data_source = dataset_of(deployment, job)
    sent = job.get("HyperParameters") or {}
    hps, unparsed = _key_hyperparameters(sent)
    if unparsed:
        notes.append(f"hyperparameters{MARK} as sent, not as the job parsed them "
                     f"(this launcher's contract refuses them): {unparsed}")
    final = follow.final_metrics(job)
    spot = bool(job.get("EnableManagedSpotTraining"))
    hours = billed_instance_hours(job)
    price = (prices or {}).get(resources["InstanceType"])
    cost = hours * price if hours is not None and price is not None and not spot else None
    mask_ap, worst, from_report = final.get(FINAL_AP_METRIC), None, False
    if job["TrainingJobStatus"] != "Completed":
        no_report = (f"the job is {job['TrainingJobStatus']}: the table reads the evaluation "
                     "report of a Completed job only")
    else:
        try:
            report = evaluation_report.cached(deployment, name, boto_session).report
            summary = (report["tasks"].get(TASK) or {}).get("summary", {})
            worst = _worst_class(report)
            if "AP" in summary:
                mask_ap, from_report, no_report = summary["AP"], True, ""
            else:
                no_report = f"its evaluation report has no {TASK} AP"
        except lookup.RunRequestError as error:  # no model, or no report in it
            no_report = str(error)
    from_metric = mask_ap is not None and not from_report
    if from_metric:
        notes.append(f"mask AP{MARK} is SageMaker's final {FINAL_AP_METRIC} (the job's "
                     f"FinalMetricDataList), not the evaluation report's: {no_report}")
    elif no_report and job["TrainingJobStatus"] == "Completed":
        notes.append(no_report)
    tuning = job.get("TuningJobArn")
    return Run(
        job=name, status=job["TrainingJobStatus"], created=job["CreationTime"],
        dataset=dataset, data_source=data_source, distribution=sent.get("distribution"),
        instance_type=resources["InstanceType"], instance_count=resources["InstanceCount"],
        spot=spot, hyperparameters=hps, tuning_job=tuning.rsplit("/", 1)[-1] if tuning else None,
        duration_s=job.get("TrainingTimeInSeconds"), instance_hours=hours, cost=cost,
        mask_ap=mask_ap, best=final.get(job_metrics.BEST_OBJECTIVE),
        objective=hps.get("objective_metric") if job_metrics.BEST_OBJECTIVE in final else None,
        worst_class=worst, notes=tuple(notes), hyperparameters_as_sent=unparsed is not None,
        mask_ap_from_metric=from_metric)


def check_filters(dataset: Optional[str], last: Optional[int]) -> None:
    """Refuses a malformed dataset name and a number of runs below 1."""
    if dataset is not None:
        try:
            job_io.check_dataset_name(dataset)
        except job_io.DatasetNameError as error:
            raise lookup.RunRequestError(str(error)) from None
    if last is not None and last < 1:
        raise lookup.RunRequestError(f"--last {last}: the number of runs must be 1 or more")


def runs(deployment: Deployment, boto_session, dataset: Optional[str] = None,
         last: Optional[int] = None, prices: Optional[Dict[str, float]] = None) -> List[Run]:
    """The deployment's training jobs (staging jobs left out), newest first: those training on
    `dataset` if given, the `last` newest of them if given."""
    check_filters(dataset, last)
    sagemaker = boto_session.client("sagemaker")
    prefix, named = f"{deployment.job_name_prefix}-", []
    for page in sagemaker.get_paginator("list_training_jobs").paginate(
            NameContains=deployment.job_name_prefix, SortBy="CreationTime",
            SortOrder="Descending"):
        named += [(s["CreationTime"], s["TrainingJobName"]) for s in page["TrainingJobSummaries"]
                  if s["TrainingJobName"].startswith(prefix)
                  and not lookup.is_staging_job(deployment, s["TrainingJobName"])]
    found = []
    for _, name in sorted(named, reverse=True):  # newest first, whatever the pages' order
        job = sagemaker.describe_training_job(TrainingJobName=name)
        if lookup.is_staging_job(deployment, name, job):
            continue
        if dataset is not None and dataset_of(deployment, job)[0] != dataset:
            continue
        found.append(row(deployment, job, boto_session, prices))
        if last is not None and len(found) == last:
            break
    return found


def _sort_value(run: Run, key: str):
    return {"created": run.created, "job": run.job, "dataset": run.dataset or "",
            "distribution": run.distribution or "", "instance_hours": run.instance_hours,
            "cost": run.cost, "duration": run.duration_s, "mask_ap": run.mask_ap,
            "best": run.best, "worst_ap": run.worst_class[1] if run.worst_class else None}[key]


def sort(rows: List[Run], key: str = "created", descending: Optional[bool] = None) -> List[Run]:
    """The rows by `key` (SORT_KEYS); highest first unless `descending` is False (names A to Z
    by default). A row without the figure comes last."""
    if key not in SORT_KEYS:
        raise lookup.RunRequestError(f"sort key {key!r}: one of {', '.join(SORT_KEYS)}")
    if descending is None:
        descending = key not in ("job", "dataset", "distribution")
    known = [r for r in rows if _sort_value(r, key) is not None]
    unknown = [r for r in rows if _sort_value(r, key) is None]
    return sorted(known, key=lambda r: _sort_value(r, key), reverse=descending) + unknown


def _figure(value: Optional[float], fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def _hours(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def cells(run: Run) -> Dict[str, str]:
    """The row as the printed table shows it, by column."""
    best = "-" if run.best is None else f"{run.best:.3f} {run.objective or ''}".rstrip()
    cost = ("unknown (spot)" if run.spot else "unknown") if run.cost is None \
        and run.instance_hours is not None else _figure(run.cost, "${:.2f}")
    return {
        "job": run.job, "status": run.status, "created": run.created.strftime("%Y-%m-%d %H:%M"),
        "dataset": f"{run.dataset or '?'} ({run.data_source or '?'})",
        "distribution": run.distribution or "-",
        "instances": f"{run.instance_count} x {run.instance_type}" + (" spot" if run.spot else ""),
        "hyperparameters": " ".join(f"{k}={v}" for k, v in run.hyperparameters.items())
        + (f" {MARK}" if run.hyperparameters_as_sent else ""),
        "tuning job": run.tuning_job or "-",
        "training h": _hours(run.duration_s),
        "instance-hours": _figure(run.instance_hours, "{:.2f}"),
        "cost": cost, "mask AP": _figure(run.mask_ap) + (MARK if run.mask_ap_from_metric else ""),
        "best": best,
        "worst class": "-" if run.worst_class is None else
        f"{run.worst_class[0]} {run.worst_class[1]:.3f}",
    }


def lines(rows: List[Run]) -> List[str]:
    """The table as printed: a header, one line per run, then the notes of figures left out or
    marked MARK."""
    if not rows:
        return ["no training jobs of this deployment match"]
    table = [cells(r) for r in rows]
    columns = list(table[0])
    widths = {c: max([len(c)] + [len(t[c]) for t in table]) for c in columns}
    out = ["  ".join(f"{c:<{widths[c]}}" for c in columns).rstrip()]
    out += ["  ".join(f"{t[c]:<{widths[c]}}" for c in columns).rstrip() for t in table]
    out += [f"{r.job}: {note}" for r in rows for note in r.notes]
    return out
