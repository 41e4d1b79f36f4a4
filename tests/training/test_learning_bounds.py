"""The learning bounds the end-to-end runs assert (tests/training/learning.py) against the runs
they were set from (tests/training/learning_bounds.json, written by benchmarks/learning_bounds.py
with docs/testing.md's table): each bound lies below every run at the tests' learning rate and
above every run of each break it must fail, and the page shows exactly those figures."""

import json
import sys

from tests.paths import REPO
from tests.training.learning import FAILS, MIN_LOSS_DROP, MIN_RPN_SCORE_LOSS_DROP

MEASURED = REPO / "tests" / "training" / "learning_bounds.json"
BOUNDS = {"loss": MIN_LOSS_DROP, "rpn_score_loss": MIN_RPN_SCORE_LOSS_DROP}


def _measured() -> dict:
    return json.loads(MEASURED.read_text(encoding="utf-8"))


def test_each_bound_lies_between_the_healthy_runs_and_the_breaks_it_must_fail():
    measured = _measured()
    assert set(measured["runs"]) == set(MIN_LOSS_DROP) == set(MIN_RPN_SCORE_LOSS_DROP)
    for distribution, runs in measured["runs"].items():
        healthy = [run for label, run in runs if label == "healthy"]
        assert len(healthy) >= 2, f"{distribution}: one healthy run says nothing of the spread"
        for metric, bounds in BOUNDS.items():
            bound = bounds[distribution]
            lowest = min(run[metric] for run in healthy)
            assert bound < lowest, f"{distribution}: {metric} bound {bound} not below the " \
                                   f"healthy runs' {lowest}"
            for label in FAILS[metric]:
                broken = [run[metric] for name, run in runs if name == label]
                assert broken, f"{distribution}: no {label} run measured"
                assert bound > max(broken), f"{distribution}: {metric} bound {bound} lets " \
                                            f"the {label} run pass ({max(broken)})"


def test_testing_md_shows_the_measurement():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import learning_bounds

    page = (REPO / "docs" / "testing.md").read_text(encoding="utf-8")
    assert "\n".join(learning_bounds.table(_measured())) in page
