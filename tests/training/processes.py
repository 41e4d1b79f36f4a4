"""The processes below one, read from /proc (the tests that stop or kill one task of a run)."""

import os
import signal
import time
from typing import Dict, List


def descendants(root: int) -> List[int]:
    """The processes below `root`, from /proc (seen from here, an emulated host's processes have
    this namespace's ids too, and a host's first process is the child of its `unshare`)."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                # pid (comm) state ppid ...: comm may hold spaces and parentheses.
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(entry))
    found, pending = [], [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def arguments(pid: int) -> List[bytes]:
    """The command line of `pid`, one item per argument ([] once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def stop(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOPs `pid` and returns once /proc shows it stopped: the kernel stops a task when it
    next runs, which on a loaded machine is after kill() returns (a CI run asked too early)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "T":
                    return
        except OSError:
            raise AssertionError(f"pid {pid} ended before it stopped") from None
        if time.monotonic() > deadline:
            raise AssertionError(f"pid {pid} not stopped {timeout} s after SIGSTOP")
        time.sleep(0.02)
