"""One host's supervision of its parameter-server tasks, with stand-in task programs (no
TensorFlow: each task is a small Python process that behaves as the test tells it)."""

import json
import os
import socket
import sys
import threading
import time

import pytest

from maskrcnn_job import sagemaker_env
from maskrcnn_job.distribution import cluster_spec, parameter_server_host

# A stand-in task: reads its task from TF_CONFIG and its fate from FAKE_TASKS
# ({"chief:0": "exit 3", "ps:0": "sleep"}); the default is to serve (sleep) until stopped.
FAKE_TASK = r"""
import json, os, sys, time
config = json.loads(os.environ["TF_CONFIG"])
task = f"{config['task']['type']}:{config['task']['index']}"
fate = json.loads(os.environ.get("FAKE_TASKS", "{}")).get(task, "sleep")
marker = os.environ["FAKE_STARTS"]
with open(marker, "a") as f:
    f.write(task + "\n")
if fate.startswith("exit "):
    time.sleep(0.3)
    sys.exit(int(fate.split()[1]))
time.sleep(600)
"""


def _env(tmp_path, hosts, current):
    return sagemaker_env.JobEnvironment(
        opt_ml=str(tmp_path), hyperparameters_file="", channels={}, model_dir="",
        output_data_dir="", checkpoint_dir="", tensorboard_dir="",
        failure_file=str(tmp_path / "failure"),
        hosts=hosts, current_host=current)


@pytest.fixture
def fake_tasks(tmp_path, monkeypatch):
    starts = tmp_path / "starts"
    monkeypatch.setenv("FAKE_STARTS", str(starts))
    monkeypatch.setattr(parameter_server_host, "POLL_SECONDS", 0.05)

    def run(hosts, current, fates, timeout=30):
        monkeypatch.setenv("FAKE_TASKS", json.dumps(fates))
        result = {}

        def target():
            try:
                result["status"] = parameter_server_host.run(
                    _env(tmp_path, hosts, current), None, [sys.executable, "-c", FAKE_TASK])
            except parameter_server_host.TaskFailed as error:
                result["error"] = str(error)

        started = time.time()
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        thread.join(timeout)
        assert not thread.is_alive(), "the supervisor did not return"
        result["seconds"] = time.time() - started
        result["starts"] = starts.read_text().split() if starts.exists() else []
        return result

    return run


def test_the_chief_host_runs_a_ps_a_worker_and_the_chief_and_ends_with_the_chief(fake_tasks):
    result = fake_tasks(["algo-1"], "algo-1", {"chief:0": "exit 0"})
    assert result["status"] == 0
    assert sorted(result["starts"]) == ["chief:0", "ps:0", "worker:0"]


def test_a_failing_chief_fails_the_host(fake_tasks):
    result = fake_tasks(["algo-1"], "algo-1", {"chief:0": "exit 3"})
    assert result["status"] == 1


def test_a_lost_ps_fails_the_host_at_once_naming_it(fake_tasks):
    result = fake_tasks(["algo-1"], "algo-1", {"ps:0": "exit 1"})
    assert "parameter server ps:0 on algo-1 exited with status 1" in result["error"]
    assert result["seconds"] < 10


def test_a_lost_worker_is_started_again_up_to_the_limit(fake_tasks):
    result = fake_tasks(["algo-1"], "algo-1", {"worker:0": "exit 1"})
    limit = parameter_server_host.MAX_WORKER_RESTARTS
    assert result["starts"].count("worker:0") == 1 + limit
    assert f"worker worker:0 on algo-1 exited with status 1 after {limit} restarts" \
        in result["error"]


def test_another_host_stops_when_the_chief_is_gone(fake_tasks, monkeypatch):
    # The chief's address is 127.0.0.1 here: the test listens there for a while, then stops.
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    monkeypatch.setattr(cluster_spec, "CHIEF_PORT", port)
    threading.Timer(1.0, listener.close).start()
    result = fake_tasks(["127.0.0.1", "algo-2"], "algo-2", {})
    assert result["status"] == 0
    assert sorted(result["starts"]) == ["ps:1", "worker:1"]


def test_another_host_gives_up_on_a_chief_that_never_comes(fake_tasks, monkeypatch):
    monkeypatch.setattr(parameter_server_host, "CHIEF_START_TIMEOUT_SECONDS", 1)
    monkeypatch.setattr(cluster_spec, "CHIEF_PORT", 1)  # nothing listens there
    result = fake_tasks(["127.0.0.1", "algo-2"], "algo-2", {})
    assert "did not come up within 1 s" in result["error"]
