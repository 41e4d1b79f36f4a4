"""How the job's end-to-end tests start local runs and read what they leave, in one place:
`run` and `run_watching` start `python -m maskrcnn_local.local_run` (TINY's settings unless told
otherwise), the readers parse its output and files, and the learning bounds say what a run that
learns must show. The played runs (the launcher's requests): playback.py; the shared trained
model: tests/trained_runs.py."""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Optional

from tests.paths import TRAINING_CODE
from tests.training.processes import descendants

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = str(TRAINING_CODE / "train.py")
# Raises at the step $INJECT_FAILURE (RANK:STEP) names, on that rank.
FAILING_TRAIN = os.path.join(HERE, "failing_train.py")

# What the local runs of these tests train with (local_run arguments); the played requests carry
# the same (playback.tiny_hyperparameters).
TINY = ("--train-images", "16", "--val-images", "8", "--image-size", "64",
        # Square images of the input size: the learning bounds (tests/training/learning.py) were
        # measured on them (benchmarks/learning_bounds.py); on 16 real-shaped images a healthy
        # MultiWorkerMirroredStrategy run's loss fell 14.5%, under its 15% bound (2026-12-07).
        # The real-shaped images' own checks run on the shared trained model (test_job.py).
        "--layout", "square",
        "--hp", "log_every_steps=5", "--hp", "checkpoint_every_steps=10",
        "--hp", "eval_every_epochs=0", "--hp", "warmup_steps=5", "--hp", "lr_decay_epochs=",
        # The demo's rate is tuned for 1600 steps on 1600 images; these runs of 20 to 200 steps on
        # 16 images assert that the loss falls, calibrated at this one.
        "--hp", "base_learning_rate=0.01",
        # Tracing the validation losses' step costs every evaluating rank ~10-15 s of CPU; the
        # runs that check them (test_evaluation_job.py, test_batch_norm.py, test_stall.py's
        # evaluation phase) do not use these settings or set it back.
        "--hp", "validation_losses=false")


# --- starting runs ---------------------------------------------------------------------------

def command(work_dir, args, timeout: int, tiny: bool = True) -> list:
    """local_run's command line: TINY's settings (unless `tiny` is false), then `args`; its own
    timeout 30 s before the caller's, so that it stops its hosts itself."""
    return [sys.executable, "-m", "maskrcnn_local.local_run", "--work-dir", str(work_dir),
            *(TINY if tiny else ()), *args, "--timeout", str(timeout - 30)]


def run(work_dir, *args, env: Optional[dict] = None, timeout: int = 900, tiny: bool = True,
        check: bool = False) -> subprocess.CompletedProcess:
    """A local run to its end; the result also carries `seconds` and `finished_at`. With
    `check`, a non-zero exit fails the test with the output's tail."""
    started = time.time()
    result = subprocess.run(command(work_dir, args, timeout, tiny), capture_output=True,
                            text=True, timeout=timeout, env=dict(os.environ, **(env or {})),
                            stdin=subprocess.DEVNULL)
    result.seconds = time.time() - started
    result.finished_at = time.time()
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def run_watching(work_dir, args, on_line: Callable[[str, int], bool], timeout: int = 900):
    """A local run whose output lines are handed to `on_line(line, pid of local_run)` as they
    come, until it returns True once (it has done what it waited for: stopped or killed a task).
    Returns (exit status, output, the time on_line returned True or None, end time)."""
    process = subprocess.Popen(command(work_dir, args, timeout), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, bufsize=1,
                               stdin=subprocess.DEVNULL)
    watchdog = threading.Timer(timeout, process.kill)
    watchdog.start()
    lines, done_at = [], None
    try:
        for line in process.stdout:
            lines.append(line)
            if done_at is None and on_line(line, process.pid):
                done_at = time.time()
        status = process.wait()
    except BaseException:
        # Not left running (a failed look-up of a task): SIGINT lets local_run stop its hosts.
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        raise
    finally:
        watchdog.cancel()
    return status, "".join(lines), done_at, time.time()


def task_process(root: int, task: str) -> int:
    """The one process below `root` that runs the job's task `task` (TYPE:INDEX: the job's tasks
    carry --tf_task=TYPE:INDEX in their arguments). Another run on this machine, even of the same
    job, is not below `root`."""
    argument = f"--tf_task={task}".encode()
    matches = []
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                arguments = f.read().split(b"\0")
        except OSError:
            continue
        if argument in arguments:
            matches.append(pid)
    assert len(matches) == 1, f"processes of task {task} below {root}: {matches}"
    return matches[0]


