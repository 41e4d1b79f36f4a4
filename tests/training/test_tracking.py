"""The job's MLflow tracking (maskrcnn_job/training/tracking.py) against a real MLflow server:
a run logged and read back, MLflow's limits kept without a silent cut, a server that fails
leaving one warning line and training going on, and the training image's own MLflow client and
SageMaker plugin logging to a tracking server by its ARN. The end to end proof, a job's run
logged and read back with its S3 artifacts and IAM evaluated, rides on
tests/training/test_evaluation_job.py's run."""

import contextlib
import dataclasses
import hashlib
import http.server
import io
import logging
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from maskrcnn_contract import hyperparameters, job_io, metrics
from maskrcnn_contract import tracking as contract

from maskrcnn_job.training import tracking
from tests.paths import REPO
from tests.training import mlflow_server

IMAGE_PYTHON = os.path.join(REPO, ".venv-image", "bin", "python")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("mlflow")
    with mlflow_server.running(str(work), (work / "artifacts").as_uri()) as running:
        yield running


def _environment(server, experiment, job="maskrcnn-test-unit-20260101000000"):
    return {contract.TRACKING_URI_ENV: server.uri, contract.EXPERIMENT_ENV: experiment,
            job_io.TRAINING_JOB_NAME_ENV: job}


def _only_run(uri, experiment):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert len(runs) == 1, runs
    return client, runs[0]


def test_a_run_is_logged_with_its_params_metric_lines_and_artifacts_and_read_back(
        server, tmp_path, caplog, capfd):
    """And the log stays clean: with the sagemaker-mlflow plugin installed (.venv's, as the
    image's), every request to an http URI would log the plugin's "list index out of range"
    warning (aws/sagemaker-mlflow#15), through MLflow's own handler on stderr."""
    hps = hyperparameters.parse({"max_steps": "4", "mixed_precision": "false",
                                 "lr_decay_epochs": "0.5,1"})
    lines = {"train/loss": 1.234567891, "train/step": 2, "eval/bbox_ARmax1": 0.5,
             "eval/segm_AP": 0.0312345678}
    model = tmp_path / "model"
    (model / "1" / "variables").mkdir(parents=True)
    (model / "1" / "saved_model.pb").write_bytes(b"\0" * 1000)
    (model / "1" / "variables" / "variables.index").write_bytes(b"\1" * 10)
    (model / "code" / "evaluation").mkdir(parents=True)
    (model / "code" / "evaluation" / "report.json").write_text('{"step": 4}')
    with caplog.at_level(logging.WARNING):
        tracker = tracking.start(hps, _environment(server, "unit-run"))
        assert tracker.active
        tracker.log_metrics(lines, step=2)
        tracker.log_metrics({"train/loss": 0.75, "train/step": 4}, step=4)
        tracker.finish(str(model), "1", "code/evaluation")
    assert not tracker.active
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    printed = capfd.readouterr()
    assert "WARNING" not in printed.err + printed.out, printed.err[-2000:]

    client, run = _only_run(server.uri, "unit-run")
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "maskrcnn-test-unit-20260101000000"
    assert run.data.tags[tracking.JOB_TAG] == run.info.run_name
    # The params, read by the job's own parser, are the hyperparameters.
    assert set(run.data.params) == {field.name for field in hyperparameters.fields()}
    assert hyperparameters.parse(run.data.params) == hps
    # The metric lines, as printed: ARmax1 is not one; values as the line gives them.
    printed = io.StringIO()
    metrics.emit(lines, printed)
    history = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss")]
    assert history == [(2, float(printed.getvalue().split("train/loss: ")[1].split()[0])),
                       (4, 0.75)]
    assert set(run.data.metrics) == {"train/loss", "train/step", "eval/segm_AP"}
    assert run.data.metrics["eval/segm_AP"] == 0.0312346
    files = {f.path: f.file_size for f in client.list_artifacts(run.info.run_id, "model")}
    assert files == {"model/saved_model.pb": 1000, "model/variables": None}
    assert [f.path for f in client.list_artifacts(run.info.run_id, "evaluation")] == [
        "evaluation/report.json"]


