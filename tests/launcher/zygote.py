"""Python programs the launcher tests start, forked from a process that has already imported the
libraries they import (a zygote): the CLI's commands (tests/launcher/cli.py) and the notebooks'
kernels (tests/launcher/kernels.py).

A fresh interpreter spends seconds of CPU importing the SageMaker SDK, boto3 and the rest before
it does anything; the launcher tests start ~140 such programs. A zygote imports a
given list of modules once, under the environment, working directory and PYTHONPATH its programs
run under, and then forks each program: `python -m MODULE ARGS` as a fresh interpreter would run
it, with its own environment and working directory (sys.path[0] that directory, as `-m` makes
it), the module run by runpy as __main__, stdin from /dev/null, stdout and stderr to files, its
exit status returned. The zygote makes no AWS call and imports none of the launcher's own modules
(they read the environment when imported, so each program imports them afresh). The IAM
recorder is installed in a program whose environment names a record file, as
tests/iam/site/sitecustomize.py does in a fresh process (the zygote imported botocore before any
record file existed).

Where a program differs from a fresh interpreter, each for its CPU (the script below says how
much): botocore's data files (service models, endpoints) are parsed once, in the zygote, and
every session of the program reads them from there; the interpreter ends without tearing its
modules down (its threads waited for, atexit run and the standard streams flushed first, as at
any end); where PYTHONDONTWRITEBYTECODE is set, the bytecode of what the program imports is kept
under build/pycache.

A zygote serves one program at a time and only programs whose environment, apart from
PER_PROGRAM's variables, is the one it started with; another environment or another list of
modules starts another zygote. Its imports' CPU and each program's are counted for the test that
caused them (tests/cpu_time.py). When the tests' process goes while a program runs, the zygote
ends that program's process group (a kernel would otherwise wait for messages forever).
"""


from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

from tests import cpu_time
from tests.iam import recorder
from tests.paths import REPO

_ZYGOTE = r'''
import atexit, gc, importlib, importlib.util, json, os, resource, runpy, select, signal, sys
import threading

for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
# botocore parses its data (service models, endpoints) again for each session it makes, ~0.2 s
# of CPU a program: every session of every program shares one loader instead, which has parsed
# here what the launcher's clients read (a file it has not parsed yet is parsed when asked).
import botocore.exceptions, botocore.loaders, botocore.session

loader, make_loader = botocore.loaders.create_loader(), botocore.session.create_loader
warm = botocore.session.Session()
warm.register_component("data_loader", loader)
for service in json.loads(sys.argv[4]):
    warm.create_client(service, region_name="us-east-1", aws_access_key_id="-",
                       aws_secret_access_key="-")
    for kind in ("paginators-1", "waiters-2"):
        try:
            loader.load_service_model(service, kind)
        except botocore.exceptions.DataNotFoundError:
            pass
botocore.session.create_loader = lambda path=None: loader if path is None else make_loader(path)
del warm
if sys.dont_write_bytecode:
    # PYTHONDONTWRITEBYTECODE would have every program compile the launcher's modules again
    # (~0.2 s of CPU each): the programs keep their bytecode under build/, out of the tree.
    sys.pycache_prefix, sys.dont_write_bytecode = sys.argv[3], False
# What the imports made is never collected: a collection in a program would touch every object
# and so copy every page the fork shares (a CLI command's CPU was 2.5 times as much).
gc.collect()
gc.freeze()
requests, answers = os.fdopen(0, "r"), os.fdopen(int(sys.argv[2]), "w", buffering=1)
imports = resource.getrusage(resource.RUSAGE_SELF)
answers.write(json.dumps({"ready": True, "cpu_s": imports.ru_utime + imports.ru_stime}) + "\n")


def run(request):
    # The program: what fails here fails as in a fresh interpreter (a traceback, exit status 1).
    os.setpgid(0, 0)
    answers.close()
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # as `python -m` makes it (`-c` made it "")
    os.environ.clear()
    os.environ.update(request["env"])
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    if request["env"].get(request["record_env"]):
        spec = importlib.util.spec_from_file_location("maskrcnn_iam_recorder", request["recorder"])
        module = importlib.util.module_from_spec(spec)
        sys.modules["maskrcnn_iam_recorder"] = module
        spec.loader.exec_module(module)
        module.install(request["env"][request["record_env"]])
    sys.argv = ["-m", *request["args"]]
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as end:
        status = end.code if isinstance(end.code, int) else int(end.code is not None)
        if end.code is not None and not isinstance(end.code, int):
            print(end.code, file=sys.stderr)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    # The interpreter's end as Py_FinalizeEx begins it (waiting for its threads, atexit, the
    # standard streams flushed), without tearing down the modules: ~0.25 s of CPU a program, for
    # nothing a test sees (a file left open unflushed would lose its data, failing the test).
    threading._shutdown()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


for line in requests:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        run(request)
    answers.write(json.dumps({"pid": pid}) + "\n")
    # The tests send nothing while a program runs: the requests' pipe readable now means it
    # closed, the tests' process gone.
    ended = os.pidfd_open(pid)
    if ended not in select.select([ended, requests], [], [])[0]:
        os.killpg(pid, signal.SIGKILL)
    os.close(ended)
    _, status, usage = os.wait4(pid, 0)
    answers.write(json.dumps({"status": os.waitstatus_to_exitcode(status),
                              "cpu_s": usage.ru_utime + usage.ru_stime}) + "\n")
'''

