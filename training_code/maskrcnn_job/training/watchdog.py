"""The stall watchdog: a rank that makes no progress for its phase's budget fails the job, saying
what hung (docs/operations.md, "A hung job").

Every process that runs the training loop (each Horovod rank, each MultiWorkerMirroredStrategy
worker, the parameter-server chief) has one. The loop reports progress (`progress`: a finished
step, an evaluated batch) and phase changes (`phase`); a thread looks every few seconds, and once
the current phase has gone its budget without progress it
1. reports the stall through `report` (job.py: the toolkit's stderr line and the failure file,
   whose first line becomes the job's FailureReason, docs/aws-rules.md SM-8), first line
   "<rank> on <host> stalled: no progress for <m> min in phase <phase> (last finished step <n>)",
   followed by what its peers say (peers.py): "; not answering: rank 1 on algo-2" names a frozen
   one, "; every peer answers: ..." (with their phases and steps) says none is;
2. prints every thread's Python stack to stderr;
3. ends the process with EXIT_STATUS at once (os._exit: the main thread is stuck, and interpreter
   shutdown would wait on it). What a failing process does to the job is the distribution's:
   mpirun aborts every rank, a MultiWorkerMirroredStrategy host that exits non-zero fails the job,
   a parameter-server host fails when its chief does (distribution/parameter_server_host.py).
A process that is itself frozen (SIGSTOP, a dead host) reports nothing: the ranks waiting for it
in a collective make no progress either, and theirs fire, naming it as not answering. For that
each process serves its status (`serve_status`, a thread and a TCP port) and learns its peers'
addresses once the backend has started (`set_peers`, trainer.py); asking them takes at most
peers.ASK_ALL_TIMEOUT_S, and no failure of it keeps the report and the exit from happening.
Under MultiWorkerMirroredStrategy TensorFlow's coordination service usually notices a frozen
worker first (no heartbeats for seconds) and aborts the others' collectives: job.peer_lost then
names it, asking the same peers (`ask_peers`). Under ParameterServerStrategy the chief alone
runs the loop and its peers are TensorFlow's servers, which serve no status: its peers are every
host's supervisor instead, at a fixed port (`add_peers`, job.py), which answer with their tasks'
states, so the report names a stopped PS or worker ("; stopped by a signal: ps:1 on algo-2") or
a host whose supervisor is frozen.

Budgets: TRAIN (between finished steps) gets `step_budget_s`; every other phase (start-up, the
first step, which traces the graph, checkpoints, evaluation with the chief's COCOeval while the
others wait, export) gets `slow_budget_s`. A budget of 0 leaves that phase unwatched; a step
budget of 0 turns the watchdog off. A phase other than TRAIN that went longer than the step budget
without progress is said on leaving it (`slow_phase_line`: the slow phases' budget was what kept
it from being a stall; how long, for setting stall_timeout_slow_phases_minutes). Pure Python, no
TensorFlow: the clock, the exit and the stream are parameters, for tests.
"""

import faulthandler
import os
import sys
import threading
import time
from typing import Callable, List, Optional, TextIO

from maskrcnn_job.training import peers as peer_status

# The loop's phases, as they appear in a stall report.
START = "start"            # TensorFlow, the backend, the model, the restore and broadcast
FIRST_STEP = "first step"  # the first step of this process traces (and compiles) the graph
TRAIN = "train"            # between finished steps: the step budget
CHECKPOINT = "checkpoint"
EVALUATION = "evaluation"
EXPORT = "export"

EXIT_STATUS = 1
MAX_CHECK_SECONDS = 5.0    # how often the thread looks, at most (a tenth of the budget if less)
FIRST_LINE_CHARS = 1000    # the report's first line, peers included (FailureReason: 1024)
# At the job's end, how long the chief waits for the other workers to leave: after their last
# collective they only close their files and exit.
PEERS_LEAVE_TIMEOUT_S = 30.0


def minutes(seconds: float) -> str:
    value = seconds / 60
    return f"{value:.1f} min" if value >= 1 else f"{value:.2f} min"


