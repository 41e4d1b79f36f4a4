"""Train once, use many times: the local runs whose trained model tests take, each trained once
and kept in the tests' build cache (tests/build_cache.py: build/test-cache/) for every test
process and every later `make test`.

    from tests import trained_runs
    run = trained_runs.get("shapes")   # a finished run: run.work, run.model_dir, run.stdout

A run is named by its recipe (RECIPES: `python -m maskrcnn_local.local_run` arguments) and keyed
by everything that decides what it trains (`key`): the recipe's arguments, the job's code and
the local tools that generate, convert and start it (every file below CODE), and the versions
of the packages it runs on (PACKAGES). A change to any of them trains it again; the older run of
the same name is removed then. The first process that asks trains it while holding the name's
file lock; every other process asking meanwhile waits for it (a lock, not a race), then reuses
it. Clear it with `rm -rf build/test-cache` (`make clean` removes build/).

A run's directory is shared: tests read it and never write into it. A test that must write
(resume a run, truncate a checkpoint) works on `copy(name, destination)`.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Tuple

from tests import build_cache
from tests.paths import REPO

# Written last, when the run succeeded: a directory without it is an interrupted run.
COMPLETE = "complete.json"
LOG = "local_run.log"
# What decides a run besides its arguments: the job, the contract it parses its
# hyperparameters with, and the local tools (dataset generation, conversion, local_run).
CODE = ("contract/maskrcnn_contract", "training_code/maskrcnn_job", "training_code/maskrcnn_local",
        "training_code/train.py", "training_code/model-garden.txt")
PACKAGES = ("tensorflow", "tf-keras", "tf-models-official", "horovod", "numpy", "pillow",
            "pycocotools")


@dataclasses.dataclass(frozen=True)
class Recipe:
    why: str                     # what the tests need of it
    arguments: Tuple[str, ...]   # local_run's, besides --work-dir and --timeout
    timeout_s: int = 1500        # past a hang, not past make test's load


# The shared trained model: the demo's model (ResNet-18-FPN, compact heads) on the easy synthetic
# shapes (3 classes that never overlap) with a 64 px input, on real-shaped images (32 to 256 px,
# landscape and portrait, some grayscale, PNG or EXIF-turned: synthetic_coco's real layout),
# 300 steps on one rank: measured 2026-12-07 on this 2-core machine, 125-135 s, 160-176 CPU
# seconds with its evaluation, export and drawing, mask AP 0.27 and 0.34 on its 8 validation
# images in two trainings (0.39-0.42 on square 64 px images; the hard set's 6 classes at the
# same cost: 0.00); its top detections lie on their objects.
SHAPES = Recipe(
    why="a model that detects: the endpoint handler, predict, the drawing, the serving image's "
        "TensorFlow, and the starting point of the fine-tune",
    arguments=("--ranks", "1", "--difficulty", "easy", "--train-images", "64",
               "--val-images", "8", "--image-size", "64", "--draw", "4",
               "--hp", "max_steps=300", "--hp", "warmup_steps=20", "--hp", "epochs=10",
               "--hp", "lr_decay_epochs=8", "--hp", "base_learning_rate=0.02",
               "--hp", "eval_every_epochs=0", "--hp", "log_every_steps=50",
               "--hp", "checkpoint_every_steps=300", "--hp", "validation_losses=false"))
RECIPES: Dict[str, Recipe] = {"shapes": SHAPES}


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    name: str
    work: Path                   # local_run's --work-dir
    stdout: str                  # what local_run printed

    @property
    def opt_ml(self) -> Path:
        return self.work / "opt_ml"

    @property
    def model_dir(self) -> Path:
        """The exported model: <version>/ (the SavedModel) and code/."""
        return self.opt_ml / "model"

    @property
    def checkpoints(self) -> Path:
        return self.opt_ml / "checkpoints"

    @property
    def dataset(self) -> Path:
        """The synthetic set in COCO 2017's layout (train2017/, val2017/, annotations/)."""
        return self.work / "coco-synthetic"


def key(recipe: Recipe) -> str:
    return build_cache.key(CODE, PACKAGES, recipe.arguments)


def get(name: str) -> TrainedRun:
    """The finished run `name`, trained now if the cache holds none of its key."""
    recipe = RECIPES[name]
    with build_cache.entry(f"run-{name}", key(recipe)) as target:
        if not (target / COMPLETE).is_file():
            for leftover in target.iterdir():  # an interrupted run's
                shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
            _train(recipe, target)
    return TrainedRun(name, target / "work", (target / LOG).read_text(encoding="utf-8"))


def copy(name: str, destination) -> TrainedRun:
    """A copy of the run `name`'s work directory in `destination`, for a test that writes."""
    run = get(name)
    shutil.copytree(run.work, destination, symlinks=True)
    return TrainedRun(name, Path(destination), run.stdout)


def _train(recipe: Recipe, target: Path) -> None:
    work = target / "work"
    work.mkdir()
    command = [sys.executable, "-m", "maskrcnn_local.local_run", "--work-dir", str(work),
               *recipe.arguments, "--timeout", str(recipe.timeout_s - 60)]
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, timeout=recipe.timeout_s,
                          cwd=REPO, stdin=subprocess.DEVNULL)
    (target / LOG).write_text(done.stdout, encoding="utf-8")
    (target / "local_run.stderr.log").write_text(done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise RuntimeError(f"the trained run {target.name} failed ({done.returncode}); its log: "
                           f"{target / LOG}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    (target / COMPLETE).write_text(json.dumps({
        "arguments": list(recipe.arguments), "seconds": round(time.time() - started),
        "trained": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=1), encoding="utf-8")
