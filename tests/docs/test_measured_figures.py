"""Figures the docs quote from a benchmark's run outside docs/benchmarks.md are that run's: each
quoted table is compared with the JSON files the script wrote (committed beside it)."""

import json
import re
from tests.paths import REPO

DIAGNOSIS = REPO / "benchmarks" / "diagnosis" / "tf2.21-strategies"
DEMO_SETTINGS = REPO / "benchmarks" / "diagnosis" / "demo-settings"


def _rows(markdown: str, first_header: str) -> dict:
    """{first cell: [cells...]} of the Markdown table whose header starts with first_header."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.strip().startswith(f"| {first_header} |"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.strip().startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_image_mds_page_fault_table_is_the_diagnosis_runs():
    """docs/image.md, "The move, measured": each run's minor page faults (millions, 2 decimals)
    and kernel CPU seconds (1 decimal) on TF 2.18 and 2.21, as cpu_scaling.py recorded them."""
    text = (REPO / "docs" / "image.md").read_text(encoding="utf-8")
    section = text.split("## The move, measured", 1)[1]
    rows = _rows(section, "run")
    runs = {version: json.loads((DIAGNOSIS / version / "cpu_scaling.json").read_text())["timing"]
            for version in ("tf2.18", "tf2.21")}
    assert set(rows) == set(runs["tf2.18"]) == set(runs["tf2.21"])
    for name, cells in rows.items():
        expected = [f"{runs[v][name]['minor_faults'] / 1e6:.2f} M" for v in ("tf2.18", "tf2.21")]
        expected += [f"{runs[v][name]['cpu_sys_s']:.1f} s" for v in ("tf2.18", "tf2.21")]
        assert cells == expected, name
    bfc = json.loads((DIAGNOSIS / "tf2.21-bfc" / "cpu_scaling.json").read_text())["timing"]
    quoted = re.search(r"takes the faults to (\S+) M and (\S+) M\s+and the kernel time to (\S+) s "
                       r"and (\S+) s", section)
    assert quoted, "the BFC sentence moved: update this test"
    assert list(quoted.groups()) == [
        f"{bfc['mwms-1x1']['minor_faults'] / 1e6:.2f}", f"{bfc['ps-1x1']['minor_faults'] / 1e6:.2f}",
        f"{bfc['mwms-1x1']['cpu_sys_s']:.1f}", f"{bfc['ps-1x1']['cpu_sys_s']:.1f}"]


def test_the_demo_settings_table_is_the_runs_output():
    """docs/local-runs.md, "The demo's settings": each row's training images, steps, epochs, last
    mask and box AP (3 decimals) and wall minutes (1 decimal; "–" where the run kept none), as the
    run's own output recorded them."""
    text = (REPO / "docs" / "local-runs.md").read_text(encoding="utf-8")
    rows = _rows(text.split("### The demo's settings", 1)[1], "run")
    assert set(rows) == {p.stem for p in DEMO_SETTINGS.glob("*.json")}
    for name, cells in rows.items():
        run = json.loads((DEMO_SETTINGS / f"{name}.json").read_text())
        steps = int(re.search(r"training steps 1\.\.(\d+)", run["training"]).group(1))
        epochs = re.search(r"epochs=([\d.]+)", run["hyperparameters"]).group(1)
        batch_norm = re.search(r"batch_norm='(\w+)'", run["hyperparameters"]).group(1)
        last = run["last_evaluation"]
        minutes = "–" if run["elapsed_s"] is None else f"{run['elapsed_s'] / 60:.1f}"
        assert cells == [f"`{batch_norm}`", str(run["train_images"]),
                         f"{steps} ({float(epochs):g})", f"{last['eval/segm_AP']:.3f}",
                         f"{last['eval/bbox_AP']:.3f}", minutes], name


def test_the_local_batch_norm_step_times_are_the_timing_runs():
    """docs/batch-norm.md, "Local runs": the demo's step (2 decimals) under sync at each cycle and
    under per_rank, as cpu_scaling.py recorded it."""
    text = (REPO / "docs" / "batch-norm.md").read_text(encoding="utf-8")
    section = " ".join(text.split("## Local runs", 1)[1].split())
    quoted = re.search(r"(\S+) s with `sync` at the 10 ms cycle, (\S+) s at 5 ms, (\S+) s at 2 ms; "
                       r"(\S+) s with `per_rank`", section)
    assert quoted, "the step-time sentence moved: update this test"
    steps = [json.loads((DEMO_SETTINGS / run / "cpu_scaling.json").read_text())
             ["timing"]["horovod-2x1"]["step_s"]
             for run in ("step-sync", "step-sync-c5", "step-sync-c2", "step-perrank")]
    assert list(quoted.groups()) == [f"{s:.2f}" for s in steps]


def test_the_demos_five_runs_are_demo_accuracys():
    """docs/local-runs.md, "The demo's settings": the spread of the demo's repeated runs (3
    decimals) and their least and greatest wall minutes (1 decimal), as demo_accuracy.py wrote
    them, of runs with the demo's settings (no smoke run, no extra arguments)."""
    text = " ".join((REPO / "docs" / "local-runs.md").read_text(encoding="utf-8").split())
    figures = json.loads((DEMO_SETTINGS / "demo-accuracy" / "demo_accuracy.json").read_text())
    assert not figures["smoke"]
    quoted = re.search(r"Five runs of these settings .*?: mask AP mean (\S+), standard deviation "
                       r"(\S+), from (\S+) to (\S+); box AP mean (\S+); each run (\S+) to (\S+) "
                       r"min", text)
    assert quoted, "the five runs' sentence moved: update this test"
    spread, runs = figures["spread"], figures["runs"]
    minutes = [run["local_run_seconds"] / 60 for run in runs]
    assert len(runs) == 5
    mask = spread["eval/segm_AP"]
    assert list(quoted.groups()) == [
        f"{mask['mean']:.3f}", f"{mask['stdev']:.3f}", f"{mask['min']:.3f}", f"{mask['max']:.3f}",
        f"{spread['eval/bbox_AP']['mean']:.3f}", f"{min(minutes):.1f}", f"{max(minutes):.1f}"]
