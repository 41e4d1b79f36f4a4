"""The job's end-to-end runs, started from the launcher's requests as SageMaker starts them.

Each module run of test_job.py and test_strategies.py is a CreateTrainingJob request built by the
launcher (tests/training/fake_deployment.py) for its distribution and data source, played on 2
emulated hosts (maskrcnn_local/sagemaker_job.py): hyperparameters.json, inputdataconfig.json and
the container's environment as SageMaker writes them, the channel copied from the fake bucket (S3)
or mounted from a directory standing for the file system (EFS, FSx), the real toolkit deciding
what runs, and every host's /opt/ml/model aggregated into one model.tar.gz, uploaded where
SageMaker puts it. The AWS calls the job's own processes make on the hosts are evaluated against
the role the request names (tests/iam/plugin.py, PlayedJob; the training job's code makes none
today: SageMaker, not the job, reads its channels and writes its model and checkpoints). The
hyperparameters are the tiny ones the local runs of these tests use (TINY), so that the runs that
resume them (local_run --resume) read the same model.
"""

import dataclasses
import io
import os
import shutil
import sys
import threading
import time
from contextlib import redirect_stdout
from typing import Callable, Optional

from maskrcnn_contract import hyperparameters, job_io, metrics

from maskrcnn_local import local_run, sagemaker_job

from tests.iam.plugin import PlayedJob
from tests.training.job_runs import TINY

# The file systems' directories as a deployment lays them out (tests/launcher/conftest.py).
DATA_PATH = "datasets/coco2017"


def tiny_hyperparameters(**overrides) -> dict:
    """local_run's hyperparameters with TINY's, as strings (one process per host: the cores are
    shared by 2 hosts); without `distribution` and `batch_norm`, which the launcher decides."""
    args = local_run.parse_args(["--hosts", "2", *TINY])
    values = dict(local_run.LOCAL_HYPERPARAMETERS, image_size=args.image_size,
                  threads_per_rank=max(1, (os.cpu_count() or 1) // 2))
    values.update(item.split("=", 1) for item in args.hp)
    values.update(overrides)
    return {k: hyperparameters.as_sent(v) for k, v in values.items()}


def prepare_dataset(work) -> str:
    """The synthetic set local_run generates for TINY (reused by a local_run in the same work
    directory), converted into <work>/dataset/train; returns that channel directory."""
    args = local_run.parse_args(["--hosts", "2", *TINY])
    channel = os.path.join(str(work), "dataset", job_io.TRAIN_CHANNEL)
    with redirect_stdout(io.StringIO()):
        local_run._prepare_dataset(args, str(work), channel)  # noqa: SLF001
    return channel


class Output:
    """The hosts' output lines ([algo-k] ...), kept, and each handed to `on_line`."""

    def __init__(self, on_line: Optional[Callable[[str], None]] = None):
        self.lines, self.on_line = [], on_line
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            self.lines.append(text)
        if self.on_line is not None:
            self.on_line(text)

    def flush(self) -> None:
        pass

    @property
    def text(self) -> str:
        with self._lock:
            return "".join(self.lines)


@dataclasses.dataclass
class Run:
    request: dict
    played: sagemaker_job.Played
    stdout: str
    seconds: float
    finished_at: float
    stderr: str = ""
    final: dict = dataclasses.field(default_factory=dict)
    tuning_request: Optional[dict] = None  # the tuning job's, when the request is a candidate
    tensorboard: str = ""  # what SageMaker uploads of the hosts' TensorBoard output (a copy)


def play_training(fake, work, distribution: str, data_source: str, max_steps: int,
                  on_line: Optional[Callable[[str], None]] = None, timeout: float = 1200,
                  tuning_candidate: bool = False,
                  hyperparameters: Optional[dict] = None) -> Run:
    """The launcher's request for `distribution` from `data_source`, played on 2 emulated hosts
    in `work` (the layout local_run's emulated hosts use: a later local_run --resume there
    resumes it). The bucket gets the dataset either way (the launcher checks it there); EFS and
    FSx are directories of `work` holding the same files at the deployment's paths. With
    `tuning_candidate`, the request is a candidate of the launcher's tuning job for the same launch
    (its base_learning_rate searched), as SageMaker starts it (FakeDeployment.tuning_candidate).
    `hyperparameters`: values over TINY's."""
    channel = prepare_dataset(work)
    fake.put_directory(channel, DATA_PATH + "/")
    systems = {}
    if data_source != "s3":
        root = os.path.join(str(work), data_source)
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(channel, os.path.join(root, DATA_PATH))
        system_id = fake.parameters[f"{data_source}-id"]
        systems[system_id] = sagemaker_job.FileSystem(
            root, fake.parameters["fsx-mount-name"] if data_source == "fsx" else None)
    build = fake.tuning_candidate if tuning_candidate else fake.training_request
    request = build(distribution, data_source,
                    tiny_hyperparameters(max_steps=max_steps, **(hyperparameters or {})))
    output = Output(on_line)
    recording = PlayedJob(request, str(work), fake.iam_published)
    started = time.time()
    played = sagemaker_job.play(
        request, str(work), sagemaker_job.Inputs(s3=fake.client("s3"), file_systems=systems),
        environment=recording.environment(local_run.emulated_host_environment()),
        timeout=timeout, echo=output, upload_model=True)
    recording.check()  # IamDenied: a request the training role may not make
    text = output.text
    text += "".join(f"{host.name}: exit status {host.exit_code}\n" for host in played.job.hosts)
    if not played.succeeded:
        text += f"failure (job failure reason):\n{played.job.failure_reason}\n"
    return Run(request, played, text, time.time() - started, time.time(),
               final=metrics.last_values(text),
               tensorboard=_uploaded_tensorboard(work, request, played),
               tuning_request=fake.last_tuning_request if tuning_candidate else None)


def _uploaded_tensorboard(work, request: dict, played: sagemaker_job.Played) -> str:
    """A copy of every host's TensorBoard output as the play left it (TensorBoardOutputConfig's
    LocalPath, which SageMaker uploads below <S3OutputPath><job>/tensorboard-output/, TRN-2; the
    playback leaves it on the hosts), taken before a later local run over the same hosts adds to
    it. Returns its directory."""
    target = os.path.join(str(work), "uploaded-tensorboard", request["TrainingJobName"])
    local = job_io.TENSORBOARD_LOCAL_PATH[len("/opt/ml/"):]
    for host in played.job.hosts:
        source = os.path.join(str(work), "hosts", host.name, "opt_ml", local)
        for folder, _, names in os.walk(source):
            for name in names:
                copy = os.path.join(target, os.path.relpath(os.path.join(folder, name), source))
                assert not os.path.exists(copy), f"two hosts wrote {copy}: SageMaker keeps one"
                os.makedirs(os.path.dirname(copy), exist_ok=True)
                shutil.copy2(os.path.join(folder, name), copy)
    return target


def report(run: Run, work, draw: int) -> str:
    """What local_run prints at the end of a successful run, for this one: the SavedModel, the
    drawn predictions, the final metrics, the picture."""
    printed = io.StringIO()
    with redirect_stdout(printed):
        local_run.report(str(work), run.played.model_dir, run.final, draw)
    sys.stdout.flush()
    return printed.getvalue()
