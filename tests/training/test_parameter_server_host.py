"""One host's supervision of its parameter-server tasks, with stand-in task programs (no
TensorFlow: each task is a small Python process that behaves as the test tells it), and the
states it serves to the chief's stall watchdog: a task stopped with SIGSTOP named in the chief's
report. The same on 2 emulated hosts with the real job: test_strategies.py."""

import json
import os
import signal
import socket
import sys
import threading
import time

import pytest

from maskrcnn_contract import hyperparameters

from maskrcnn_job import job, sagemaker_env
from maskrcnn_job.distribution import cluster_spec, parameter_server_host
from maskrcnn_job.training import peers

from tests.training import processes

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


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


@pytest.fixture
def fake_tasks(tmp_path, monkeypatch):
    starts = tmp_path / "starts"
    monkeypatch.setenv("FAKE_STARTS", str(starts))
    monkeypatch.setattr(parameter_server_host, "POLL_SECONDS", 0.05)
    # Not the job's fixed port: another supervisor on this machine would hold it.
    monkeypatch.setattr(cluster_spec, "SUPERVISOR_PORT", _free_port())

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


def test_a_killed_ps_fails_the_host_naming_the_signal(fake_tasks, tmp_path):
    # What ends a job whose PS dies (test_strategies.py stops one instead: the stall report).
    def kill_ps_when_started():
        while True:
            starts = tmp_path / "starts"
            if starts.exists() and "ps:0" in starts.read_text().split():
                break
            time.sleep(0.05)
        time.sleep(0.2)
        for pid in _children_with("--tf_task=ps:0"):
            os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill_ps_when_started, daemon=True).start()
    result = fake_tasks(["algo-1"], "algo-1", {})
    assert result["error"] == ("parameter server ps:0 on algo-1 was killed by signal SIGKILL: "
                               "the variables it held are lost, the job cannot continue")


def _children_with(argument: str):
    """This process's tasks whose arguments hold `argument`."""
    return [pid for pid in processes.descendants(os.getpid())
            if argument.encode() in processes.arguments(pid)]


def _ask(port, host="algo-1"):
    answer, = peers.ask_all([{"who": parameter_server_host.SUPERVISOR, "host": host,
                              "port": port}], own_host=host)
    return answer


