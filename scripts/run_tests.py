"""`make test` and `make check`: the tests under tests/ as pytest processes side by side, beside
the code checks (scripts/check_code.sh: ruff and mypy).

make test: every test. The job's end-to-end tests (tests/training/test_job.py, test_strategies.py,
and the module runs of test_fine_tune.py and test_batch_norm.py) start real multi-process runs,
which keep only ~1.1 of the 2 cores of this machine busy on average (single-threaded imports and
graph tracing, the training toolkit's own waits). test_job.py and test_strategies.py each run in
a pytest process of their own, test_fine_tune.py and test_batch_norm.py together in a third,
beside one for tests/launcher (a moto server per process on a port of its own) and one for
everything else, whose output is shown as it comes. tests/infra runs in a sixth, as the CDK
pipeline's Synth step runs it (stacks/pipeline_stack.py): `python -m pytest -q tests/infra` with
the Python of .venv-infra, made from requirements-infra.txt alone, first on PATH (the CDK CLI's
`python3 app.py` is that one too); the one infra test that needs moto, which that environment
lacks, runs here after the others' foreground process.

make check (--check): the tests not marked end_to_end (no training run, no played training
job), in five processes: tests/launcher, tests/infra (.venv-infra), tests/training's modules in
two (test_[a-l]*, test_[m-z]*) and the rest.

The logs are printed at the end (and kept under build/), then each process's CPU seconds and the
MOST_EXPENSIVE tests of the run. The exit status is non-zero when any process fails. Plain
`pytest` runs the same tests in one process.

    python scripts/run_tests.py [--check] [PYTEST_ARGS...]   (passed to each pytest process)
"""

import glob
import json
import os
import re
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
# make check's, apart: the last make test's figures stay for the docs.
CHECK_CPU_DIR = os.path.join(LOG_DIR, "check-cpu")
# How many of the most expensive tests the summary lists.
MOST_EXPENSIVE = 20


# make check: the tests that start no training run (pytest's marker expression), beside the code
# checks; tests/launcher and tests/infra in a process each, tests/training's in two, split by
# module name at about half their CPU seconds: in one process with the rest they ran on alone
# for a minute after the others had ended (242 s; 193 s split, 2026-12-07; tests/launcher split
# too: 193 s again, the machine's two cores then the limit).
QUICK = "not end_to_end"
CHECK_BESIDE = (("tests/launcher", sys.executable),
                ("tests/infra", os.path.join(INFRA_BIN, "python")),
                ("tests/training/test_[a-l]*.py", sys.executable),
                ("tests/training/test_[m-z]*.py", sys.executable))
CODE_CHECKS = ("bash", os.path.join(REPO, "scripts", "check_code.sh"))


def main(argv) -> int:
    quick = "--check" in argv
    extra = [a for a in argv if a != "--check"]
    if quick:
        extra = ["-m", QUICK, *extra]
    cpu_dir = CHECK_CPU_DIR if quick else CPU_DIR
    os.makedirs(LOG_DIR, exist_ok=True)
    os.makedirs(cpu_dir, exist_ok=True)
    for old in os.listdir(cpu_dir):
        os.remove(os.path.join(cpu_dir, old))
    started = time.time()
    beside = []
    groups = CHECK_BESIDE if quick else BESIDE
    for path, python in groups:
        paths = _expanded(path.split())
        log = os.path.join(LOG_DIR, "test-" + "+".join(
            re.sub(r"[\[\]*]", "", os.path.basename(p).removesuffix(".py"))
            for p in path.split()) + ".log")
        env = dict(os.environ, **_cpu_file(cpu_dir, log))
        if python != sys.executable:
            env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
            env.pop("VIRTUAL_ENV", None)
        # No cache plugin: several processes writing .pytest_cache at once would race.
        beside.append((path, log, _started(
            [python, "-m", "pytest", "-p", "no:cacheprovider", *paths, *extra], log, env)))
        print(f"{path} running beside the other tests (log: {os.path.relpath(log, REPO)})",
              flush=True)
    code_log = os.path.join(LOG_DIR, "check-code.log")
    beside.append(("code checks (ruff, mypy)", code_log,
                   _started(list(CODE_CHECKS), code_log, dict(os.environ))))
    ignored = [f"--ignore-glob={p}" if "*" in p else f"--ignore={p}"
               for path, _ in groups for p in path.split()]
    statuses, spent = {}, {}
    runs = [("the other tests", "test-other.log",
             [sys.executable, "-m", "pytest", *ignored, *extra])]
    if not quick:
        # Apart: a node id under an --ignore'd folder is not collected beside its parent folder.
        runs.append(("infra tests that need moto", "test-infra-moto.log",
                     [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra,
                      *NEEDS_MOTO]))
    for name, log, command in runs:
        statuses[name], spent[name] = _waited(subprocess.Popen(
            command, cwd=REPO, env=dict(os.environ, **_cpu_file(cpu_dir, log))))
    for path, log, process in beside:
        statuses[path], spent[path] = _waited(process)
        print(f"\n=== {path} ===", flush=True)
        with open(log, encoding="utf-8") as f:
            sys.stdout.write(f.read())
    wall = time.time() - started
    print(f"\n{'make check' if quick else 'all tests'}: {wall:.0f} s; exit status "
          + ", ".join(f"{name} {status}" for name, status in statuses.items()))
    # The budget is the machine's two cores: CPU seconds say what each process costs, whatever
    # else shared the machine.
    print("CPU seconds (user + system, children included): "
          + ", ".join(f"{name} {cpu:.0f}" for name, cpu in spent.items())
          + f"; {sum(spent.values()):.0f} in all")
    _summarize(cpu_dir, wall, spent, statuses, quick)
    return 0 if not any(statuses.values()) else 1


def _expanded(paths: list) -> list:
    """The paths, each pattern replaced by the files it matches (pytest takes no patterns)."""
    return [match for p in paths
            for match in (sorted(os.path.relpath(m, REPO) for m in glob.glob(os.path.join(REPO, p)))
                          if "*" in p else [p])]


def _started(command: list, log: str, env: dict) -> subprocess.Popen:
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)


def _cpu_file(cpu_dir: str, log: str) -> dict:
    """The environment that makes a pytest process write its per-test CPU (tests/cpu_time.py)."""
    from tests.cpu_time import CPU_FILE_VARIABLE

    name = os.path.basename(log).removesuffix(".log")
    return {CPU_FILE_VARIABLE: os.path.join(cpu_dir, name + ".json")}


def _summarize(cpu_dir: str, wall: float, spent: dict, statuses: dict, quick: bool) -> None:
    """Prints the MOST_EXPENSIVE tests of the whole run by CPU seconds, and writes its summary
    (make test's: SUMMARY)."""
    tests = {}
    summary = os.path.join(cpu_dir, os.path.basename(SUMMARY))
    for name in sorted(os.listdir(cpu_dir)):
        if name.endswith(".json") and name != os.path.basename(SUMMARY):
            with open(os.path.join(cpu_dir, name), encoding="utf-8") as f:
                tests.update(json.load(f)["tests"])
    ranked = sorted(tests.items(), key=lambda kv: -kv[1])[:MOST_EXPENSIVE]
    print(f"the {len(ranked)} most expensive tests (CPU seconds, set-up and its module "
          "fixtures' runs included):")
    for nodeid, seconds in ranked:
        print(f"{seconds:8.1f}  {nodeid}")
    with open(summary, "w", encoding="utf-8") as f:
        json.dump({"command": "make check" if quick else "make test", "wall_s": round(wall),
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
