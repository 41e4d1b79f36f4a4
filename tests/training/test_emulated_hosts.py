"""The emulated-hosts harness itself: the code it stages, the refusals, and the clean-up.

The job under it (success, resume, a failure on the worker host) is in test_job.py.
"""

import os
import subprocess
import time

import pytest

from maskrcnn_local import emulated_hosts
from tests.paths import REPO

IMAGE_PYTHON = os.path.join(REPO, ".venv-image", "bin", "python")


def _dockerignore_rules():
    with open(os.path.join(REPO, ".dockerignore"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def _namespaces():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_dockerignore_rules_as_docker_applies_them():
    rules = _dockerignore_rules()
    kept = ["training_code/train.py", "training_code/maskrcnn_job/job.py", "contract/pyproject.toml"]
    dropped = ["training_code/requirements.txt", "training_code/pyproject.toml", "README.md",
               "training_code/maskrcnn_job/__pycache__/job.cpython-311.pyc", "notebooks/x.ipynb",
               "stacks/deployment.py"]
    assert [p for p in kept if emulated_hosts.dockerignored(p, rules)] == []
    assert [p for p in dropped if not emulated_hosts.dockerignored(p, rules)] == []


def test_code_is_staged_as_the_image_holds_it(tmp_path):
    destination = tmp_path / "code"
    emulated_hosts.stage_code(REPO, os.path.join(REPO, "training_code"), str(destination))
    staged = {os.path.relpath(os.path.join(d, f), destination)
              for d, _, files in os.walk(destination) for f in files}
    assert {"train.py", "Dockerfile", "maskrcnn_job/job.py"} <= staged
    # In /opt/ml/code the toolkit would `pip install -r requirements.txt` at every start.
    assert "requirements.txt" not in staged and "pyproject.toml" not in staged
    assert not any("__pycache__" in path for path in staged)


def test_container_environment_is_the_dockerfiles():
    environment = emulated_hosts.dockerfile_environment(
        os.path.join(REPO, "training_code", "Dockerfile"))
    assert environment["SAGEMAKER_PROGRAM"] == "train.py"
    assert "HOROVOD_CYCLE_TIME" in environment


def test_without_root_it_refuses_with_what_to_do(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(emulated_hosts.Unavailable, match=r"need root.*--hosts 1"):
        emulated_hosts.check_available(IMAGE_PYTHON)


def test_a_missing_image_python_is_named(tmp_path):
    missing = str(tmp_path / "no-python")
    with pytest.raises(emulated_hosts.Unavailable, match="no-python does not exist.*make setup"):
        emulated_hosts.check_available(missing)


def test_namespaces_of_a_killed_run_are_removed():
    stale = f"{emulated_hosts.NAMESPACE_PREFIX}4194304999-algo-1"  # no such process
    subprocess.run(["ip", "netns", "add", stale], check=True)
    emulated_hosts.remove_stale_namespaces()
    assert stale not in _namespaces()


def test_a_run_past_its_time_limit_leaves_nothing_behind(tmp_path):
    """Stopped while the toolkit is starting: no namespace, mount or process of it survives."""
    emulated_hosts.check_available(IMAGE_PYTHON)
    channel = tmp_path / "train"
    channel.mkdir()
    cluster = emulated_hosts.Cluster(
        str(tmp_path / "work"), 2, IMAGE_PYTHON, REPO, {"sagemaker_mpi_enabled": "true"},
        {"train": str(channel)})
    started = time.time()
    with cluster:
        result = cluster.run(timeout=8, echo=None)
        namespaces = list(cluster._namespaces)
        assert all(n in _namespaces() for n in namespaces)
    assert time.time() - started < 40
    assert result.timed_out and not result.succeeded
    assert result.failure_reason == "ran past the time limit"
    assert [h.exit_code for h in result.hosts] == [None, None]  # stopped, not exited
    assert not any(n in _namespaces() for n in namespaces)
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""
    # The hosts' mounts lived in their own mount namespaces: none is visible here.
    with open("/proc/self/mounts", encoding="utf-8") as f:
        assert str(tmp_path) not in f.read()
