"""`make test`: every test under tests/, as five pytest processes side by side.

The job's end-to-end tests (tests/training/test_job.py, test_strategies.py) each start real
multi-process runs, which keep only ~1.1 of the 2 cores of this machine busy on average
(single-threaded imports and graph tracing, the training toolkit's own waits). Each of those two
files runs in a pytest process of its own beside one for tests/launcher (a moto server per
process on a port of its own, CDK synths) and one for everything else, whose output is shown as
it comes. tests/infra runs in a fifth, as the CDK pipeline's Synth step runs it
(stacks/pipeline_stack.py): `python -m pytest -q tests/infra` with the Python of .venv-infra, made
from requirements-infra.txt alone, first on PATH (the CDK CLI's `python3 app.py` is that one
too); the one infra test that needs moto, which that environment lacks, runs here after the
third. The
logs are printed at the end (and kept under build/). The exit status is non-zero when any process
fails. Plain `pytest` runs the same tests in one process.

    python scripts/run_tests.py [PYTEST_ARGS...]   (passed to each process)
"""

import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INFRA_BIN = os.path.join(REPO, ".venv-infra", "bin")
# (tests, the Python that runs them)
BESIDE = (("tests/training/test_job.py", sys.executable),
          ("tests/training/test_strategies.py", sys.executable),
          # Their moto server and the CDK synth wait on I/O and Node as much as on the cores.
          ("tests/launcher", sys.executable),
          ("tests/infra", os.path.join(INFRA_BIN, "python")))
# The infra tests that need moto (absent where the pipeline runs tests/infra): run here too.
NEEDS_MOTO = ("tests/infra/test_monitoring.py::test_the_matcher_answers_as_motos_does",)
LOG_DIR = os.path.join(REPO, "build")


def main(extra) -> int:
    os.makedirs(LOG_DIR, exist_ok=True)
    started = time.time()
    beside = []
    for path, python in BESIDE:
        log = os.path.join(LOG_DIR, f"test-{os.path.basename(path).removesuffix('.py')}.log")
        env = dict(os.environ)
        if python != sys.executable:
            env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
            env.pop("VIRTUAL_ENV", None)
        with open(log, "w", encoding="utf-8") as out:
            # No cache plugin: several processes writing .pytest_cache at once would race.
            process = subprocess.Popen(
                [python, "-m", "pytest", "-p", "no:cacheprovider", path, *extra],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        beside.append((path, log, process))
        print(f"{path} running beside the other tests (log: {os.path.relpath(log, REPO)})",
              flush=True)
    ignored = [f"--ignore={path}" for path, _ in BESIDE]
    statuses = {"the other tests": subprocess.call([sys.executable, "-m", "pytest", *ignored,
                                                    *extra], cwd=REPO)}
    # Apart: a node id under an --ignore'd folder is not collected beside its parent folder.
    statuses["infra tests that need moto"] = subprocess.call(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra, *NEEDS_MOTO], cwd=REPO)
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