def _wait_for_tasks(port, count, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        answer = _ask(port)
        if answer.status and len(answer.status["tasks"]) == count and all(
                t["state"] == peers.RUNNING for t in answer.status["tasks"]):
            return answer.status
        time.sleep(0.1)
    raise AssertionError(f"the supervisor did not serve {count} running tasks: {answer.status}")


def test_the_supervisor_serves_its_tasks_states_and_the_chief_names_a_stopped_ps(
        tmp_path, monkeypatch):
    """The supervisor serves each task's state from the start; a PS stopped with SIGSTOP is
    "stopped", and the chief's watchdog as the job makes it (job.stall_watchdog, its peers every
    host's supervisor) names it; the host then ends with its chief, the stopped PS included, well
    within the stop's grace (it is continued to receive its SIGTERM)."""
    monkeypatch.setenv("FAKE_STARTS", str(tmp_path / "starts"))
    monkeypatch.setenv("FAKE_TASKS", "{}")
    monkeypatch.setattr(parameter_server_host, "POLL_SECONDS", 0.05)
    port = _free_port()
    monkeypatch.setattr(cluster_spec, "SUPERVISOR_PORT", port)
    env = _env(tmp_path, ["algo-1"], "algo-1")
    result = {}
    supervisor = threading.Thread(target=lambda: result.update(status=parameter_server_host.run(
        env, None, [sys.executable, "-c", FAKE_TASK])), daemon=True)
    supervisor.start()
    pids = {}
    try:
        status = _wait_for_tasks(port, 3)
        assert status["who"] == "the supervisor" and status["host"] == "algo-1"
        assert [(t["task"], t["state"], t["restarts"]) for t in status["tasks"]] == [
            ("ps:0", "running", 0), ("worker:0", "running", 0), ("chief:0", "running", 0)]
        pids = {t["task"]: t["pid"] for t in status["tasks"]}
        processes.stop(pids["ps:0"])
        states = {t["task"]: t["state"] for t in _ask(port).status["tasks"]}
        assert states == {"ps:0": "stopped", "worker:0": "running", "chief:0": "running"}

        hps = hyperparameters.parse({"distribution": "parameter_server"})
        monkeypatch.setenv(cluster_spec.TF_CONFIG, json.dumps(
            cluster_spec.parameter_server(["algo-1"], ("chief", 0))))
        chief = job.stall_watchdog(env, hps)
        assert chief.who == "chief 0"
        assert chief.ask_peers(1000) == ("; stopped by a signal: ps:0 on algo-1; answering: "
                                         "the supervisor on algo-1 (running: worker:0, chief:0)")
    finally:
        stopped_at = time.time()
        if "chief:0" in pids:
            os.kill(pids["chief:0"], signal.SIGKILL)  # the host ends with its chief
        supervisor.join(30)
    assert not supervisor.is_alive()
    assert result["status"] == 1
    assert time.time() - stopped_at < 5  # not the 10 s grace: the stopped PS got its SIGTERM
    assert (tmp_path / "failure").read_text().startswith(
        "chief on algo-1 was killed by signal SIGKILL")


def test_a_restarted_worker_is_served_with_its_restarts_and_an_exited_one_with_its_status(
        tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_STARTS", str(tmp_path / "starts"))
    monkeypatch.setenv("FAKE_TASKS", json.dumps({"worker:0": "exit 3"}))
    tasks = parameter_server_host.HostTasks(["algo-1"], "algo-1", [sys.executable, "-c", FAKE_TASK])
    try:
        tasks.start(("worker", 0))
        tasks.processes[("worker", 0)].wait(20)
        # Exited, not yet seen by `check`: its state as its exit status says it.
        assert tasks.status()["tasks"][0]["state"] == "exited with status 3"
        assert tasks.check() is None  # started again
        task, = tasks.status()["tasks"]
        assert task["task"] == "worker:0" and task["restarts"] == 1
        assert task["state"] in ("running", "exited with status 3")
    finally:
        tasks.stop_all()


def test_a_process_state_is_read_from_proc_and_a_gone_one_is_gone(tmp_path):
    assert parameter_server_host.process_state(os.getpid()) == "running"
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "stat").write_text("7 (a (strange) name) T 1 7 7 0 -1\n")
    assert parameter_server_host.process_state(7, proc=str(tmp_path)) == "stopped"
    (tmp_path / "7" / "stat").write_text("7 (python3) D 1 7 7 0 -1\n")
    assert parameter_server_host.process_state(7, proc=str(tmp_path)) == \
        "in uninterruptible sleep"
    assert parameter_server_host.process_state(8, proc=str(tmp_path)) == "gone"


def test_the_chiefs_peers_are_every_hosts_supervisor_at_the_fixed_port():
    assert parameter_server_host.status_addresses(["algo-1", "algo-2"]) == [
        {"who": "the supervisor", "host": "algo-1", "port": 2225},
        {"who": "the supervisor", "host": "algo-2", "port": 2225}]
    assert cluster_spec.SUPERVISOR_PORT not in (
        cluster_spec.CHIEF_PORT, cluster_spec.WORKER_PORT, cluster_spec.PS_PORT,
        cluster_spec.MWMS_PORT)


def test_a_supervisor_that_cannot_listen_goes_on_and_says_so(fake_tasks, monkeypatch, capsys):
    with socket.create_server(("0.0.0.0", 0)) as taken:
        monkeypatch.setattr(cluster_spec, "SUPERVISOR_PORT", taken.getsockname()[1])
        result = fake_tasks(["algo-1"], "algo-1", {"chief:0": "exit 0"})
    assert result["status"] == 0
    line, = [l for l in capsys.readouterr().out.splitlines() if "serves no status" in l]
    assert line.startswith("algo-1: the supervisor serves no status for the chief's stall "
                           "watchdog (")
    assert "Error" not in line  # the toolkit's failure scan (aws-rules.md SM-9)