def test_a_param_longer_than_mlflows_limit_is_named_and_left_out_not_cut(server, caplog):
    """MLflow cuts a param value above 6000 characters to 6000 without a word
    (MLFLOW_TRUNCATE_LONG_VALUES, docs/aws-rules.md MLF-5): the job names it instead."""
    long = ",".join(["0.5"] * 2000)  # 7999 characters
    hps = dataclasses.replace(hyperparameters.parse({}), lr_decay_epochs=long)
    with caplog.at_level(logging.WARNING, logger=tracking.__name__):
        tracker = tracking.start(hps, _environment(server, "unit-long"))
    tracker.end(failed=True)
    _, run = _only_run(server.uri, "unit-long")
    assert run.info.status == "FAILED"
    assert "lr_decay_epochs" not in run.data.params
    assert len(run.data.params) == len(hyperparameters.fields()) - 1
    # An earlier test in the same process may have set the job's loggers to INFO (the job's own
    # logging set-up): only the warnings are this test's.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "MLflow: hyperparameter(s) lr_decay_epochs not logged: longer than MLflow's 6000 "
        "characters per param, which it would cut"]


def test_mlflows_limits_are_mlflows_own_and_batches_keep_them():
    from mlflow.utils import validation

    assert tracking.MAX_PARAM_VALUE == validation.MAX_PARAM_VAL_LENGTH
    assert tracking.MAX_PARAMS_AND_TAGS_PER_BATCH == validation.MAX_PARAMS_TAGS_PER_BATCH
    assert tracking.MAX_METRICS_PER_BATCH == validation.MAX_METRICS_PER_BATCH
    assert [len(part) for part in tracking.chunks(list(range(2501)), 1000)] == [1000, 1000, 501]
    assert list(tracking.chunks([], 100)) == []


class _Counting:
    """A real MlflowClient, with the LogBatch calls made through it counted."""

    def __init__(self, client):
        self.client, self.batches = client, []

    def log_batch(self, run_id, **entities):
        self.batches.append({kind: len(items) for kind, items in entities.items() if items})
        return self.client.log_batch(run_id, **entities)


