"""Which peers of a stalled process still answer (docs/operations.md, "A hung job").

A process that is frozen (SIGSTOP, a host that stopped scheduling it) can write nothing, so the
stall is reported by a process that waited for it in a collective. To name the frozen one, every
process that runs the training loop serves its watchdog's status on a TCP port of its own
(`StatusServer`: one JSON line per connection, {"who", "host", "phase", "last_step",
"seconds_since_progress"}, from a thread of its own), the processes exchange their addresses once
the backend has started (training/trainer.py, through the backend's gather_objects), and a
process whose watchdog fires asks every other one (`ask_all`, in parallel, a few seconds in all):
- a frozen process's kernel still accepts the connection (the listen backlog) but nothing answers:
  the read times out, "not answering";
- an exited process's port is closed ("connection refused"), an unreachable host times out on
  connect: "not reached", with the error;
- the others answer with their phase and last step: when every peer answers, the stall is in a
  collective every process waits in, or in the reporting process itself.
Under parameter servers the chief alone runs the loop, and its peers are TensorFlow's servers,
which serve no status; each host's supervisor (distribution/parameter_server_host.py) answers for
its tasks instead, on the same protocol: {"who": "the supervisor", "host", "tasks": [{"task":
"ps:1", "pid", "state", "restarts"}]}, a task's state read from /proc ("stopped": SIGSTOP, which
leaves a frozen process's sockets open, so nothing else would tell).
`describe` turns the answers into the text appended to the stall report's first line, kept short
enough for the job's FailureReason (1024 characters). Pure Python (sockets and threads), no
TensorFlow: the watchdog (watchdog.py) holds the server and asks.

Peers on this process's host are asked at 127.0.0.1; the others by host name (SageMaker's hosts,
algo-1, algo-2, ..., resolve each other's names, as do the emulated hosts of
maskrcnn_local/emulated_hosts.py; the training security group admits all traffic between the
hosts of a job, stacks/network.py).
"""

import json
import socket
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence

ANSWER_TIMEOUT_S = 3.0   # a peer that answers nothing within this is "not answering"
ASK_ALL_TIMEOUT_S = 4.0  # all peers together (in parallel): the stall report waits at most this
MAX_ANSWER_BYTES = 4096
LOOPBACK = "127.0.0.1"

# A peer's address as the processes exchange it: {"who": "rank 1", "host": "algo-2", "port": N};
# port None where that process could not serve its status.
Address = Dict[str, object]

RUNNING = "running"  # a supervisor's task that is alive and not stopped (/proc state R, S, I)
# A supervisor's task states that freeze the task (the likely cause of a stall), their titles.
STOPPED = {"stopped": "stopped by a signal", "traced": "stopped by a tracer"}


class StatusServer:
    """Serves `status()` (a JSON-serializable dict) on 0.0.0.0:`port` (0: any free port), one line
    to each connection, from a daemon thread. Raises OSError if it cannot listen."""

    def __init__(self, status: Callable[[], dict], port: int = 0, bind: str = "0.0.0.0"):
        self._status = status
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # A fixed port (a supervisor's) binds again while its last answers are in TIME_WAIT.
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((bind, port))
            self._socket.listen(64)
        except OSError:
            self._socket.close()
            raise
        self.port: int = self._socket.getsockname()[1]
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="stall-status", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                if self._closed.is_set():
                    return
                time.sleep(0.1)  # e.g. out of file descriptors: try again
                continue
            try:
                with connection:
                    connection.settimeout(1.0)
                    try:
                        answer = self._status()
                    except Exception as error:  # noqa: BLE001  (say so rather than go silent)
                        answer = {"error": f"{type(error).__name__}: {error}"}
                    connection.sendall((json.dumps(answer) + "\n").encode())
            except Exception:  # noqa: BLE001, S112  (a client that went away: serve the next one)
                continue

    def close(self) -> None:
        self._closed.set()
        try:
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes the thread's accept() on Linux
        except OSError:
            pass
        self._socket.close()


class Answer:
    """One peer's answer: `status` (its dict) if it answered, else `problem`: "timeout" (connected,
    or connecting, and nothing came) or the error ("ConnectionRefusedError: ...")."""

    def __init__(self, address: Address, status: Optional[dict] = None,
                 problem: Optional[str] = "timeout"):
        self.address, self.status = address, status
        self.problem = None if status is not None else problem

    @property
    def name(self) -> str:
        return f"{self.address.get('who')} on {self.address.get('host')}"


def ask(host: str, port: int, timeout_s: float = ANSWER_TIMEOUT_S) -> dict:
    """The status a StatusServer at host:port answers; socket.timeout if none comes in time."""
    deadline = time.monotonic() + timeout_s
    data = b""
    with socket.create_connection((host, port), timeout=timeout_s) as connection:
        while b"\n" not in data and len(data) < MAX_ANSWER_BYTES:
            connection.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = connection.recv(MAX_ANSWER_BYTES)
            if not chunk:
                break
            data += chunk
    if b"\n" not in data:
        raise ValueError(f"an incomplete answer ({len(data)} bytes)")
    status = json.loads(data.split(b"\n", 1)[0].decode("utf-8"))
    if not isinstance(status, dict):
        raise ValueError("an answer that is not a JSON object")
    return status


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().rstrip(":")
    return text if len(text) <= 80 else text[:77] + "..."