def process_with(root: int, variable: str) -> int:
    """The one training process below `root` whose environment holds `variable` (NAME=VALUE).
    A shell that started it with the same environment and command line (the toolkit's process
    runner starts the program through `sh -c`) is left out: the one below it is the program."""
    matches = []
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environment = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command_line = f.read()
        except OSError:
            continue
        if variable.encode() in environment and b"train.py" in command_line:
            matches.append(pid)
    matches = [pid for pid in matches if not set(descendants(pid)) & set(matches)]
    assert len(matches) == 1, f"processes with {variable} below {root}: {matches}"
    return matches[0]


# --- one rank without local_run (the job's own refusals) ---------------------------------------

def single_rank_layout(tmp_path, hyperparameters: dict, channels: dict):
    """A SageMaker-like /opt/ml tree in `tmp_path` with these hyperparameters and channels
    ({name: directory to copy, or None for an empty one})."""
    opt_ml = tmp_path / "opt_ml"
    config = opt_ml / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    (config / "inputdataconfig.json").write_text(json.dumps({c: {} for c in channels}))
    for name, source in channels.items():
        (opt_ml / "input" / "data").mkdir(parents=True, exist_ok=True)
        if source:
            shutil.copytree(source, opt_ml / "input" / "data" / name)
    return opt_ml


def train_single_rank(opt_ml, timeout: int = 600, program: str = TRAIN,
                      env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """`program` as one process on the tree `opt_ml` (OPT_ML_ROOT), no mpirun."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "OMPI_"))}
    return subprocess.run([sys.executable, program], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          env=dict(environment, OPT_ML_ROOT=str(opt_ml), **(env or {})))


# --- reading what a run left ---------------------------------------------------------------------

def opt_ml(work, host):
    """An emulated host's /opt/ml in the work directory `work`."""
    return work / "hosts" / host / "opt_ml"


def files(directory) -> list:
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def truncate(path) -> None:
    """Cuts a file to half its size, as a job stopped while writing it leaves it."""
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def measured(name: str, value: float) -> float:
    """A figure a bound was set from, printed (`pytest -rP` shows them) for recalibration."""
    print(f"measured {name}: {value:.3f}")
    return value


def losses(output: str, name: str = "loss") -> list:
    """The logged values of train/<name> (the total loss, or a component: rpn_score_loss, ...)."""
    return [float(v) for v in re.findall(rf"train/{name}: (\S+)$", output, re.M)]


def steps(output: str) -> list:
    return [int(s) for s in re.findall(r"train/step: (\d+)$", output, re.M)]


def fingerprints(output: str) -> dict:
    """{rank: fingerprint of the weights that rank holds}, from rank 0's one summary line."""
    line, = re.findall(r"final weights fingerprints by rank: ([0-9a-f ]+) \(", output)
    return {str(rank): fingerprint for rank, fingerprint in enumerate(line.split())}


def model_values(prefix) -> dict:
    """{object path: SHA-256 of the value} of every model variable in the TensorFlow checkpoint
    `prefix`: a training checkpoint (tf.train.Checkpoint(model=..., optimizer=...): the optimizer's
    slots left out) or a SavedModel's variables (<version>/variables/variables, whose root holds
    the model as `model` too: serving/export.py). A path names the same variable in both."""
    import tensorflow as tf

    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    reader = tf.train.load_checkpoint(str(prefix))
    return {key[:-len(suffix)]: hashlib.sha256(reader.get_tensor(key).tobytes()).hexdigest()
            for key in reader.get_variable_to_shape_map()
            if key.startswith("model/") and key.endswith(suffix) and ".OPTIMIZER_SLOT" not in key}


def exported_values(model_dir, expected, other) -> dict:
    """For assert_exports_the_trained_weights: the model values of the SavedModel in `model_dir`,
    of the checkpoint `expected` (the one it must hold) and of the checkpoint `other` (one most of
    whose values must differ from them)."""
    return {"export": model_values(os.path.join(model_dir, "1", "variables", "variables")),
            "expected": model_values(expected), "other": model_values(other)}


def assert_exports_the_trained_weights(values: dict) -> None:
    """The SavedModel holds the expected checkpoint's values, variable by variable, and those are
    trained ones: most differ from the other checkpoint's. A stale export (the values before
    training, or an inference copy not refreshed) fails it."""
    export, expected, other = values["export"], values["expected"], values["other"]
    assert set(export) == set(expected), sorted(set(export) ^ set(expected))[:5]
    differing = sorted(k for k in expected if export[k] != expected[k])
    assert not differing, f"{len(differing)} of {len(expected)} exported variables are not " \
                          f"the expected checkpoint's: {differing[:5]}"
    moved = [k for k in expected if expected[k] != other[k]]
    assert len(moved) > 0.9 * len(expected), f"{len(moved)} of {len(expected)} variables moved"