def test_a_batch_beyond_mlflows_limits_goes_in_calls_that_keep_them(server):
    """MLflow takes at most 100 params and tags together and 1000 metrics per LogBatch
    (docs/aws-rules.md MLF-5): the job splits what it logs so (the client of another MLflow
    version need not)."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    tracker = tracking.start(hyperparameters.parse({}), _environment(server, "unit-many"))
    counting = _Counting(MlflowClient(server.uri))
    batched = tracking.Tracker(counting, tracker.run_id, "unit")
    batched.log_batch(params={f"p{i}": str(i) for i in range(150)},
                      tags={f"t{i}": str(i) for i in range(60)},
                      metrics=[Metric("train/loss", float(i), 0, i) for i in range(2500)])
    assert batched.active
    assert counting.batches == [{"params": 100}, {"params": 50, "tags": 50}, {"tags": 10},
                                {"metrics": 1000}, {"metrics": 1000}, {"metrics": 500}]
    tracker.end(failed=False)
    client, run = _only_run(server.uri, "unit-many")
    assert len(client.get_metric_history(run.info.run_id, "train/loss")) == 2500
    assert {f"p{i}" for i in range(150)} <= set(run.data.params)


def test_a_server_that_cannot_be_reached_stops_tracking_with_one_warning_line(caplog, capfd):
    """Never the job's end, never a long stall: MLflow's short timeout and retries, then one
    warning naming the cause without an exception class name (the failure-reason scan), and
    every later call a no-op."""
    closed = f"http://127.0.0.1:{mlflow_server.free_port()}"
    started = time.time()
    with caplog.at_level(logging.WARNING):
        tracker = tracking.start(hyperparameters.parse({}), {contract.TRACKING_URI_ENV: closed})
        tracker.log_metrics({"train/loss": 1.0}, step=1)
        tracker.finish("/nonexistent", "1", "code/evaluation")
        tracker.end(failed=True)
    assert time.time() - started < 60
    assert not tracker.active
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"MLflow tracking stopped while starting the run (experiment "
                                  f"'Default' on {closed}), training goes on without it: ")
    assert "Error" not in messages[0] and "Exception" not in messages[0]
    printed = capfd.readouterr()  # nor a line of MLflow's or urllib3's own (their retries)
    assert "WARNING" not in printed.err + printed.out, printed.err[-2000:]


def test_a_run_whose_server_goes_away_stops_logging_after_one_warning(server, caplog):
    from mlflow.tracking import MlflowClient

    tracker = tracking.start(hyperparameters.parse({}), _environment(server, "unit-gone"))
    run_id = tracker.run_id
    closed = f"http://127.0.0.1:{mlflow_server.free_port()}"
    gone = tracking.Tracker(MlflowClient(closed), run_id, f"on {closed}")
    with caplog.at_level(logging.WARNING, logger=tracking.__name__):
        gone.log_metrics({"train/loss": 1.0}, step=1)
        gone.log_metrics({"train/loss": 0.5}, step=2)
        gone.end(failed=False)
    assert [r.getMessage().split(":")[0]
            for r in caplog.records if r.levelno >= logging.WARNING] == [
        "MLflow tracking stopped while logging the metrics of step 1 (on http"]
    tracker.end(failed=False)


def test_a_report_folder_that_is_not_there_is_named_in_a_warning_and_the_model_logged(
        server, tmp_path, caplog):
    """A job whose evaluation report was not written (no evaluation ran, or writing it failed):
    the run says which folder it lacks instead of finishing without it in silence."""
    model = tmp_path / "model"
    (model / "1").mkdir(parents=True)
    (model / "1" / "saved_model.pb").write_bytes(b"\0" * 10)
    with caplog.at_level(logging.INFO, logger=tracking.__name__):
        tracker = tracking.start(hyperparameters.parse({}), _environment(server, "unit-no-report"))
        tracker.finish(str(model), "1", "code/evaluation")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"MLflow: evaluation/ not logged: {model}/code/evaluation is not there"]
    assert any(r.getMessage().startswith(f"MLflow run {tracker.run_id}: the SavedModel uploaded")
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    client, run = _only_run(server.uri, "unit-no-report")
    assert run.info.status == "FINISHED"
    assert [f.path for f in client.list_artifacts(run.info.run_id)] == ["model"]


def test_without_a_tracking_uri_there_is_no_run_and_nothing_said(caplog):
    with caplog.at_level(logging.DEBUG):
        tracker = tracking.start(hyperparameters.parse({}), {contract.EXPERIMENT_ENV: "x"})
        tracker.log_metrics({"train/loss": 1.0}, step=1)
        tracker.finish("/nonexistent", "1", "code/evaluation")
    assert not tracker.active and tracker.run_id is None
    assert not [r for r in caplog.records if r.name.startswith(("maskrcnn_job", "mlflow"))]


@contextlib.contextmanager
def _recording_relay(target):
    """A plain HTTP relay to `target` on a free local port: (its URI, every request it relayed as
    (method, path, headers, body))."""
    relayed = []
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    class Relay(http.server.BaseHTTPRequestHandler):
        def relay(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            relayed.append((self.command, self.path, dict(self.headers), body))
            forwarded = urllib.request.Request(
                target + self.path, data=body if body else None, method=self.command,
                headers={k: v for k, v in self.headers.items()
                         if k.lower() not in ("host", "connection", "content-length")})
            try:
                with direct.open(forwarded, timeout=60) as answer:
                    status, kind, content = answer.status, answer.headers.get("Content-Type"), \
                        answer.read()
            except urllib.error.HTTPError as error:
                status, kind, content = error.code, error.headers.get("Content-Type"), error.read()
            self.send_response(status)
            self.send_header("Content-Type", kind or "application/json")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_PATCH = do_DELETE = relay

        def log_message(self, *args):
            pass

    relay = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{relay.server_port}", relayed
    finally:
        relay.shutdown()
        relay.server_close()


_SIGV4 = re.compile(r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
                    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[^,]+), "
                    r"Signature=(?P<signature>[0-9a-f]{64})")


def _unsigned(method, path, headers, body, credentials, region, service):
    """Why a relayed request is not SigV4-signed by `credentials` (key, secret, token) for
    `region` and `service` over what was sent (its method, path, query, signed headers and
    body), or None: the signature recomputed with botocore's SigV4Auth, as AWS checks it."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    sent = {k.lower(): v for k, v in headers.items()}
    found = _SIGV4.fullmatch(sent.get("authorization", ""))
    if not found:
        return f"no SigV4 Authorization header: {sent.get('authorization')!r}"
    if (found["key"], found["region"], found["service"]) != (credentials[0], region, service):
        return f"signed as {found['key']} for {found['region']}/{found['service']}"
    signed = found["signed"].split(";")
    for needed in ("host", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"):
        if needed not in signed:
            return f"{needed} is not signed: {signed}"
    if sent["x-amz-security-token"] != credentials[2]:
        return "another session token"
    if sent["x-amz-content-sha256"] != hashlib.sha256(body).hexdigest():
        return "x-amz-content-sha256 is not the body's"
    request = AWSRequest(method=method, url=f"http://{sent['host']}{path}", data=body,
                         headers={name: sent[name] for name in signed})
    request.context["timestamp"] = sent["x-amz-date"]
    signer = SigV4Auth(Credentials(*credentials), service, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)),
                                request)
    return None if expected == found["signature"] else "the signature does not match"


