"""What the end-to-end tests' learning bounds tell apart: the module runs' settings trained at the
tests' learning rate and at rates 10 and 100 times too low, under each distribution, and how far
their total loss and the RPN's objectness loss fall.

    .venv/bin/python benchmarks/learning_bounds.py [--distributions horovod,...] [--healthy 2]
        [--work-dir build/bench/learning] [--out tests/training/learning_bounds.json]

Every run is `python -m maskrcnn_local.local_run --hosts 2` (root: the emulated hosts, the real
SageMaker toolkit) with tests/training/job_runs.py's TINY settings and the module runs' steps
(Horovod 20, MultiWorkerMirroredStrategy 20, parameter servers 40), one process a host as the
played requests run; the drops are from the first logged window's mean to the last's, read
from the metric lines. Writes --out (kept in the repository: tests/training/learning.py's bounds
are held to it by tests/training/test_learning_bounds.py) and rewrites docs/testing.md's table
between its markers. Figures only: nothing is asserted here.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import results

sys.path.insert(0, results.REPO)
from tests.training.job_runs import TINY  # noqa: E402  (the tests' settings, defined once)

STEPS = {"horovod": 20, "multi_worker_mirrored": 20, "parameter_server": 40}
# The tests' rate (TINY's) and the breaks the bounds must tell apart from it.
RATES = {"healthy": 0.01, "10x too low": 0.001, "100x too low": 0.0001}
MEASURED = ("loss", "rpn_score_loss")
DOC = os.path.join(results.REPO, "docs", "testing.md")
DOC_START = "<!-- learning-bounds: benchmarks/learning_bounds.py writes this table -->"
DOC_END = "<!-- end of learning-bounds -->"


def _drops(output: str) -> dict:
    drops = {}
    for name in MEASURED:
        values = [float(v) for v in re.findall(rf"train/{name}: (\S+)$", output, re.M)]
        if len(values) < 2:
            raise RuntimeError(f"fewer than 2 logged train/{name} values:\n{output[-3000:]}")
        drops[name] = round(1 - values[-1] / values[0], 4)
    return drops


def _run(work_dir: str, distribution: str, rate: float) -> dict:
    command = [sys.executable, "-m", "maskrcnn_local.local_run", "--work-dir", work_dir,
               "--distribution", distribution, "--hosts", "2", "--draw", "0", *TINY,
               "--hp", f"max_steps={STEPS[distribution]}", "--hp", f"base_learning_rate={rate}",
               "--timeout", "1500"]
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1600, cwd=results.REPO,
                          stdin=subprocess.DEVNULL)
    log = os.path.join(work_dir, "local_run.log")
    with open(log, "w", encoding="utf-8") as f:
        f.write(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}); log {log}")
    return {"rate": rate, "seconds": round(time.time() - started), **_drops(done.stdout)}


def table(measured: dict) -> list:
    """docs/testing.md's table of the measurement (markdown lines)."""
    lines = ["| distribution | run | rate | loss drop | rpn_score_loss drop |",
             "|---|---|---|---|---|"]
    for distribution, runs in measured["runs"].items():
        for label, run in runs:
            lines.append(f"| {distribution} | {label} | {run['rate']:g} | {run['loss']:.1%} | "
                         f"{run['rpn_score_loss']:.1%} |")
    return lines


def write_doc(measured: dict, path: str = DOC) -> None:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start, end = text.index(DOC_START) + len(DOC_START), text.index(DOC_END)
    block = (f"\n\nMeasured {measured['date']} on {measured['machine']} "
             f"(`{measured['command']}`):\n\n" + "\n".join(table(measured)) + "\n\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[:start] + block + text[end:])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--distributions", default=",".join(STEPS))
    parser.add_argument("--healthy", type=int, default=2, help="runs at the tests' rate (2)")
    parser.add_argument("--work-dir", default=os.path.join("build", "bench", "learning"))
    parser.add_argument("--out", default=os.path.join("tests", "training",
                                                      "learning_bounds.json"))
    args = parser.parse_args(argv)
    distributions = [d for d in args.distributions.split(",") if d]
    unknown = set(distributions) - set(STEPS)
    if unknown:
        parser.error(f"--distributions: unknown {sorted(unknown)}; known {list(STEPS)}")
    if os.geteuid() != 0:
        parser.error("root only: the runs use emulated hosts (network and mount namespaces)")
    measured: dict = {"date": time.strftime("%Y-%m-%d", time.gmtime()),
                      "machine": results.machine(), "command": results.command(),
                      "steps": STEPS, "runs": {}}
    for distribution in distributions:
        runs = []
        for label, rate in RATES.items():
            for repeat in range(args.healthy if label == "healthy" else 1):
                name = f"{distribution}-{label.replace(' ', '-')}-{repeat + 1}"
                print(f"{name}: ...", flush=True)
                run = _run(os.path.join(args.work_dir, name), distribution, rate)
                print(f"{name}: {run}", flush=True)
                runs.append((label, run))
        measured["runs"][distribution] = runs
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(measured, f, indent=1)
        f.write("\n")
    write_doc(measured)
    print("\n".join(table(measured)))
    print(f"\nfigures: {args.out}; table: {DOC}")


if __name__ == "__main__":
    main()
