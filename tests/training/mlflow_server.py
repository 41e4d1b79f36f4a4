"""A real MLflow tracking server on 127.0.0.1 for the tests, not a mock.

The full MLflow of .venv (`python -m mlflow server`), a SQLite backend store, bound to
127.0.0.1 on a free port, ready when /health answers (about 25 s here), stopped by its PID.
Artifacts as SageMaker's managed servers keep them (docs/aws-rules.md MLF-3): with an `s3://`
artifact root and `--no-serve-artifacts`, the server hands clients the S3 location and the
client uploads there itself with boto3 (MLFLOW_S3_ENDPOINT_URL points both at a moto server);
a `file://` root serves tests without S3. The server's access log names every REST call its
clients made (`calls`, `actions`).
"""

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Dict, Iterator, List, Optional, Tuple

# The MLflow REST API's endpoints and the SageMaker MLflow action that authorizes each on a
# managed tracking server (Service Authorization Reference, "Amazon SageMaker with MLflow": one
# action per API, named after it; MLflow's REST API reference for the paths).
ACTIONS = {
    ("GET", "/api/2.0/mlflow/experiments/get-by-name"): "GetExperimentByName",
    ("POST", "/api/2.0/mlflow/experiments/create"): "CreateExperiment",
    ("GET", "/api/2.0/mlflow/experiments/get"): "GetExperiment",
    ("POST", "/api/2.0/mlflow/experiments/search"): "SearchExperiments",
    ("POST", "/api/2.0/mlflow/runs/create"): "CreateRun",
    ("GET", "/api/2.0/mlflow/runs/get"): "GetRun",
    ("POST", "/api/2.0/mlflow/runs/update"): "UpdateRun",
    ("POST", "/api/2.0/mlflow/runs/search"): "SearchRuns",
    ("POST", "/api/2.0/mlflow/runs/log-batch"): "LogBatch",
    ("POST", "/api/2.0/mlflow/runs/log-metric"): "LogMetric",
    ("POST", "/api/2.0/mlflow/runs/log-parameter"): "LogParam",
    ("POST", "/api/2.0/mlflow/runs/set-tag"): "SetTag",
    ("GET", "/api/2.0/mlflow/metrics/get-history"): "GetMetricHistory",
    ("GET", "/api/2.0/mlflow/artifacts/list"): "ListArtifacts",
}
_ACCESS = re.compile(r'"(GET|POST|PATCH|DELETE|PUT) ([^ ?"]+)[^"]* HTTP/[\d.]+" (\d{3})')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    def __init__(self, uri: str, log_file: str, process: subprocess.Popen):
        self.uri, self.log_file, self.process = uri, log_file, process

    def calls(self) -> List[Tuple[str, str, int]]:
        """(method, path, status) of every request the server answered so far, in order."""
        with open(self.log_file, encoding="utf-8", errors="replace") as f:
            return [(m, p, int(s)) for m, p, s in _ACCESS.findall(f.read()) if p != "/health"]

    def actions(self, calls: List[Tuple[str, str, int]]) -> List[str]:
        """The SageMaker MLflow actions of `calls`; an endpoint not in ACTIONS fails, named."""
        unknown = sorted({(m, p) for m, p, _ in calls if (m, p) not in ACTIONS})
        assert not unknown, f"add these MLflow endpoints to ACTIONS, with their action: {unknown}"
        return [ACTIONS[(m, p)] for m, p, _ in calls]


@contextlib.contextmanager
def running(work_dir: str, artifact_root: str, environment: Optional[Dict[str, str]] = None,
            timeout: float = 120) -> Iterator[MlflowServer]:
    """The server for the duration of the block; `environment` over this process's (the S3
    endpoint and credentials of an s3:// artifact root)."""
    os.makedirs(work_dir, exist_ok=True)
    port = free_port()
    log_file = os.path.join(work_dir, "mlflow-server.log")
    command = [sys.executable, "-m", "mlflow", "server",
               "--backend-store-uri", f"sqlite:///{os.path.join(work_dir, 'mlflow.db')}",
               "--default-artifact-root", artifact_root, "--no-serve-artifacts",
               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with open(log_file, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, **(environment or {})},
                                   start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"mlflow server exited {process.returncode}:\n"
                                   + open(log_file, encoding="utf-8").read()[-3000:])
            try:
                with urllib.request.urlopen(uri + "/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"mlflow server not ready in {timeout} s:\n"
                                   + open(log_file, encoding="utf-8").read()[-3000:])
            time.sleep(0.5)
        yield MlflowServer(uri, log_file, process)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 15)  # the server's own session: uvicorn and its worker
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()
