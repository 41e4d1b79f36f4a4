"""The stall watchdog's logic (training/watchdog.py) on a fake clock, its thread and its exit in a
real process, and its settings; asking the peers when it fires (training/peers.py): status servers
on 127.0.0.1, a socket that listens and never answers standing for a frozen process, and a real
process stopped with SIGSTOP. The job failing on 2 emulated hosts when a rank is stopped, its
reason naming that rank: test_stall.py."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from maskrcnn_contract import hyperparameters

from maskrcnn_job.training import peers
from maskrcnn_job.training import watchdog as stall

from tests.training import processes


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


def test_a_slow_phase_longer_than_the_step_budget_is_said_on_leaving_it():
    """The line that shows the slow phases' budget at work (test_stall.py reads it from a job):
    the longest time without progress of a phase other than train, when above the step budget."""
    import io

    clock, said = Clock(), io.StringIO()
    dog = _watchdog(clock, step_budget_s=15, stream=said)
    dog.phase(stall.FIRST_STEP)
    clock.advance(20)
    dog.progress(1)
    dog.phase(stall.TRAIN)
    clock.advance(14)  # train: a longer step is a stall, never this line
    dog.progress(2)
    dog.phase(stall.EVALUATION)
    for seconds in (3, 16.5, 2):  # the longest gap counts, not the phase's length
        clock.advance(seconds)
        dog.progress()
    dog.phase(stall.CHECKPOINT)
    clock.advance(14)  # within the step budget: nothing said
    dog.phase(stall.TRAIN)
    assert said.getvalue().splitlines() == [
        "stall watchdog: rank 1 on algo-2: phase first step went 20.0 s without progress, more "
        "than the step budget of 0.25 min, within its own budget of 10.0 min "
        "(stall_timeout_slow_phases_minutes)",
        "stall watchdog: rank 1 on algo-2: phase evaluation went 16.5 s without progress, more "
        "than the step budget of 0.25 min, within its own budget of 10.0 min "
        "(stall_timeout_slow_phases_minutes)"]
    assert _watchdog(clock, step_budget_s=15, slow_budget_s=0).slow_phase_line(
        stall.EVALUATION, 20).endswith("a phase not watched (stall_timeout_slow_phases_minutes=0)")
    assert stall.Watchdog.off().slow_phase_line(stall.EVALUATION, 1e6) is None


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
from maskrcnn_job.training import peers
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
    # Its peers' addresses were never exchanged (no backend here): the report says so.
    first = ("rank 1 on algo-2 stalled: no progress for 0.01 min in phase train "
             "(last finished step 7); peers not asked: their addresses are exchanged once the "
             "backend started")
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


# Asking the peers (training/peers.py).


class FrozenPeer:
    """A port whose process never answers: its kernel accepts connections into the listen
    backlog, as a stopped process's does, and nothing reads or writes them."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]

    def close(self):
        self.socket.close()


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


@pytest.fixture
def fast_peers(monkeypatch):
    monkeypatch.setattr(peers, "ANSWER_TIMEOUT_S", 0.5)
    monkeypatch.setattr(peers, "ASK_ALL_TIMEOUT_S", 1.0)


def test_the_peers_that_answer_that_are_frozen_and_that_are_gone(fast_peers):
    clock = Clock()
    answering = stall.Watchdog("rank 1", "algo-1", 60, 600, report=print, clock=clock)
    answering.phase(stall.TRAIN)
    answering.progress(15)
    clock.advance(42)
    frozen = FrozenPeer()
    try:
        table = [answering.serve_status(bind="127.0.0.1"),
                 {"who": "rank 2", "host": "algo-1", "port": frozen.port},
                 {"who": "rank 3", "host": "algo-1", "port": _closed_port()},
                 {"who": "rank 4", "host": "algo-1", "port": None}]
        assert table[0] == {"who": "rank 1", "host": "algo-1", "port": table[0]["port"]}
        started = time.monotonic()
        answers = peers.ask_all(table, own_host="algo-1")  # same host: asked at 127.0.0.1
        assert time.monotonic() - started < 1.5
    finally:
        frozen.close()
        answering.stop()
    assert answers[0].status == {"who": "rank 1", "host": "algo-1", "phase": "train",
                                 "last_step": 15, "seconds_since_progress": 42.0}
    assert answers[1].problem == "timeout"
    assert answers[2].problem.startswith("ConnectionRefusedError")
    assert answers[3].problem == "no status server"
    assert peers.describe(answers, 1000) == (
        "; not answering: rank 2 on algo-1"
        f"; not reached: rank 3 on algo-1 ({answers[2].problem}), "
        "rank 4 on algo-1 (no status server)"
        "; answering: rank 1 on algo-1 (phase train, last finished step 15, idle 42 s)")


