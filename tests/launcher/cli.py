"""`python -m maskrcnn_launcher ARGS` for the launcher tests, forked from a process that has
already imported the libraries the CLI imports (tests/launcher/zygote.py).

A cold start of the CLI spends ~3 s of CPU importing the SageMaker SDK (its ModelTrainer alone
~0.5 s), boto3 and TensorBoard's protos before it reads its arguments; the launcher tests start
it ~120 times. `cli` forks each command instead from a zygote that imported PRELOADED once; the
command runs as `python -m` would, and its CPU is counted for the test that caused it.

`cli_process` starts a fresh interpreter: the entry point itself, as a pipeline runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict

from tests.launcher import zygote
from tests.paths import NOTEBOOKS

TIMEOUT_S = zygote.TIMEOUT_S
# What the launcher's commands import beyond the standard library, largest first (python -X
# importtime -m maskrcnn_launcher): the SDK (its ModelTrainer is imported on first use of
# sagemaker.train's name, which training/session.py makes), boto3, TensorBoard's protos
# (runs/event_files.py), numpy, matplotlib (runs/compare.py).
PRELOADED = ("sagemaker.train", "sagemaker.train.model_trainer",
             "sagemaker.core.helper.session_helper", "sagemaker.core.training.configs", "boto3",
             "botocore.session", "tensorboard.compat.tensorflow_stub", "numpy", "matplotlib",
             "matplotlib.pyplot")


def _environment(fake_aws) -> Dict[str, str]:
    return dict(os.environ, **fake_aws.environment)


def cli(fake_aws, *args, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """The command's exit status, stdout and stderr, as subprocess.run(text=True) gives them."""
    return run(_environment(fake_aws), *args, timeout=timeout)


def run(env: Dict[str, str], *args, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """`python -m maskrcnn_launcher ARGS` under the environment `env` (every test that runs the
    CLI: the launcher's against its fake AWS, the training tests' against their fake
    deployment)."""
    command = [sys.executable, "-m", "maskrcnn_launcher", *args]
    forked = zygote.zygote(env, PRELOADED, str(NOTEBOOKS)).start("maskrcnn_launcher", list(args),
                                                                  env)
    try:
        status = forked.wait(timeout)
    except TimeoutError:
        forked.kill()
        forked.wait(30)
        forked.output()
        raise subprocess.TimeoutExpired(command, timeout) from None
    stdout, stderr = forked.output()
    return subprocess.CompletedProcess(command, status, stdout, stderr)


def cli_process(fake_aws, *args, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """The same command in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "maskrcnn_launcher", *args], cwd=NOTEBOOKS,
                          env=_environment(fake_aws), capture_output=True, text=True,
                          timeout=timeout)
