"""`make test`: every test under tests/, as six pytest processes side by side.

The job's end-to-end tests (tests/training/test_job.py, test_strategies.py, and the module runs
of test_fine_tune.py and test_batch_norm.py) start real multi-process runs, which keep only ~1.1
of the 2 cores of this machine busy on average (single-threaded imports and graph tracing, the
training toolkit's own waits). test_job.py and test_strategies.py each run in a pytest process of
their own, test_fine_tune.py and test_batch_norm.py together in a third, beside one for
tests/launcher (a moto server per process on a port of its own, CDK synths) and one for
everything else, whose output is shown as it comes. tests/infra runs in a sixth, as the CDK
pipeline's Synth step runs it (stacks/pipeline_stack.py): `python -m pytest -q tests/infra` with
the Python of .venv-infra, made from requirements-infra.txt alone, first on PATH (the CDK CLI's
`python3 app.py` is that one too); the one infra test that needs moto, which that environment
lacks, runs here after the third. The logs are printed at the end (and kept under build/). The
exit status is non-zero when any process fails. Plain `pytest` runs the same tests in one
process.

    python scripts/run_tests.py [PYTEST_ARGS...]   (passed to each process)
"""

import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # tests.cpu_time, whose variable names each process's CPU file
INFRA_BIN = os.path.join(REPO, ".venv-infra", "bin")
# (tests, the Python that runs them)
BESIDE = (("tests/training/test_job.py", sys.executable),
          ("tests/training/test_strategies.py", sys.executable),
          # The two longest module runs of the rest: left in "the other tests", they ran on
          # alone for minutes after the launcher's and infra's processes had ended.
          ("tests/training/test_fine_tune.py tests/training/test_batch_norm.py", sys.executable),
          # Their moto server and the CDK synth wait on I/O and Node as much as on the cores.
          ("tests/launcher", sys.executable),
          ("tests/infra", os.path.join(INFRA_BIN, "python")))
# The infra tests that need moto (absent where the pipeline runs tests/infra): run here too.
NEEDS_MOTO = ("tests/infra/test_monitoring.py::test_the_matcher_answers_as_motos_does",)
LOG_DIR = os.path.join(REPO, "build")
# Each process's per-test CPU seconds (tests/cpu_time.py), and the run's summary built from them,
# which scripts/test_cost_table.py renders into docs/testing.md.
CPU_DIR = os.path.join(LOG_DIR, "test-cpu")
SUMMARY = os.path.join(CPU_DIR, "summary.json")
# How many of the most expensive tests the summary lists.
MOST_EXPENSIVE = 20


def main(extra) -> int:
    os.makedirs(LOG_DIR, exist_ok=True)
    os.makedirs(CPU_DIR, exist_ok=True)
    for old in os.listdir(CPU_DIR):
        os.remove(os.path.join(CPU_DIR, old))
    started = time.time()
    beside = []
    for path, python in BESIDE:
        paths = path.split()
        log = os.path.join(LOG_DIR, "test-" + "+".join(
            os.path.basename(p).removesuffix(".py") for p in paths) + ".log")
        env = dict(os.environ, **_cpu_file(log))
        if python != sys.executable:
            env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
            env.pop("VIRTUAL_ENV", None)
        with open(log, "w", encoding="utf-8") as out:
            # No cache plugin: several processes writing .pytest_cache at once would race.
            process = subprocess.Popen(
                [python, "-m", "pytest", "-p", "no:cacheprovider", *paths, *extra],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        beside.append((path, log, process))
        print(f"{path} running beside the other tests (log: {os.path.relpath(log, REPO)})",
              flush=True)
    ignored = [f"--ignore={p}" for path, _ in BESIDE for p in path.split()]
    statuses, spent = {}, {}
    for name, log, command in (
            ("the other tests", "test-other.log",
             [sys.executable, "-m", "pytest", *ignored, *extra]),
            # Apart: a node id under an --ignore'd folder is not collected beside its parent folder.
            ("infra tests that need moto", "test-infra-moto.log",
             [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra, *NEEDS_MOTO])):
        statuses[name], spent[name] = _waited(subprocess.Popen(
            command, cwd=REPO, env=dict(os.environ, **_cpu_file(log))))
    for path, log, process in beside:
        statuses[path], spent[path] = _waited(process)
        print(f"\n=== {path} ===", flush=True)
        with open(log, encoding="utf-8") as f:
            sys.stdout.write(f.read())
    wall = time.time() - started
    print(f"\nall tests: {wall:.0f} s; exit status "
          + ", ".join(f"{name} {status}" for name, status in statuses.items()))
    # The budget is the machine's cores: CPU seconds say what each process costs, whatever
    # else shared the machine.
    print("CPU seconds (user + system, children included): "
          + ", ".join(f"{name} {cpu:.0f}" for name, cpu in spent.items())
          + f"; {sum(spent.values()):.0f} in all")
    _summarize(wall, spent, statuses)
    return 0 if not any(statuses.values()) else 1


def _cpu_file(log: str) -> dict:
    """The environment that makes a pytest process write its per-test CPU (tests/cpu_time.py)."""
    from tests.cpu_time import CPU_FILE_VARIABLE

    name = os.path.basename(log).removesuffix(".log")
    return {CPU_FILE_VARIABLE: os.path.join(CPU_DIR, name + ".json")}


def _summarize(wall: float, spent: dict, statuses: dict) -> None:
    """Prints the MOST_EXPENSIVE tests of the whole run by CPU seconds, and writes SUMMARY."""
    tests = {}
    for name in sorted(os.listdir(CPU_DIR)):
        if name.endswith(".json") and name != os.path.basename(SUMMARY):
            with open(os.path.join(CPU_DIR, name), encoding="utf-8") as f:
                tests.update(json.load(f)["tests"])
    ranked = sorted(tests.items(), key=lambda kv: -kv[1])[:MOST_EXPENSIVE]
    print(f"the {len(ranked)} most expensive tests (CPU seconds, set-up and its module "
          "fixtures' runs included):")
    for nodeid, seconds in ranked:
        print(f"{seconds:8.1f}  {nodeid}")
    with open(SUMMARY, "w", encoding="utf-8") as f:
        json.dump({"wall_s": round(wall),
                   "cpu_s_by_process": {k: round(v) for k, v in spent.items()},
                   "cpu_s": round(sum(spent.values())), "passed": not any(statuses.values()),
                   "most_expensive": [[nodeid, round(s, 1)] for nodeid, s in ranked],
                   "tests": len(tests), "date": time.strftime("%Y-%m-%d")}, f, indent=1)


def _waited(process):
    """(exit status, CPU seconds of the process and everything it waited for)."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