def test_when_every_peer_answers_the_report_says_so_and_no_peers_say_nothing():
    answers = [peers.Answer({"who": f"rank {k}", "host": f"algo-{k + 1}", "port": 1},
                            status={"phase": "train", "last_step": 15,
                                    "seconds_since_progress": 16.2}) for k in (1, 2)]
    assert peers.describe(answers, 1000) == (
        "; every peer answers: rank 1 on algo-2 (phase train, last finished step 15, idle 16 s), "
        "rank 2 on algo-3 (phase train, last finished step 15, idle 16 s)")
    assert peers.describe([], 1000) == ""


def test_many_silent_peers_keep_the_first_line_within_the_failure_reason():
    answers = [peers.Answer({"who": f"rank {k}", "host": f"algo-{k // 8 + 1}", "port": 1})
               for k in range(1, 512)]
    text = peers.describe(answers, 880)
    assert len(text) <= 880
    assert text.startswith("; not answering: rank 1 on algo-1, rank 2 on algo-1, ")
    assert text.endswith(" more") and " and " in text
    shown = text.count(" on algo-")
    assert text.endswith(f" and {511 - shown} more")
    assert peers.describe(answers, 10) == "; not answering: 511 peer(s)"


def _fire_beside_a_frozen_peer(tmp_path, who, wire):
    """(reports, exit statuses) of a watchdog `who` on algo-1 that `wire(dog, frozen)` gives its
    peers, a FrozenPeer among them, run until it fires."""
    reports, exits, fired = [], [], threading.Event()
    frozen = FrozenPeer()
    stream = open(tmp_path / "stderr.txt", "w", encoding="utf-8")  # faulthandler: a real file
    dog = stall.Watchdog(who, "algo-1", 0.3, 5.0, report=reports.append,
                         exit=lambda status: (exits.append(status), fired.set()), stream=stream)
    try:
        wire(dog, frozen)
        dog.start(stall.TRAIN)
        assert fired.wait(10)
    finally:
        dog.stop()
        frozen.close()
        stream.close()
    return reports, exits


def test_the_firing_watchdog_names_the_frozen_peer_and_leaves_itself_out(fast_peers, tmp_path):
    def wire(dog, frozen):
        own = dog.serve_status(bind="127.0.0.1")
        dog.set_peers([own, {"who": "rank 1", "host": "algo-1", "port": frozen.port}])

    reports, exits = _fire_beside_a_frozen_peer(tmp_path, "rank 0", wire)
    first = reports[0].splitlines()[0]
    assert first == ("rank 0 on algo-1 stalled: no progress for 0.01 min in phase train (no step "
                     "finished yet); not answering: rank 1 on algo-1")
    assert reports[0].splitlines()[1].startswith("The budget of phase train")
    assert exits == [stall.EXIT_STATUS]


