"""The stall watchdog's logic (training/watchdog.py) on a fake clock, its thread and its exit in a
real process, and its settings. The job failing on 2 emulated hosts when a rank is stopped:
test_stall.py."""

import json
import subprocess
import sys
import threading
import time

import pytest

from maskrcnn_contract import hyperparameters

from maskrcnn_job.training import watchdog as stall


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


def _watchdog(clock, step_budget_s=60.0, slow_budget_s=600.0, **kwargs):
    return stall.Watchdog("rank 1", "algo-2", step_budget_s, slow_budget_s, report=print,
                          clock=clock, **kwargs)


def test_each_phase_has_its_budget():
    clock = Clock()
    dog = _watchdog(clock)
    dog.phase(stall.START)
    clock.advance(599)
    assert dog.check() is None  # start-up: the slow budget
    dog.phase(stall.FIRST_STEP)
    clock.advance(599)
    assert dog.check() is None  # a phase change is progress; tracing gets the slow budget too
    dog.phase(stall.TRAIN)
    clock.advance(59)
    assert dog.check() is None
    clock.advance(1)
    assert dog.check().startswith("rank 1 on algo-2 stalled: no progress for 1.0 min in phase "
                                  "train (no step finished yet)\n")
    for phase in (stall.CHECKPOINT, stall.EVALUATION, stall.EXPORT):
        dog.phase(phase)
        clock.advance(599)
        assert dog.check() is None, phase
        clock.advance(1)
        assert f" in phase {phase} " in dog.check()


def test_progress_resets_the_clock_and_names_the_last_step():
    clock = Clock()
    dog = _watchdog(clock, step_budget_s=15)
    dog.phase(stall.TRAIN)
    for step in range(1, 13):
        clock.advance(14)
        dog.progress(step)
        assert dog.check() is None
    dog.phase(stall.EVALUATION)
    clock.advance(500)
    dog.progress()  # an evaluated batch: progress, no step
    dog.phase(stall.TRAIN)
    clock.advance(16)
    message = dog.check()
    first, second = message.splitlines()[:2]
    assert first == ("rank 1 on algo-2 stalled: no progress for 0.27 min in phase train "
                     "(last finished step 12)")
    assert second.startswith("The budget of phase train is 0.25 min (stall_timeout_minutes).")
    dog.phase(stall.EXPORT)
    clock.advance(630)
    assert dog.check().splitlines()[0].endswith(
        "no progress for 10.5 min in phase export (last finished step 12)")
    assert "(stall_timeout_slow_phases_minutes)" in dog.check()


def test_zero_turns_it_off_and_a_zero_slow_budget_leaves_those_phases_unwatched():
    clock = Clock()
    off = _watchdog(clock, step_budget_s=0)
    off.start(stall.TRAIN)
    clock.advance(10 ** 6)
    assert off.check() is None and off._thread is None  # noqa: SLF001  (no thread either)
    fast_only = _watchdog(clock, step_budget_s=10, slow_budget_s=0)
    fast_only.phase(stall.EVALUATION)
    clock.advance(10 ** 6)
    assert fast_only.check() is None
    fast_only.phase(stall.TRAIN)
    clock.advance(10)
    assert fast_only.check() is not None


def test_the_thread_reports_prints_every_stack_and_exits(tmp_path):
    reports, exits, fired = [], [], threading.Event()

    def exit_(status):
        exits.append(status)
        fired.set()

    log = tmp_path / "stderr.txt"
    with open(log, "w", encoding="utf-8") as stream:
        dog = stall.Watchdog("worker 1", "algo-2", 0.3, 5.0, report=reports.append, exit=exit_,
                             stream=stream)
        assert dog._check_every_s == pytest.approx(0.03)  # noqa: SLF001  (a tenth of 0.3 s)
        started = time.monotonic()
        dog.start(stall.TRAIN)
        assert fired.wait(10)
        elapsed = time.monotonic() - started
    assert exits == [stall.EXIT_STATUS] and stall.EXIT_STATUS != 0
    assert 0.3 <= elapsed < 2, elapsed
    assert reports[0].startswith("worker 1 on algo-2 stalled: no progress for 0.01 min in phase "
                                 "train (no step finished yet)")
    stacks = log.read_text()
    assert "worker 1 on algo-2: every thread's stack:" in stacks
    # faulthandler's: this test's own frame (the main thread, waiting) and the watchdog's.
    assert "test_the_thread_reports_prints_every_stack_and_exits" in stacks
    assert "in _fire" in stacks


def test_a_stopped_watchdog_does_not_fire():
    exits = []
    dog = stall.Watchdog("rank 0", "algo-1", 0.2, 0.2, report=print, exit=exits.append)
    dog.start(stall.TRAIN)
    dog.stop()
    time.sleep(0.5)
    assert exits == []


# A process whose main thread hangs, with the job's watchdog (job.stall_watchdog): the toolkit's
# stderr line, the failure file, the stacks, and the exit status.
HANGING = """
import json, os, sys, time
from maskrcnn_contract import hyperparameters
from maskrcnn_job import job, sagemaker_env
from maskrcnn_job.training import watchdog as stall
env = sagemaker_env.load()
hps = hyperparameters.parse({"stall_timeout_minutes": "0.01"})
dog = job.stall_watchdog(env, hps)
dog.start(stall.START)
dog.phase(stall.TRAIN)
dog.progress(7)
time.sleep(60)
"""


def test_a_hanging_process_fails_with_its_cause_in_the_failure_file(tmp_path):
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-2", "hosts": ["algo-1", "algo-2"]}))
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", HANGING], capture_output=True, text=True,
                         timeout=60, env={"OPT_ML_ROOT": str(tmp_path), "OMPI_COMM_WORLD_RANK": "1",
                                          "PATH": "/usr/bin:/bin"})
    elapsed = time.monotonic() - started
    assert run.returncode == stall.EXIT_STATUS, run.stderr
    assert elapsed < 20, elapsed  # 0.6 s of budget, a Python start-up and a few imports
    first = ("rank 1 on algo-2 stalled: no progress for 0.01 min in phase train "
             "(last finished step 7)")
    assert (tmp_path / "output" / "failure").read_text().splitlines()[0] == first
    assert f"Exception in the training job, {first}\n" in run.stderr  # SM-9's scan
    assert "every thread's stack:" in run.stderr and "<module>" in run.stderr


@pytest.mark.parametrize("name", ["stall_timeout_minutes", "stall_timeout_slow_phases_minutes"])
def test_the_budgets_take_fractions_zero_and_refuse_negatives(name):
    assert getattr(hyperparameters.parse({name: "0.25"}), name) == 0.25
    assert getattr(hyperparameters.parse({name: "0"}), name) == 0
    with pytest.raises(hyperparameters.HyperparameterError,
                       match=rf"^hyperparameter {name}=-1.0: must be >= 0.0$"):
        hyperparameters.parse({name: "-1"})
