"""What the tests build once and keep under build/test-cache/ for every pytest process of a
`make test` and every later one: each entry keyed by everything it is made from (`key`), made
by the first process that asks while it holds the entry's file lock (every other process asking
meanwhile waits, then reuses it), and made again when its key changes (the older entry removed
once no process uses it). The entries: the synthesized IAM template (tests/iam/plugin.py), the
trained runs (tests/trained_runs.py), Model Garden's mask paste (tests/launcher/
test_mask_paste.py) and the backbone checkpoints (tests/training/backbone_checkpoints.py).
Clear them with `rm -rf build/test-cache` (`make clean` removes build/)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import shutil
import sys
from pathlib import Path
from typing import Iterable, Iterator

from tests.paths import REPO

CACHE = REPO / "build" / "test-cache"
# What makes files of the repository part of a key.
SUFFIXES = (".py", ".json", ".txt", ".toml", ".sh", ".ipynb", ".patch")


def key(sources: Iterable[str], packages: Iterable[str], *extra) -> str:
    """A digest of the files below `sources` (paths relative to the repository), the installed
    versions of `packages`, this Python's version and `extra` (JSON-serializable)."""
    digest = hashlib.sha256(json.dumps(extra, sort_keys=True).encode())
    for path in _files(sources):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    for package in packages:
        digest.update(f"{package}=={_version(package)}\0".encode())
    digest.update(sys.version.encode())
    return digest.hexdigest()[:16]


# The entries this process uses: each one's lock file, held shared until the process ends, so
# that no other process removes an entry in use here when it makes a newer one of the same name.
_IN_USE: list = []


@contextlib.contextmanager
def entry(name: str, digest: str) -> Iterator[Path]:
    """The directory of the entry `name` with this key, held under the name's lock: the caller
    makes it when it is new (empty). Entries of the same name with other keys are removed, but
    for one another process still uses (a test process that computed its key before the code
    changed under it)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        target = CACHE / f"{name}-{digest}"
        for stale in CACHE.glob(f"{name}-*"):
            if stale.is_dir() and stale != target:
                _remove_unless_used(stale)
        in_use = open(CACHE / f"{target.name}.lock", "a", encoding="utf-8")
        fcntl.flock(in_use, fcntl.LOCK_SH)
        _IN_USE.append(in_use)
        target.mkdir(exist_ok=True)
        yield target


def _remove_unless_used(directory: Path) -> None:
    lock_path = directory.with_name(directory.name + ".lock")
    with open(lock_path, "a", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another process still reads it
        shutil.rmtree(directory, ignore_errors=True)
        lock_path.unlink()


def _files(sources: Iterable[str]):
    for entry_path in sources:
        path = REPO / entry_path
        if path.is_file():
            yield path
            continue
        yield from sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES
                          and "__pycache__" not in p.parts
                          and not any(part.endswith(".egg-info") for part in p.parts))


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"
