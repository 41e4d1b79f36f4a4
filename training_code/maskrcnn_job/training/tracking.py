"""Experiment tracking with MLflow: the chief's run on the tracking server the launch names.

Active only when the job's environment names a tracking URI (MLflow's own MLFLOW_TRACKING_URI and
MLFLOW_EXPERIMENT_NAME, which the launcher puts in the request's Environment: maskrcnn_contract.
tracking), and only on the chief. The URI is a SageMaker managed tracking server's ARN, which the
training image's sagemaker-mlflow plugin signs (the job role's credentials) and routes, or an
http(s) URL (local runs). One run per training job, named after it (TRAINING_JOB_NAME, which
SageMaker sets; tagged with it too), in the experiment, created when missing. It logs:
- the hyperparameters as parsed, as params (a value longer than MLflow's limit is named in a
  warning and left out: MLflow would cut it quietly);
- every metric line the chief prints (maskrcnn_contract.metrics: the same names, and the values as
  the lines give them), at the training step, batched;
- at the end, the SavedModel (`model/`) and the evaluation report beside it (`evaluation/`), as
  plain artifacts, which the MLflow client uploads to the server's S3 artifact store itself (a
  folder that is not there is named in a warning);
and ends the run FINISHED, or FAILED when the job fails. MlflowClient directly: no autolog, no
fluent run, nothing global but the loggers named below.

Tracking never stops or stalls training: MLflow's HTTP timeout and retries are short here
(a value the environment already gives is kept), and the first call that fails ends tracking for
the rest of the job with one warning line naming its cause, worded for the failure-reason scan
(sagemaker_env.quiet_for_the_failure_scan, as an evaluation report that cannot be written is);
training goes on. docs/experiments.md.
"""

import dataclasses
import logging
import os
import time
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

from maskrcnn_contract import hyperparameters, job_io, tracking
from maskrcnn_contract import metrics as metric_lines
from maskrcnn_contract.hyperparameters import Hyperparameters

from maskrcnn_job import sagemaker_env

log = logging.getLogger(__name__)

JOB_TAG = "sagemaker.training_job"
# Where the artifacts go in the run.
MODEL_ARTIFACTS, REPORT_ARTIFACTS = "model", "evaluation"
# MLflow's HTTP settings for this job, unless the environment sets them: a call waits at most
# TIMEOUT s and is tried 1 + RETRIES times (MLflow's defaults, 120 s and 7 retries with backoff,
# could hold the chief, and every rank at its next collective, for minutes).
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2"}
# MLflow's limits (mlflow/utils/validation.py; docs/aws-rules.md MLF-5): a param's value, and a
# LogBatch's params and tags together and its metrics.
MAX_PARAM_VALUE = 6000
MAX_PARAMS_AND_TAGS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000
# With the sagemaker-mlflow plugin installed, every request to a URI that is not an ARN logs a
# warning of the plugin's header provider ("list index out of range", aws/sagemaker-mlflow#15).
_HEADER_PROVIDERS = "mlflow.tracking.request_header.registry"
# urllib3 logs each retry as a warning that names an exception class, which the failure-reason scan
# would quote; a failure is reported once, by this module, after the retries.
_RETRIES = "urllib3.connectionpool"


def params_of(hps: Hyperparameters) -> Dict[str, str]:
    """The hyperparameters as params, as SageMaker hands them to the job: the job's parser reads
    the run's params back as the same hyperparameters."""
    return {name: hyperparameters.as_sent(value)
            for name, value in dataclasses.asdict(hps).items()}


def metric_values(values: Mapping[str, float]) -> Dict[str, float]:
    """{name: value} of the metric lines `values` make (metrics.emit): the figures left out of
    the lines are left out, each value as its line gives it."""
    return {name: float(metric_lines.format_line(name, float(value)).split(": ", 1)[1])
            for name, value in values.items() if not metric_lines.left_out_of_metric_lines(name)}


