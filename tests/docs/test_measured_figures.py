"""Figures the docs quote from a benchmark's run outside docs/benchmarks.md are that run's: each
quoted table is compared with the JSON files the script wrote (committed beside it)."""

import json
import re
from tests.paths import REPO

DIAGNOSIS = REPO / "benchmarks" / "diagnosis" / "tf2.21-strategies"


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
