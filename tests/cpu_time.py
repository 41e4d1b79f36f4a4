"""The CPU time of each test's set-up, call and tear-down, its child processes included, and the
ten largest at the end of the run: make test's budget is the machine's two cores, so what a test
costs is its CPU seconds, which stay comparable when other processes share the machine (its wall
time does not). Children count once they are waited for, as subprocess.run and Popen.wait do.

With MASKRCNN_TEST_CPU_FILE set (scripts/run_tests.py sets it for each of its processes), every
figure is also written there as JSON, from which run_tests.py prints the most expensive tests of
the whole run and scripts/test_cost_table.py renders docs/testing.md's table."""

import json
import os
import resource

import pytest

_SHOWN = 10
# Where this process's figures go (one file per pytest process), when set.
CPU_FILE_VARIABLE = "MASKRCNN_TEST_CPU_FILE"
_spent = {}
_waited_elsewhere = [0.0]


def add_waited(seconds: float) -> None:
    """Count the CPU of a process another process waited for (a command forked by
    tests/launcher/cli.py's zygote) as this process's: it ran for the test now running."""
    _waited_elsewhere[0] += seconds


def _cpu_seconds() -> float:
    total = _waited_elsewhere[0]
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def _measured(item, phase):
    before = _cpu_seconds()
    yield
    _spent[(item.nodeid, phase)] = _cpu_seconds() - before


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _measured(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _measured(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _measured(item, "teardown")


def by_test(spent: dict) -> dict:
    """{node id: CPU seconds of its set-up, call and tear-down together} (a module fixture's run
    counts for the test whose set-up started it)."""
    totals = {}
    for (nodeid, _), seconds in spent.items():
        totals[nodeid] = totals.get(nodeid, 0.0) + seconds
    return totals


def pytest_terminal_summary(terminalreporter):
    if not _spent:
        return
    path = os.environ.get(CPU_FILE_VARIABLE)
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"tests": by_test(_spent), "in_all": sum(_spent.values())}, f, indent=1)
    terminalreporter.write_sep("=", f"largest {_SHOWN} CPU times (children included)")
    for (nodeid, phase), seconds in sorted(_spent.items(), key=lambda kv: -kv[1])[:_SHOWN]:
        terminalreporter.write_line(f"{seconds:8.1f}s cpu {phase:<8} {nodeid}")
    by_file = {}
    for (nodeid, _), seconds in _spent.items():
        path = nodeid.split("::")[0]
        by_file[path] = by_file.get(path, 0.0) + seconds
    terminalreporter.write_sep("-", "by file")
    for path, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:_SHOWN]:
        terminalreporter.write_line(f"{seconds:8.1f}s cpu {path}")
    terminalreporter.write_line(f"{sum(_spent.values()):8.1f}s cpu in all")