def ask_all(peers: Sequence[Address], own_host: str, timeout_s: Optional[float] = None,
            total_s: Optional[float] = None) -> List[Answer]:
    """Every peer's Answer, in the order of `peers`, asked in parallel, each within `timeout_s`
    (ANSWER_TIMEOUT_S); a peer whose thread has not finished after `total_s` (ASK_ALL_TIMEOUT_S)
    counts as not answering."""
    timeout_s = ANSWER_TIMEOUT_S if timeout_s is None else timeout_s
    total_s = ASK_ALL_TIMEOUT_S if total_s is None else total_s
    answers = [Answer(peer) for peer in peers]

    def one(index: int) -> None:
        peer = peers[index]
        port = peer.get("port")
        if not isinstance(port, int):
            answers[index] = Answer(peer, problem="no status server")
            return
        host = LOOPBACK if peer.get("host") == own_host else str(peer.get("host"))
        try:
            answers[index] = Answer(peer, status=ask(host, port, timeout_s))
        except TimeoutError:
            answers[index] = Answer(peer, problem="timeout")
        except Exception as error:  # noqa: BLE001  (refused, unknown host, a garbled answer)
            answers[index] = Answer(peer, problem=_short(error))

    threads = [threading.Thread(target=one, args=(i,), name=f"stall-ask-{i}", daemon=True)
               for i in range(len(peers))]
    deadline = time.monotonic() + total_s
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0))
    # A thread still running leaves its Answer(peer): "timeout". Copied: late threads change
    # nothing the caller reads.
    return list(answers)


def _tasks(answer: Answer) -> Optional[List[dict]]:
    """A supervisor's tasks (None: the answer is a watchdog's status)."""
    tasks = (answer.status or {}).get("tasks")
    return [t for t in tasks if isinstance(t, dict)] if isinstance(tasks, list) else None


def _task_name(task: dict, answer: Answer) -> str:
    return f"{task.get('task')} on {answer.address.get('host')}"


def _status_text(answer: Answer) -> str:
    status = answer.status or {}
    if "error" in status:
        return f"{answer.name} (its status failed: {str(status['error'])[:80]})"
    tasks = _tasks(answer)
    if tasks is not None:
        running = []
        for task in tasks:
            if task.get("state") == RUNNING:
                restarts = task.get("restarts") or 0
                running.append(str(task.get("task")) + (
                    f" restarted {restarts} time{'s' if restarts != 1 else ''}" if restarts
                    else ""))
        return f"{answer.name} (running: {', '.join(running) or 'none'})"
    step = status.get("last_step")
    idle = status.get("seconds_since_progress")
    parts = [f"phase {status.get('phase')}",
             f"last finished step {step}" if step is not None else "no step finished"]
    if isinstance(idle, (int, float)):
        parts.append(f"idle {idle:.0f} s")
    return f"{answer.name} ({', '.join(parts)})"


def _group(title: str, items: List[str], room: int) -> str:
    """"; <title>: a, b, c and N more" within `room` characters (a count alone if none fits)."""
    text, shown = f"; {title}: ", 0
    for item in items:
        candidate = text + (", " if shown else "") + item
        rest = len(items) - shown - 1
        if len(candidate) + (len(f" and {rest} more") if rest else 0) > room:
            break
        text, shown = candidate, shown + 1
    if shown == len(items):
        return text
    if shown == 0:
        return f"; {title}: {len(items)} peer(s)"
    return f"{text} and {len(items) - shown} more"


def describe(answers: Sequence[Answer], room: int) -> str:
    """The text appended to the stall report's first line, at most `room` characters (about),
    most useful first: a supervisor's stopped tasks ("; stopped by a signal: ps:1 on algo-2"),
    "; not answering: rank 1 on algo-2", "; not reached: ...", a supervisor's tasks otherwise not
    running ("; tasks not running: worker:1 on algo-2 (exited with status 1)"), then the peers
    that answer (when nothing else is said: "; every peer answers: ..."). Empty: no peers."""
    if not answers:
        return ""
    tasks = [(task, a) for a in answers for task in (_tasks(a) or [])]
    stopped = [(title, [_task_name(t, a) for t, a in tasks if t.get("state") == state])
               for state, title in STOPPED.items()]
    not_running = [f"{_task_name(t, a)} ({t.get('state')})" for t, a in tasks
                   if t.get("state") != RUNNING and t.get("state") not in STOPPED]
    silent = [a.name for a in answers if a.status is None and a.problem == "timeout"]
    unreached = [f"{a.name} ({a.problem})" for a in answers
                 if a.status is None and a.problem != "timeout"]
    answering = [_status_text(a) for a in answers if a.status is not None]
    fine = not silent and not unreached and not not_running and not any(n for _, n in stopped)
    text = ""
    for title, items in (*stopped, ("not answering", silent), ("not reached", unreached),
                         ("tasks not running", not_running),
                         ("every peer answers" if fine else "answering", answering)):
        if items and len(text) < room:
            text += _group(title, items, room - len(text))
    return text
