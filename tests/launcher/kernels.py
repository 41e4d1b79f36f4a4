"""The notebooks' kernels for nbclient, each forked from a zygote that has already imported
ipykernel and the libraries the notebooks import (tests/launcher/zygote.py).

A fresh kernel spends ~4.5 s of CPU on a launch notebook, most of it importing ipykernel, the
SageMaker SDK and boto3 (a forked one ~0.5 s); the launcher tests execute notebooks 19 times. The
kernel the kernelspec names (`python -m ipykernel_launcher -f <connection file>`) is forked
instead, with the environment and working directory jupyter_client gives it; jupyter_client
manages it as it would its own process (`ForkedProvisioner`: poll, wait, signals to its process
group). What the kernel writes to stdout and stderr (ipykernel's warnings, a crash's traceback)
is copied to the test's stderr when it ends.

    NotebookClient(nb, kernel_name="python3", kernel_manager_class=kernels.KernelManager, ...)
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from typing import Any, Optional

from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner

from tests.launcher import zygote
from tests.paths import NOTEBOOKS

KERNEL_MODULE = "ipykernel_launcher"
# What a notebook's kernel imports beyond the standard library, largest first: ipykernel (with
# IPython, zmq, tornado, jupyter_client, and debugpy, psutil and sqlite3, which it imports when
# the kernel starts), the SDK (its ModelTrainer through training/session.py), boto3,
# TensorBoard's protos (runs/event_files.py), numpy, Pillow. Not matplotlib: ipykernel picks its
# backend (MPLBACKEND) when the kernel starts, which a matplotlib imported before would not see.
PRELOADED = ("ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.debugger", "psutil",
             "sqlite3", "sagemaker.train", "sagemaker.train.model_trainer",
             "sagemaker.core.helper.session_helper", "sagemaker.core.training.configs", "boto3",
             "botocore.session", "tensorboard.compat.tensorflow_stub", "numpy", "PIL.Image")


class _Process:
    """What LocalProvisioner expects of the Popen of its kernel, for a forked kernel."""

    stdin = stdout = stderr = None

    def __init__(self, forked: zygote.Forked):
        self.forked = forked
        self.pid = forked.pid

    def poll(self) -> Optional[int]:
        return self.forked.poll()

    def wait(self, timeout: Optional[float] = None) -> int:
        status = self.forked.wait(timeout)
        stdout, stderr = self.forked.output()
        sys.stderr.write(stdout + stderr)
        return status

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.killpg(self.pid, signum)  # the kernel's process group, as LocalProvisioner does

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkedProvisioner(LocalProvisioner):
    """LocalProvisioner, the kernel forked from a zygote instead of started by Popen."""

    async def launch_kernel(self, cmd: list, **kwargs: Any):
        # [python, -m, ipykernel_launcher, -f, <connection file>]: the kernelspec's command.
        if cmd[1:3] != ["-m", KERNEL_MODULE]:
            raise ValueError(f"a forked kernel runs `python -m {KERNEL_MODULE}`, not {cmd}")
        env = kwargs["env"]
        forked = zygote.zygote(env, PRELOADED, str(NOTEBOOKS)).start(
            KERNEL_MODULE, cmd[3:], env, kwargs.get("cwd"))
        self.process = _Process(forked)
        self.pid = self.pgid = forked.pid
        self.cwd = kwargs.get("cwd")
        return self.connection_info


class KernelManager(AsyncKernelManager):
    """nbclient's kernel manager, with its kernel forked (ForkedProvisioner)."""

    async def _async_pre_start_kernel(self, **kw: Any):
        if self.provisioner is None:
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(uuid.uuid4())
            self.provisioner = ForkedProvisioner(kernel_id=self.kernel_id,
                                                 kernel_spec=self.kernel_spec, parent=self)
        return await super()._async_pre_start_kernel(**kw)