def test_the_images_mlflow_client_logs_to_a_tracking_server_by_its_arn_signing_each_request(
        server):
    """The job as the training image runs it: the DLC's mlflow-skinny 3.15.1 and sagemaker-mlflow
    0.4.0 (.venv-image's, at the image lock's versions), a tracking URI that is the managed
    server's ARN, which the plugin signs (SigV4, the job role's credentials: stand-ins here)
    and sends to the server SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT names (a relay that records each
    request in front of this real server, in place of
    https://<region>.experiments.sagemaker.aws). Every request is checked signed: the signature
    recomputed over what was sent, with the stand-in credentials, for the ARN's region and the
    plugin's service name for a tracking server (sagemaker-mlflow)."""
    arn = "arn:aws:sagemaker:eu-west-2:123456789012:mlflow-tracking-server/maskrcnn-test-mlflow"
    script = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
        "import mlflow, importlib.metadata as m\n"
        "print('client', mlflow.__version__, m.version('sagemaker-mlflow'))\n"
        "from maskrcnn_contract import hyperparameters\n"
        "from maskrcnn_job.training import tracking\n"
        "t = tracking.start(hyperparameters.parse({'max_steps': '3'}))\n"
        "t.log_metrics({'train/loss': 0.5, 'train/step': 3}, step=3)\n"
        "t.end(failed=False)\n")
    environment = {**os.environ, "PYTHONPATH": os.path.join(REPO, "training_code"),
                   contract.TRACKING_URI_ENV: arn, contract.EXPERIMENT_ENV: "unit-image",
                   job_io.TRAINING_JOB_NAME_ENV: "maskrcnn-test-image-1",
                   "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "eu-west-2",
                   "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}
    with _recording_relay(server.uri) as (relay, relayed):
        done = subprocess.run([IMAGE_PYTHON, "-c", script], capture_output=True, text=True,
                              env={**environment, "SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT": relay},
                              timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(relayed) >= 4, relayed  # the experiment, the run, its params, metrics and end
    unsigned = [(f"{method} {path}", _unsigned(method, path, headers, body,
                                               ("testing", "testing", "testing"), "eu-west-2",
                                               "sagemaker-mlflow"))
                for method, path, headers, body in relayed]
    assert [(request, why) for request, why in unsigned if why] == []
    assert "client 3.15.1 0.4.0" in done.stdout
    assert "ended FINISHED" in done.stdout, done.stdout + done.stderr
    assert "WARNING" not in done.stdout + done.stderr, done.stdout + done.stderr
    client, run = _only_run(server.uri, "unit-image")
    assert run.info.run_name == "maskrcnn-test-image-1" and run.info.status == "FINISHED"
    assert hyperparameters.parse(run.data.params).max_steps == 3
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss")] \
        == [(3, 0.5)]