class Watchdog:
    """`who` on `host` (e.g. "rank 1" on "algo-2"); `report(message)` is called once, on a stall,
    before the stacks are printed and the process exits."""

    def __init__(self, who: str, host: str, step_budget_s: float, slow_budget_s: float,
                 report: Callable[[str], None], *, clock: Callable[[], float] = time.monotonic,
                 exit: Callable[[int], None] = os._exit,  # noqa: A002
                 stream: Optional[TextIO] = None, check_every_s: Optional[float] = None):
        self.who, self.host = who, host
        self.step_budget_s, self.slow_budget_s = step_budget_s, slow_budget_s
        self._report, self._clock, self._exit = report, clock, exit
        self._stream = stream
        self._check_every_s = check_every_s or min(
            [MAX_CHECK_SECONDS] + [b / 10 for b in (step_budget_s, slow_budget_s) if b > 0])
        self._lock = threading.Lock()
        self._phase, self._since = START, clock()
        self._step: Optional[int] = None
        self._longest = 0.0  # the current phase's longest time without progress so far
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._server: Optional[peer_status.StatusServer] = None
        self._peers: Optional[List[peer_status.Address]] = None  # None: not exchanged yet
        self._known: List[peer_status.Address] = []  # add_peers': known without the exchange

    @classmethod
    def off(cls) -> "Watchdog":
        return cls("rank 0", "", 0, 0, report=lambda message: None)

    @property
    def enabled(self) -> bool:
        return self.step_budget_s > 0

    def budget_s(self, phase: str) -> float:
        return self.step_budget_s if phase == TRAIN else self.slow_budget_s

    def start(self, phase: str = START) -> None:
        """Watches from now on, in `phase` (nothing when off)."""
        self.phase(phase)
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="stall-watchdog",
                                            daemon=True)
            self._thread.start()

    def phase(self, phase: str) -> None:
        """Enters `phase`: its budget applies from now. Leaving a phase other than TRAIN that
        went longer than the step budget without progress prints `slow_phase_line`."""
        with self._lock:
            now = self._clock()
            left, longest = self._phase, max(self._longest, now - self._since)
            self._phase, self._since, self._longest = phase, now, 0.0
        line = self.slow_phase_line(left, longest)
        if line is not None:
            print(line, file=self._stream or sys.stderr, flush=True)

    def slow_phase_line(self, phase: str, longest_s: float) -> Optional[str]:
        """What leaving `phase` after at most `longest_s` without progress says: None unless it
        is a slow phase (not TRAIN) that went past the step budget, which would have been a
        stall under that budget."""
        if not self.enabled or phase == TRAIN or longest_s <= self.step_budget_s:
            return None
        own = (f"within its own budget of {minutes(self.slow_budget_s)} "
               "(stall_timeout_slow_phases_minutes)" if self.slow_budget_s > 0
               else "a phase not watched (stall_timeout_slow_phases_minutes=0)")
        return (f"stall watchdog: {self.who} on {self.host}: phase {phase} went {longest_s:.1f} s "
                f"without progress, more than the step budget of {minutes(self.step_budget_s)}, "
                f"{own}")

    def progress(self, step: Optional[int] = None) -> None:
        """Progress in the current phase; `step`: the step just finished, if one was."""
        with self._lock:
            now = self._clock()
            self._longest = max(self._longest, now - self._since)
            self._since = now
            if step is not None:
                self._step = step

    def stop(self) -> None:
        self._stopped.set()
        if self._server is not None:
            self._server.close()

    def status(self) -> dict:
        """What this process's status server answers a peer."""
        with self._lock:
            phase, idle, step = self._phase, self._clock() - self._since, self._step
        return {"who": self.who, "host": self.host, "phase": phase, "last_step": step,
                "seconds_since_progress": round(idle, 1)}

    def serve_status(self, port: int = 0, bind: str = "0.0.0.0") -> peer_status.Address:
        """Starts this process's status server (once) and returns its address for the peers, port
        None if it could not listen (said on the stream). Never raises."""
        try:
            if self._server is None:
                self._server = peer_status.StatusServer(self.status, port=port, bind=bind)
            return {"who": self.who, "host": self.host, "port": self._server.port}
        except Exception as error:  # noqa: BLE001  (training goes on; the peers will say so)
            # No exception class name in the log (the toolkit's failure scan, aws-rules.md SM-9).
            print(f"stall watchdog: {self.who} on {self.host}: no status server for the peers "
                  f"({error})", file=self._stream or sys.stderr, flush=True)
            return {"who": self.who, "host": self.host, "port": None}

    def set_peers(self, addresses: List[peer_status.Address]) -> None:
        """Every process's address (serve_status's, gathered); this process's own is left out."""
        self._peers = [a for a in addresses if isinstance(a, dict)
                       and (a.get("who"), a.get("host")) != (self.who, self.host)]

    def wait_for_peers_to_leave(self, timeout_s: float = PEERS_LEAVE_TIMEOUT_S) -> List[str]:
        """Until every exchanged peer's status server refuses connections, at most `timeout_s`:
        a process closes it only after its last collective ended there, so a process that waits
        for this before it exits leaves no peer pulling data from it (a MultiWorkerMirroredStrategy
        collective ends on one worker while another still fetches this one's part: "Socket
        closed" if it has exited). A peer that answers, or is connected to and answers nothing (a
        frozen one), is waited for; one refused (it left), without a status server or not
        reached is not. Returns the names of the peers still there at the timeout; none without
        exchanged peers."""
        remaining = [a for a in self._peers or [] if isinstance(a.get("port"), int)]
        deadline = time.monotonic() + timeout_s
        while remaining:
            answers = peer_status.ask_all(remaining, own_host=self.host, timeout_s=1.0,
                                          total_s=2.0)
            remaining = [a.address for a in answers
                         if a.status is not None or a.problem == "timeout"]
            if not remaining or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        return [f"{a.get('who')} on {a.get('host')}" for a in remaining]

    def add_peers(self, addresses: List[peer_status.Address]) -> None:
        """Peers whose addresses are known from the start (the parameter-server hosts'
        supervisors: a fixed port on each host), asked from the start, with the exchanged ones
        once there are."""
        self._known.extend(a for a in addresses if isinstance(a, dict))

    def ask_peers(self, room: int) -> str:
        """What the peers say, for the report's first line (at most about `room` characters);
        never raises."""
        try:
            if self._peers is None and not self._known:
                return "; peers not asked: their addresses are exchanged once the backend started"
            answers = peer_status.ask_all(self._known + (self._peers or []), own_host=self.host)
            return peer_status.describe(answers, room)
        except Exception as error:  # noqa: BLE001  (the report and the exit come first)
            return f"; peers not checked: {type(error).__name__}: {error}"[:max(room, 40)]

    def _with_peers(self, message: str) -> str:
        first, newline, rest = message.partition("\n")
        try:
            first = (first + self.ask_peers(FIRST_LINE_CHARS - len(first)))[:FIRST_LINE_CHARS]
        except Exception:  # noqa: BLE001, S110  (the report as it was)
            pass
        return first + newline + rest

    def check(self) -> Optional[str]:
        """The stall report if the current phase went past its budget without progress."""
        with self._lock:
            phase, idle, step = self._phase, self._clock() - self._since, self._step
        budget = self.budget_s(phase)
        if not self.enabled or budget <= 0 or idle < budget:
            return None
        last = f"last finished step {step}" if step is not None else "no step finished yet"
        setting = ("stall_timeout_minutes" if phase == TRAIN
                   else "stall_timeout_slow_phases_minutes")
        return (f"{self.who} on {self.host} stalled: no progress for {minutes(idle)} in phase "
                f"{phase} ({last})\n"
                f"The budget of phase {phase} is {minutes(budget)} ({setting}). A rank waiting "
                "in a collective for a frozen or dead one stalls too: the first rank to report "
                "is not always the cause. Every thread's stack is in the log.")

    def _watch(self) -> None:
        while not self._stopped.wait(self._check_every_s):
            message = self.check()
            if message is not None:
                self._fire(message)
                return

    def _fire(self, message: str) -> None:
        stream = self._stream or sys.stderr
        try:
            self._report(self._with_peers(message))
        finally:
            try:
                print(f"stall watchdog: {self.who} on {self.host}: every thread's stack:",
                      file=stream, flush=True)
                faulthandler.dump_traceback(file=stream, all_threads=True)
                stream.flush()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                self._exit(EXIT_STATUS)
