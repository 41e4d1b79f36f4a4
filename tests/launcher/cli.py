"""`python -m maskrcnn_launcher ARGS` for the launcher tests, started from a process that has
already imported the libraries the CLI imports.

A cold start of the CLI spends ~3 s of CPU importing the SageMaker SDK, boto3 and TensorBoard's
protos before it reads its arguments; the launcher tests start it ~80 times. `cli` forks each
command instead from a waiting process (a zygote) that imported those libraries once, under the
same environment, working directory and PYTHONPATH as the command's, with no AWS call and none of
the launcher's own modules imported (they read the environment when imported, so each command
imports them afresh). The forked command then runs as `python -m` would: its own environment, its
arguments, the package's __main__ run by runpy, stdin from /dev/null, its stdout and stderr kept,
its exit status returned. The IAM recorder is installed in it when the environment names a record
file, as tests/iam/site/sitecustomize.py does in a fresh process (the zygote imported botocore
before any record file existed). A zygote serves only commands whose environment, apart from
PER_COMMAND's variables, is the one it started with; another environment starts another zygote.
Its imports' CPU and each command's are counted for the test that caused them
(tests/cpu_time.py).

`cli_process` starts a fresh interpreter: the entry point itself, as a pipeline runs it.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from typing import Dict, Tuple

from tests import cpu_time
from tests.iam import recorder
from tests.launcher.conftest import NOTEBOOKS

TIMEOUT_S = 120
# What the launcher's commands import beyond the standard library, largest first (python -X
# importtime -m maskrcnn_launcher): the SDK, boto3, TensorBoard's protos (runs/event_files.py),
# numpy, matplotlib (runs/compare.py).
PRELOADED = ("sagemaker.train", "sagemaker.core.helper.session_helper",
             "sagemaker.core.training.configs", "boto3", "botocore.session",
             "tensorboard.compat.tensorflow_stub", "numpy", "matplotlib", "matplotlib.pyplot")

_ZYGOTE = r'''
import importlib, importlib.util, json, os, resource, runpy, sys

for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
requests, answers = os.fdopen(0, "r"), os.fdopen(int(sys.argv[2]), "w", buffering=1)
imports = resource.getrusage(resource.RUSAGE_SELF)
answers.write(json.dumps({"ready": True, "cpu_s": imports.ru_utime + imports.ru_stime}) + "\n")
for line in requests:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        # The command: what fails here fails as in a fresh interpreter (a traceback, exit 1), and
        # the interpreter ends as one does (atexit, waiting for its threads, flushing).
        os.setpgid(0, 0)
        answers.close()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        if request["env"].get(request["record_env"]):
            spec = importlib.util.spec_from_file_location("maskrcnn_iam_recorder",
                                                          request["recorder"])
            module = importlib.util.module_from_spec(spec)
            sys.modules["maskrcnn_iam_recorder"] = module
            spec.loader.exec_module(module)
            module.install(request["env"][request["record_env"]])
        sys.argv = ["-m", *request["args"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        sys.exit(0)
    answers.write(json.dumps({"pid": pid}) + "\n")
    _, status, usage = os.wait4(pid, 0)
    answers.write(json.dumps({"status": os.waitstatus_to_exitcode(status),
                              "cpu_s": usage.ru_utime + usage.ru_stime}) + "\n")
'''


class _Zygote:
    def __init__(self, env: Dict[str, str]):
        read_end, self._answer_fd = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE, json.dumps(PRELOADED), str(self._answer_fd)],
            cwd=NOTEBOOKS, env=env, stdin=subprocess.PIPE, text=True,
            pass_fds=(self._answer_fd,))
        os.close(self._answer_fd)
        self._answers = os.fdopen(read_end, "r")
        cpu_time.add_waited(self._answer(TIMEOUT_S)["cpu_s"])   # the imports done

    def _answer(self, deadline_s: float) -> dict:
        ready, _, _ = select.select([self._answers], [], [], deadline_s)
        if not ready:
            raise TimeoutError
        line = self._answers.readline()
        if not line:
            raise RuntimeError(f"the CLI's zygote ended (exit status {self.process.poll()})")
        return json.loads(line)

    def run(self, args, env, timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory() as out:
            request = {"args": list(args), "env": env, "cwd": str(NOTEBOOKS),
                       "module": "maskrcnn_launcher",
                       "stdout": os.path.join(out, "stdout"), "stderr": os.path.join(out, "stderr"),
                       "record_env": recorder.RECORD_ENV,
                       "recorder": str(recorder.SITE_DIR.parent / "recorder.py")}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = self._answer(30)["pid"]
            try:
                answer = self._answer(timeout)
            except TimeoutError:
                os.killpg(pid, signal.SIGKILL)
                self._answer(30)
                raise subprocess.TimeoutExpired(["python", "-m", "maskrcnn_launcher", *args],
                                                timeout)
            # The command is the zygote's child, not this process's: counted where it ran.
            cpu_time.add_waited(answer["cpu_s"])
            status = answer["status"]
            with open(request["stdout"], encoding="utf-8") as stdout, \
                    open(request["stderr"], encoding="utf-8") as stderr:
                return subprocess.CompletedProcess(
                    [sys.executable, "-m", "maskrcnn_launcher", *args], status,
                    stdout.read(), stderr.read())

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


_zygotes: Dict[Tuple, _Zygote] = {}
# Variables that differ from command to command without bearing on what the zygote imported: the
# IAM record file, and the test pytest is running (PYTEST_CURRENT_TEST: keyed on it, every test
# started a zygote of its own, ~4 s of CPU each). Each command still gets its own values.
PER_COMMAND = (recorder.RECORD_ENV, "PYTEST_CURRENT_TEST")


def _environment(fake_aws) -> Dict[str, str]:
    return dict(os.environ, **fake_aws.environment)


def cli(fake_aws, *args, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """The command's exit status, stdout and stderr, as subprocess.run(text=True) gives them."""
    env = _environment(fake_aws)
    shared = {k: v for k, v in env.items() if k not in PER_COMMAND}
    key = tuple(sorted(shared.items()))
    if key not in _zygotes:
        _zygotes[key] = _Zygote(shared)
    return _zygotes[key].run(args, env, timeout)


def cli_process(fake_aws, *args, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """The same command in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "maskrcnn_launcher", *args], cwd=NOTEBOOKS,
                          env=_environment(fake_aws), capture_output=True, text=True,
                          timeout=timeout)


@atexit.register
def _close_zygotes():
    for zygote in _zygotes.values():
        zygote.close()
