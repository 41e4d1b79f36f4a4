"""`make test`: every test under tests/, as three pytest processes side by side.

The job's end-to-end tests (tests/training/test_job.py, test_strategies.py) each start real
multi-process runs, which keep only ~1.1 of the 2 cores of this machine busy on average
(single-threaded imports and graph tracing, the training toolkit's own waits). Each of those two
files runs in a pytest process of its own beside a third for everything else, whose output is
shown as it comes; the two logs are printed at the end (and kept under build/). The exit status
is non-zero when any process fails. Plain `pytest` runs the same tests in one process.

    python scripts/run_tests.py [PYTEST_ARGS...]   (passed to each process)
"""

import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BESIDE = ("tests/training/test_job.py", "tests/training/test_strategies.py")
LOG_DIR = os.path.join(REPO, "build")


def main(extra) -> int:
    os.makedirs(LOG_DIR, exist_ok=True)
    started = time.time()
    beside = []
    for path in BESIDE:
        log = os.path.join(LOG_DIR, f"test-{os.path.basename(path)[:-3]}.log")
        with open(log, "w", encoding="utf-8") as out:
            # No cache plugin: three processes writing .pytest_cache at once would race.
            process = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", path, *extra],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        beside.append((path, log, process))
        print(f"{path} running beside the other tests (log: {os.path.relpath(log, REPO)})",
              flush=True)
    ignored = [f"--ignore={path}" for path in BESIDE]
    statuses = {"the other tests": subprocess.call([sys.executable, "-m", "pytest", *ignored,
                                                    *extra], cwd=REPO)}
    for path, log, process in beside:
        statuses[path] = process.wait()
        print(f"\n=== {path} ===", flush=True)
        with open(log, encoding="utf-8") as f:
            sys.stdout.write(f.read())
    print(f"\nall tests: {time.time() - started:.0f} s; exit status "
          + ", ".join(f"{name} {status}" for name, status in statuses.items()))
    return 0 if not any(statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