def chunks(items: Sequence, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield list(items[start:start + size])


class Tracker:
    """The chief's MLflow run, or nothing (`Tracker.off()`): every method is safe to call."""

    def __init__(self, client=None, run_id: Optional[str] = None, where: str = ""):
        self._client, self.run_id, self._where = client, run_id, where

    @classmethod
    def off(cls) -> "Tracker":
        return cls()

    @property
    def active(self) -> bool:
        return self._client is not None

    def _stop(self, doing: str, error: BaseException) -> None:
        """Ends tracking for the rest of the job: one warning line with the cause."""
        cause = (str(error).strip().splitlines() or [""])[0][:300]
        log.warning("MLflow tracking stopped while %s (%s), training goes on without it: %s",
                    doing, self._where, sagemaker_env.quiet_for_the_failure_scan(
                        f"{type(error).__name__}: {cause}"))
        self._client = None

    def log_batch(self, params: Optional[Mapping[str, str]] = None, metrics: Iterable = (),
                  tags: Optional[Mapping[str, str]] = None, doing: str = "logging") -> None:
        """Params, metrics (mlflow.entities.Metric) and tags in as many LogBatch calls as MLflow's
        limits need."""
        if not self.active:
            return
        from mlflow.entities import Param, RunTag

        metrics = list(metrics)
        keyed = [Param(k, v) for k, v in (params or {}).items()] + \
                [RunTag(k, v) for k, v in (tags or {}).items()]
        try:
            for part in chunks(keyed, MAX_PARAMS_AND_TAGS_PER_BATCH):
                self._client.log_batch(self.run_id,
                                       params=[p for p in part if isinstance(p, Param)],
                                       tags=[t for t in part if isinstance(t, RunTag)])
            for part in chunks(metrics, MAX_METRICS_PER_BATCH):
                self._client.log_batch(self.run_id, metrics=part)
        except Exception as error:  # noqa: BLE001  (tracking is secondary: the training is not)
            self._stop(doing, error)

    def log_metrics(self, values: Mapping[str, float], step: int) -> None:
        """The metric lines of `values` (what metrics.emit prints), at `step`."""
        if not self.active:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.log_batch(metrics=[Metric(name, value, now, step)
                                for name, value in metric_values(values).items()],
                       doing=f"logging the metrics of step {step}")

    def log_artifacts(self, local_dir: str, artifact_path: str) -> bool:
        """`local_dir` as the run's `artifact_path`/; whether it was logged. A folder that is not
        there is named in a warning (the run goes on without it)."""
        if not self.active:
            return False
        if not os.path.isdir(local_dir):
            log.warning("MLflow: %s/ not logged: %s is not there", artifact_path, local_dir)
            return False
        try:
            self._client.log_artifacts(self.run_id, local_dir, artifact_path)
        except Exception as error:  # noqa: BLE001
            self._stop(f"uploading {local_dir} as {artifact_path}/", error)
            return False
        return True

    def finish(self, model_dir: str, saved_model: str, report: str) -> None:
        """The SavedModel and the report beside it (relative to `model_dir`) as artifacts, then
        the run FINISHED."""
        if not self.active:
            return
        started = time.time()
        uploaded = [what for what, folder, artifact_path in (
            ("the SavedModel", saved_model, MODEL_ARTIFACTS),
            ("the evaluation report", report, REPORT_ARTIFACTS))
            if self.log_artifacts(os.path.join(model_dir, folder), artifact_path)]
        if uploaded:
            log.info("MLflow run %s: %s uploaded in %.0f s", self.run_id, " and ".join(uploaded),
                     time.time() - started)
        self.end(failed=False)

    def end(self, failed: bool) -> None:
        if not self.active:
            return
        status = "FAILED" if failed else "FINISHED"
        try:
            self._client.set_terminated(self.run_id, status)
        except Exception as error:  # noqa: BLE001
            self._stop(f"ending the run {status}", error)
            return
        log.info("MLflow run %s ended %s (%s)", self.run_id, status, self._where)
        self._client = None


def _experiment_id(client, name: str) -> str:
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name)
    except MlflowException as error:  # another job created it meanwhile (a tuning job's)
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        return client.get_experiment_by_name(name).experiment_id


def oversized_params(params: Mapping[str, str]) -> List[str]:
    return sorted(name for name, value in params.items() if len(value) > MAX_PARAM_VALUE)


def start(hps: Hyperparameters, environ: Optional[Mapping[str, str]] = None) -> Tracker:
    """The chief's run, its params logged; Tracker.off() when the environment names no tracking
    URI, or when the server cannot be reached (said once, as every failure)."""
    env = os.environ if environ is None else environ
    uri = env.get(tracking.TRACKING_URI_ENV)
    if not uri:
        return Tracker.off()
    experiment = env.get(tracking.EXPERIMENT_ENV) or "Default"
    job = env.get(job_io.TRAINING_JOB_NAME_ENV)  # SageMaker's (local_run sets it too)
    for name, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(name, value)
    logging.getLogger(_RETRIES).setLevel(logging.ERROR)
    if not uri.startswith("arn:"):
        logging.getLogger(_HEADER_PROVIDERS).setLevel(logging.ERROR)
    where = f"experiment {experiment!r} on {uri}"
    tracker = Tracker(where=where)
    params = params_of(hps)
    too_long = oversized_params(params)
    if too_long:
        log.warning("MLflow: hyperparameter(s) %s not logged: longer than MLflow's %d characters "
                    "per param, which it would cut", ", ".join(too_long), MAX_PARAM_VALUE)
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        run = client.create_run(_experiment_id(client, experiment), run_name=job,
                                tags={JOB_TAG: job} if job else None)
    except Exception as error:  # noqa: BLE001
        tracker._stop("starting the run", error)  # pylint: disable=protected-access
        return tracker
    tracker = Tracker(client, run.info.run_id, where)
    tracker.log_batch(params={k: v for k, v in params.items() if k not in too_long},
                      doing="logging the hyperparameters")
    if tracker.active:
        log.info("MLflow run %s (%s) of %s", run.info.run_id, job or "unnamed job", where)
    return tracker
