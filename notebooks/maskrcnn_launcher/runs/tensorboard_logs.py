"""TensorBoard of a running job, on the notebook instance.

The launcher sends every training job a `TensorBoardOutputConfig`: SageMaker uploads what the job
writes below `job_io.TENSORBOARD_LOCAL_PATH` to the run's folder,
`s3://<bucket>/<output prefix>tensorboard/<run>/`, while the job runs, each job below its own
`<job name>/tensorboard-output/` (docs/aws-rules.md TRN-2). Here those files are copied onto the
notebook instance's volume as they arrive, and TensorBoard reads the copy: TensorBoard reads
`s3://` itself only through TensorFlow's S3 file system, which TensorFlow 2.6+ left to
tensorflow-io, so a local copy works with any TensorBoard the instance has. The notebook role
reads the output prefix already: nothing else is granted for this.

    copier = tensorboard_logs.Copier(s3_client, plan.tensorboard_s3_uri, local_dir(run))
    copier.start()   # every minute in the background; copier.stop() copies a last time
    print(tensorboard_logs.how_to_open())

SageMaker's managed TensorBoard application needs a SageMaker domain (Studio) with user
profiles, which this deployment does not have (docs/aws-rules.md TRN-2).
"""

import os
import threading
from pathlib import Path
from typing import List, Optional

from maskrcnn_contract.s3_objects import split_s3_uri

from maskrcnn_launcher.runs import follow

# On the notebook instance's volume (kept across stops, encrypted with the deployment's key).
ROOT_ENV = "MASKRCNN_TENSORBOARD_DIR"
DEFAULT_ROOT = "~/SageMaker/tensorboard"
PORT = 6006


def root() -> Path:
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT).expanduser()


def local_dir(run: str) -> Path:
    """Where a run's summaries are copied: one folder per run below root(), which TensorBoard
    shows side by side."""
    return root() / run


def copy_new(s3_client, s3_uri: str, local: Path) -> List[str]:
    """Copies the objects below `s3_uri` that `local` lacks, or holds at another size (an event
    file grows while the job writes it and SageMaker uploads it again). Returns their paths
    below `local`."""
    bucket, prefix = split_s3_uri(s3_uri)
    copied = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            relative = item["Key"][len(prefix):]
            if not relative or relative.endswith("/"):
                continue
            target = local / relative
            if target.exists() and target.stat().st_size == item["Size"]:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".part")
            partial.write_bytes(s3_client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
            partial.replace(target)  # TensorBoard never reads half a file
            copied.append(relative)
    return copied


class Copier:
    """copy_new every `every_s` seconds in a background thread (default: $MASKRCNN_POLL_SECONDS,
    else 60), until stop(), which copies a last time."""

    def __init__(self, s3_client, s3_uri: str, local: Path, every_s: Optional[float] = None):
        self.s3_client, self.s3_uri, self.local = s3_client, s3_uri, Path(local)
        self.every_s = max(1.0, follow.poll_seconds() if every_s is None else every_s)
        self.copied: List[str] = []
        self.error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _copy(self) -> None:
        self.copied += copy_new(self.s3_client, self.s3_uri, self.local)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._copy()
            except Exception as error:  # noqa: BLE001 - kept for stop() to report
                self.error = error
                return
            self._stop.wait(self.every_s)

    def start(self) -> "Copier":
        self.local.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run, name="tensorboard-copier", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> List[str]:
        """Stops the thread, copies what is left, and returns every path copied; raises what
        stopped the thread, if anything did."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error
        self._copy()
        return self.copied


def how_to_open(logdir: Optional[Path] = None, port: int = PORT) -> str:
    """How to see the copies in TensorBoard on a notebook instance: TensorBoard in a terminal,
    and the instance's Jupyter proxy in the browser. (Not verified: that the instance's Jupyter
    serves /proxy/<port>/, which jupyter-server-proxy provides.)"""
    logdir = logdir or root()
    return (f"TensorBoard, from a terminal on this notebook instance (File > New > Terminal):\n"
            f"  tensorboard --logdir {logdir} --port {port}\n"
            f"then open this notebook's address with /proxy/{port}/ in place of its path, e.g. "
            f"https://<notebook instance>.notebook.<region>.sagemaker.aws/proxy/{port}/ "
            "(the trailing / matters). Curves update as the copier brings new summaries.")
