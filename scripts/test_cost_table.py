"""docs/testing.md's table of what the last `make test` cost: its wall time, each process's CPU
seconds and its most expensive tests, from the summary scripts/run_tests.py wrote
(build/test-cpu/summary.json), set between the page's markers.

    .venv/bin/python scripts/test_cost_table.py [--summary build/test-cpu/summary.json]
        [--doc docs/testing.md] [--machine "..."]
"""

import argparse
import json
import os
import platform
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from scripts.run_tests import SUMMARY  # noqa: E402  (where run_tests.py writes it, defined once)

DOC = os.path.join(REPO, "docs", "testing.md")
START = "<!-- test-cost: scripts/test_cost_table.py writes this table -->"
END = "<!-- end of test-cost -->"


def _machine() -> str:
    cpu = "unknown CPU"
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def table(summary: dict, machine: str) -> list:
    """The page's lines for one run's summary."""
    lines = [f"The last full run, {summary['date']}, on {machine}: "
             f"{'all passed' if summary['passed'] else 'NOT all passed'}, {summary['tests']} "
             f"tests, {summary['wall_s']} s wall, {summary['cpu_s']} CPU seconds "
             "(user + system, children included).", "",
             "| process | CPU s |", "|---|---|"]
    lines += [f"| {name} | {seconds} |" for name, seconds in summary["cpu_s_by_process"].items()]
    lines += ["", f"Its {len(summary['most_expensive'])} most expensive tests (CPU seconds of the "
              "set-up, call and tear-down; a module's shared run counts for the test that "
              "started it):", "", "| CPU s | test |", "|---|---|"]
    lines += [f"| {seconds} | `{nodeid}` |" for nodeid, seconds in summary["most_expensive"]]
    return lines


def write(summary: dict, machine: str, path: str = DOC) -> None:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if START not in text or END not in text:
        raise SystemExit(f"{path}: no markers {START!r} ... {END!r}")
    start, end = text.index(START) + len(START), text.index(END)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[:start] + "\n\n" + "\n".join(table(summary, machine)) + "\n\n" + text[end:])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--summary", default=SUMMARY)
    parser.add_argument("--doc", default=DOC)
    parser.add_argument("--machine", default=None, help="what ran it (this machine's CPU)")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.summary):
        parser.error(f"--summary {args.summary!r} does not exist: run `make test` first")
    with open(args.summary, encoding="utf-8") as f:
        summary = json.load(f)
    write(summary, args.machine or _machine(), args.doc)
    print(f"{args.doc}: the cost of the run of {summary['date']} ({summary['wall_s']} s wall, "
          f"{summary['cpu_s']} CPU s)")


if __name__ == "__main__":
    main()