def test_a_failing_peer_check_still_reports_and_exits(monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise RuntimeError("no threads left")

    monkeypatch.setattr(peers, "ask_all", broken)
    reports, exits, fired = [], [], threading.Event()
    with open(tmp_path / "stderr.txt", "w", encoding="utf-8") as stream:
        dog = stall.Watchdog("rank 0", "algo-1", 0.2, 5.0, report=reports.append,
                             exit=lambda status: (exits.append(status), fired.set()),
                             stream=stream)
        dog.set_peers([{"who": "rank 1", "host": "algo-2", "port": 1}])
        dog.start(stall.TRAIN)
        assert fired.wait(10)
    assert reports[0].splitlines()[0].endswith(
        "(no step finished yet); peers not checked: RuntimeError: no threads left")
    assert exits == [stall.EXIT_STATUS]


def test_a_port_taken_leaves_no_status_server_and_training_goes_on(capsys):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        dog = stall.Watchdog("rank 0", "algo-1", 60, 600, report=print)
        assert dog.serve_status(port=port, bind="127.0.0.1") == {
            "who": "rank 0", "host": "algo-1", "port": None}
    warning = capsys.readouterr().err
    assert warning.startswith("stall watchdog: rank 0 on algo-1: no status server for the peers (")
    assert "Error" not in warning  # the toolkit's failure scan (aws-rules.md SM-9)


# A real process serving its status, then stopped (SIGSTOP): connected to, it answers nothing.
SERVING = """
import sys, time
from maskrcnn_job.training import watchdog as stall
dog = stall.Watchdog("rank 1", "algo-2", 60, 600, report=print)
dog.phase(stall.TRAIN)
dog.progress(15)
print(dog.serve_status(bind="127.0.0.1")["port"], "tensorflow" in sys.modules, flush=True)
time.sleep(60)
"""


def test_a_stopped_process_is_not_answering(fast_peers):
    process = subprocess.Popen([sys.executable, "-c", SERVING], stdout=subprocess.PIPE, text=True)
    try:
        port, tensorflow_imported = process.stdout.readline().split()
        assert tensorflow_imported == "False"  # the watchdog and its peers: pure Python
        address = {"who": "rank 1", "host": "algo-2", "port": int(port)}
        running, = peers.ask_all([address], own_host="algo-2")
        assert running.status["last_step"] == 15 and running.status["phase"] == "train"
        processes.stop(process.pid)
        started = time.monotonic()
        stopped, = peers.ask_all([address], own_host="algo-2")
        assert 0.4 < time.monotonic() - started < 1.5
        assert stopped.status is None and stopped.problem == "timeout"
        assert peers.describe([stopped], 1000) == "; not answering: rank 1 on algo-2"
    finally:
        os.kill(process.pid, signal.SIGCONT)
        process.kill()
        process.wait()
        process.stdout.close()


# Under parameter servers: every host's supervisor answers for its tasks (the chief's peers are
# TensorFlow's servers). The supervisor itself: test_parameter_server_host.py.


def _supervisor(host, tasks):
    return peers.Answer({"who": "the supervisor", "host": host, "port": 2225}, status={
        "who": "the supervisor", "host": host,
        "tasks": [{"task": name, "pid": 100 + k, "state": state, "restarts": restarts}
                  for k, (name, state, restarts) in enumerate(tasks)]})


def test_a_supervisors_stopped_task_comes_first_then_what_else_is_wrong():
    answers = [_supervisor("algo-1", [("ps:0", "running", 0), ("worker:0", "running", 0),
                                      ("chief:0", "running", 0)]),
               _supervisor("algo-2", [("ps:1", "stopped", 0), ("worker:1", "running", 2)]),
               _supervisor("algo-3", [("ps:2", "in uninterruptible sleep", 0),
                                      ("worker:2", "exited with status 1", 3)]),
               peers.Answer({"who": "the supervisor", "host": "algo-4", "port": 2225})]
    assert peers.describe(answers, 1000) == (
        "; stopped by a signal: ps:1 on algo-2"
        "; not answering: the supervisor on algo-4"
        "; tasks not running: ps:2 on algo-3 (in uninterruptible sleep), "
        "worker:2 on algo-3 (exited with status 1)"
        "; answering: the supervisor on algo-1 (running: ps:0, worker:0, chief:0), "
        "the supervisor on algo-2 (running: worker:1 restarted 2 times), "
        "the supervisor on algo-3 (running: none)")


def test_supervisors_whose_tasks_all_run_say_every_peer_answers():
    answers = [_supervisor("algo-1", [("ps:0", "running", 0), ("chief:0", "running", 0)]),
               _supervisor("algo-2", [("ps:1", "running", 0), ("worker:1", "running", 1)])]
    assert peers.describe(answers, 1000) == (
        "; every peer answers: the supervisor on algo-1 (running: ps:0, chief:0), "
        "the supervisor on algo-2 (running: ps:1, worker:1 restarted 1 time)")
    many = [_supervisor(f"algo-{k}", [(f"ps:{k}", "stopped", 0)]) for k in range(1, 300)]
    text = peers.describe(many, 880)
    assert len(text) <= 880 and text.startswith("; stopped by a signal: ps:1 on algo-1, ")


def test_known_peers_are_asked_without_the_exchange_and_a_frozen_supervisor_is_named(
        fast_peers, tmp_path):
    """The parameter-server chief's watchdog (job.stall_watchdog adds every host's supervisor):
    a host whose supervisor is frozen (the host hung) is not answering; its exchange, which
    yields no peer under parameter servers, changes nothing."""
    def wire(dog, frozen):
        dog.add_peers([{"who": "the supervisor", "host": "algo-1", "port": frozen.port}])
        dog.set_peers([dog.serve_status(bind="127.0.0.1")])  # the chief's gather: itself alone

    reports, exits = _fire_beside_a_frozen_peer(tmp_path, "chief 0", wire)
    assert reports[0].splitlines()[0] == (
        "chief 0 on algo-1 stalled: no progress for 0.01 min in phase train (no step finished "
        "yet); not answering: the supervisor on algo-1")
    assert exits == [stall.EXIT_STATUS]


# TensorFlow losing a peer (job.peer_lost): a frozen MultiWorkerMirroredStrategy worker stops
# sending heartbeats, and the coordination service aborts the others' collectives within seconds,
# before any stall budget. What worker 0 raised when worker 1 was stopped on 2 emulated hosts
# (TF 2.21; test_strategies.py), cut:
ABORTED = """Graph execution error:

Detected at node mask_rcnn_model/res_net/strategy_sync_batch_normalization/moments/CollectiveReduceV2 defined at (most recent call last):
  File "/opt/ml/code/train.py", line 10, in <module>

Collective ops is aborted by: Error reported from /job:worker/task:1: The following tasks are unhealthy (stopped sending heartbeats):
/job:worker/replica:0/task:1
The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug further.
The error could be from a previous operation. Restart your program to reset.
	 [[{{node mask_rcnn_model/res_net/strategy_sync_batch_normalization/moments/CollectiveReduceV2}}]] [Op:__inference_one_step_42275]"""


def test_the_peers_tensorflow_lost_are_named_with_their_hosts():
    from maskrcnn_job import job
    from maskrcnn_job.distribution import cluster_spec

    mirrored = cluster_spec.multi_worker_mirrored(["algo-1", "algo-2"], "algo-1")
    assert job.lost_peers(ABORTED, mirrored) == ["worker 1 on algo-2"]
    assert job.lost_peers(ABORTED, None) == ["worker 1"]  # no cluster: no host
    servers = cluster_spec.parameter_server(["algo-1", "algo-2", "algo-3"], ("chief", 0))
    two = ("unhealthy (stopped sending heartbeats):\n/job:ps/replica:0/task:1\n"
           "/job:worker/replica:0/task:2\nThe tasks have crashed.")
    assert job.lost_peers(two, servers) == ["ps 1 on algo-2", "worker 2 on algo-3"]
    assert job.lost_peers("UnavailableError: Socket closed", mirrored) == []


def test_a_lost_peer_fails_naming_it_and_what_its_status_server_says(monkeypatch):
    from maskrcnn_job import job
    from maskrcnn_job.distribution import cluster_spec

    monkeypatch.setenv(cluster_spec.TF_CONFIG, json.dumps(
        cluster_spec.multi_worker_mirrored(["algo-1", "algo-2"], "algo-1")))
    asked = []
    monkeypatch.setattr(peers, "ask_all", lambda table, own_host: asked.extend(table) or [
        peers.Answer(address) for address in table])  # nothing answers: frozen
    dog = stall.Watchdog("worker 0", "algo-1", 60, 600, report=print)
    dog.set_peers([{"who": "worker 0", "host": "algo-1", "port": 1},
                   {"who": "worker 1", "host": "algo-2", "port": 2}])
    lost = job.peer_lost(RuntimeError(ABORTED), dog)
    first, second = str(lost).splitlines()[:2]
    assert first == ("TensorFlow's coordination service lost worker 1 on algo-2 (no heartbeats "
                     "within its timeout); not answering: worker 1 on algo-2")
    assert second == "RuntimeError: Graph execution error:"
    assert asked == [{"who": "worker 1", "host": "algo-2", "port": 2}]
    assert job.peer_lost(RuntimeError("injected failure at step 23"), dog) is None


def test_at_the_end_the_chief_waits_until_its_peers_have_left(fast_peers):
    """A MultiWorkerMirroredStrategy chief leaves only once the other workers' status servers
    refuse connections (they close them after their last collective; job.run): one that leaves
    after 0.6 s is waited for, one that stays is named at the timeout, one without a status
    server is not waited for."""
    clock = Clock()
    chief, leaving, staying = (stall.Watchdog(f"rank {k}", "algo-1", 60, 600, report=print,
                                              clock=clock) for k in range(3))
    try:
        addresses = [w.serve_status(bind="127.0.0.1") for w in (chief, leaving, staying)]
        chief.set_peers(addresses + [{"who": "rank 3", "host": "algo-1", "port": None}])
        threading.Timer(0.6, leaving.stop).start()
        started = time.monotonic()
        assert chief.wait_for_peers_to_leave(timeout_s=2.0) == ["rank 2 on algo-1"]
        assert 2.0 <= time.monotonic() - started < 4.0
        # Once the others have left, at once.
        chief.set_peers(addresses[:2])
        started = time.monotonic()
        assert chief.wait_for_peers_to_leave(timeout_s=2.0) == []
        assert time.monotonic() - started < 1.0
        # The leaving one was waited for until it left.
        late = stall.Watchdog("rank 4", "algo-1", 60, 600, report=print, clock=clock)
        chief.set_peers([late.serve_status(bind="127.0.0.1")])
        threading.Timer(0.6, late.stop).start()
        started = time.monotonic()
        assert chief.wait_for_peers_to_leave(timeout_s=5.0) == []
        assert 0.6 <= time.monotonic() - started < 2.0
    finally:
        for watchdog in (chief, leaving, staying):
            watchdog.stop()