TIMEOUT_S = 120
PYCACHE = REPO / "build" / "pycache"
# The services whose botocore data the zygote parses for its programs: those of the IAM table
# (tests/iam/operations.py: every AWS call the launcher makes is in it) and what the SDK's
# session makes clients of.
BOTOCORE_SERVICES = ("sagemaker", "s3", "ssm", "logs", "sts", "cloudwatch",
                     "application-autoscaling", "fsx", "datasync", "efs", "sagemaker-runtime",
                     "sagemaker-featurestore-runtime", "sagemaker-metrics")
# Variables that differ from program to program without bearing on what the zygote imported: the
# IAM record file, and the test pytest is running (PYTEST_CURRENT_TEST: keyed on it, every test
# started a zygote of its own, ~4 s of CPU each). Each program still gets its own values.
PER_PROGRAM = (recorder.RECORD_ENV, "PYTEST_CURRENT_TEST")


class Forked:
    """A program a zygote forked: its pid, its exit status once it has ended, its output."""

    def __init__(self, zygote: Zygote, pid: int, directory: str):
        self.zygote, self.pid, self._directory = zygote, pid, directory
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        """Its exit status, or None while it runs."""
        if self.returncode is None:
            self._ended(0)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        """Its exit status once it has ended; TimeoutError if it runs longer than `timeout`."""
        if self.returncode is None and not self._ended(timeout):
            raise TimeoutError(f"pid {self.pid} still runs after {timeout} s")
        return self.returncode

    def kill(self) -> None:
        """Ends its process group, if it still runs."""
        if self.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)

    def output(self) -> Tuple[str, str]:
        """What it wrote to stdout and stderr, read once it has ended (the files go)."""
        texts = []
        for name in ("stdout", "stderr"):
            with open(os.path.join(self._directory, name), encoding="utf-8",
                      errors="replace") as f:
                texts.append(f.read())
        shutil.rmtree(self._directory)
        return texts[0], texts[1]

    def _ended(self, timeout: Optional[float]) -> bool:
        answer = self.zygote.answer(timeout)
        if answer is None:
            return False
        # The program is the zygote's child, not this process's: counted where it ran.
        cpu_time.add_waited(answer["cpu_s"])
        self.returncode = answer["status"]
        self.zygote.running = None
        return True


class Zygote:
    def __init__(self, env: Dict[str, str], preloaded: Sequence[str], cwd: str):
        self.cwd = cwd
        self.running: Optional[Forked] = None
        read_end, answer_fd = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE, json.dumps(list(preloaded)), str(answer_fd),
             str(PYCACHE), json.dumps(BOTOCORE_SERVICES)],
            cwd=cwd, env=env, stdin=subprocess.PIPE, text=True, pass_fds=(answer_fd,))
        os.close(answer_fd)
        self._answers = os.fdopen(read_end, "r")
        cpu_time.add_waited(self.answer(TIMEOUT_S)["cpu_s"])   # the imports done

    def answer(self, timeout: Optional[float]) -> Optional[dict]:
        """The zygote's next answer, or None if none came within `timeout` seconds."""
        if not select.select([self._answers], [], [], timeout)[0]:
            return None
        line = self._answers.readline()
        if not line:
            raise RuntimeError(f"a zygote ended (exit status {self.process.poll()})")
        return json.loads(line)

    def start(self, module: str, args: List[str], env: Dict[str, str],
              cwd: Optional[str] = None) -> Forked:
        """`python -m MODULE ARGS` under `env`, in `cwd` (the zygote's by default)."""
        if self.running is not None:
            raise RuntimeError(f"this zygote still runs pid {self.running.pid}: it runs one "
                               "program at a time")
        directory = tempfile.mkdtemp(prefix="forked-")
        request = {"module": module, "args": list(args), "env": env, "cwd": str(cwd or self.cwd),
                   "stdout": os.path.join(directory, "stdout"),
                   "stderr": os.path.join(directory, "stderr"),
                   "record_env": recorder.RECORD_ENV,
                   "recorder": str(recorder.SITE_DIR.parent / "recorder.py")}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.answer(30)
        if answer is None:
            raise TimeoutError("a zygote did not fork within 30 s")
        self.running = Forked(self, answer["pid"], directory)
        return self.running

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


_zygotes: Dict[Tuple, Zygote] = {}


def zygote(env: Dict[str, str], preloaded: Sequence[str], cwd: str) -> Zygote:
    """The zygote that imported `preloaded` under `env` (PER_PROGRAM's variables aside) in
    `cwd`, started on first use."""
    shared = {k: v for k, v in env.items() if k not in PER_PROGRAM}
    key = (tuple(preloaded), str(cwd), tuple(sorted(shared.items())))
    if key not in _zygotes:
        _zygotes[key] = Zygote(shared, preloaded, cwd)
    return _zygotes[key]


@atexit.register
def _close_zygotes():
    for each in _zygotes.values():
        each.close()
