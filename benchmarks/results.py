"""What every benchmark records beside its figures, and where (`make bench`).

Each benchmark script writes one JSON file, <results dir>/<benchmark>.json, with
  benchmark  the script's name: cpu_scaling, converter_speed, demo_accuracy, coco_eval_speed,
             large_images
  date       the UTC date the run started (YYYY-MM-DD)
  machine    CPU model, cores, memory, OS, Python, TensorFlow and Horovod versions
  command    the exact command line, run from the repository root
  smoke      true when the run only checked the path: its figures mean nothing
  seconds    how long the script ran
and the script's own figures beside them. benchmarks/report.py renders the files of one run
into docs/benchmarks.md, each table with its date, machine and command. learning_bounds.py
records the same date, machine and command in a file of its own (tests/training/
learning_bounds.json, its table in docs/testing.md), not here. Standard library only.
"""

import importlib.metadata
import json
import os
import platform
import re
import shlex
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_RESULTS_DIR = os.path.join("build", "bench", "results")


def _first_match(path: str, pattern: str) -> str:
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        found = re.search(pattern, f.read(), re.M)
    return found.group(1).strip() if found else ""


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine() -> str:
    """One line: what the figures were measured on."""
    cpu = _first_match("/proc/cpuinfo", r"^model name\s*:\s*(.+)$") or "unknown CPU"
    memory_kib = _first_match("/proc/meminfo", r"^MemTotal:\s*(\d+) kB")
    memory = f"{int(memory_kib) / 2**20:.0f} GiB" if memory_kib else "unknown memory"
    try:
        system = platform.freedesktop_os_release()["PRETTY_NAME"]
    except (OSError, KeyError):
        system = platform.platform()
    return (f"{cpu}, {os.cpu_count()} cores, {memory}, {system}, Python "
            f"{platform.python_version()}, TensorFlow {_version('tensorflow')}, "
            f"Horovod {_version('horovod')}")


def command() -> str:
    """This process's command line, as run from the repository root."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO)
    return shlex.join(["python", script] + sys.argv[1:])


def write(results_dir: str, benchmark: str, started: float, smoke: bool, figures: dict) -> str:
    """<results_dir>/<benchmark>.json: the figures and what they were measured on."""
    record = {"benchmark": benchmark,
              "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
              "machine": machine(), "command": command(), "smoke": smoke,
              "seconds": round(time.time() - started, 1)}
    record.update(figures)
    os.makedirs(results_dir, exist_ok=True)
    path = os.path.join(results_dir, f"{benchmark}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    return path
