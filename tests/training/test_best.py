"""The best evaluation by the objective and the early-stopping decision (training/best.py, and the
trainer's use of it: Trainer._track_best), without a model: pure bookkeeping, fast."""

import types

import pytest

from maskrcnn_contract import metrics

from maskrcnn_job.training import best as best_evaluation


def _evaluate(best, evaluations):
    return [best.update(step, value) for step, value in evaluations]


def test_the_best_is_the_first_evaluation_better_by_more_than_min_delta():
    ap = best_evaluation.Best("eval/segm_AP", min_delta=0.01)
    assert _evaluate(ap, [(2, 0.10), (4, 0.105), (6, 0.12), (8, 0.12), (10, 0.11)]) == [
        True, False, True, False, False]
    assert (ap.step, ap.value, ap.not_improved) == (6, 0.12, [8, 10])
    # A loss is better lower: the direction is the contract's (metrics.objective_direction).
    loss = best_evaluation.Best("eval/loss")
    assert _evaluate(loss, [(2, 1.5), (4, 1.2), (6, 1.2), (8, 1.3)]) == [True, True, False, False]
    assert (loss.step, loss.evaluations_since) == (4, 2)


def test_patience_stops_after_that_many_evaluations_without_improvement_and_zero_never():
    best = best_evaluation.Best("eval/bbox_AP")
    _evaluate(best, [(1, 0.2), (2, 0.1)])
    assert not best.should_stop(2) and not best.should_stop(0)
    best.update(3, 0.15)
    assert best.should_stop(2) and not best.should_stop(3) and not best.should_stop(0)
    best.update(4, 0.3)  # an improvement starts the count over
    assert not best.should_stop(1)


def test_a_resumed_job_reads_the_best_and_forgets_the_evaluations_it_makes_again(tmp_path):
    """best.json beside the best checkpoint: a job resumed from the rolling checkpoint of step
    20 remembers the best (step 10) and the evaluations without improvement up to step 20, not
    the one after it (25), which it makes again."""
    best = best_evaluation.Best("eval/segm_AP", min_delta=0.0)
    _evaluate(best, [(5, 0.1), (10, 0.3), (15, 0.2), (20, 0.25), (25, 0.1)])
    best_evaluation.write(str(tmp_path), best)
    assert (tmp_path / best_evaluation.BEST_DIR / best_evaluation.STATE_FILE).is_file()
    again, why_not = best_evaluation.read(str(tmp_path), "eval/segm_AP", 0.0)
    assert why_not is None and (again.step, again.value, again.not_improved) == (
        10, 0.3, [15, 20, 25])
    again.forget_after(20)
    assert again.evaluations_since == 2
    # Another objective: the earlier best is not this job's best, and the job says so.
    other, why_not = best_evaluation.read(str(tmp_path), "eval/loss", 0.0)
    assert other.step is None and other.metric == "eval/loss"
    assert why_not.startswith(f"the best checkpoint in {tmp_path / 'best'} (step 10) was chosen "
                              "by eval/segm_AP, and this job's objective_metric is eval/loss")
    # No earlier job: nothing to say.
    assert best_evaluation.read(str(tmp_path / "none"), "eval/segm_AP", 0.0) == (
        best_evaluation.Best("eval/segm_AP"), None)


def _trainer_state(patience, total_steps=10, metric="eval/segm_AP"):
    return types.SimpleNamespace(best=best_evaluation.Best(metric), patience=patience,
                                 schedule=types.SimpleNamespace(total_steps=total_steps), step=0)


def test_the_trainer_stops_on_a_plateau_before_the_last_step_and_says_why():
    from maskrcnn_job.training.trainer import Trainer

    state = _trainer_state(patience=2)
    track = Trainer._track_best  # pylint: disable=protected-access
    decisions, best_so_far = [], []
    for step, ap in ((2, 0.1), (4, 0.3), (6, 0.3), (8, 0.29)):
        state.step = step
        values = {"eval/segm_AP": ap}
        decisions.append(track(state, values))
        best_so_far.append(values[metrics.BEST_OBJECTIVE])
    assert best_so_far == [0.1, 0.3, 0.3, 0.3]
    assert [improved for improved, _ in decisions] == [True, True, False, False]
    assert [stop is not None for _, stop in decisions] == [False, False, False, True]
    assert decisions[-1][1] == (
        "early stopping at step 8: eval/segm_AP has not improved on step 4 (eval/segm_AP "
        "0.3000) for 2 evaluations (early_stopping_patience=2, early_stopping_min_delta=0)")
    # The last step's evaluation ends the run anyway: no stop is decided there, and none
    # without patience.
    state.step = 10
    assert track(state, {"eval/segm_AP": 0.1})[1] is None
    state = _trainer_state(patience=0)
    for step in (2, 4, 6, 8):
        state.step = step
        assert track(state, {"eval/segm_AP": 0.0}) == (step == 2, None)


def test_an_evaluation_without_the_objective_counts_as_not_improving(caplog):
    """eval/*_worst_class comes from the report, which may fail (it is logged and skipped)."""
    from maskrcnn_job.training.trainer import Trainer

    track = Trainer._track_best  # pylint: disable=protected-access
    state = _trainer_state(patience=1, metric="eval/segm_AP_worst_class")
    state.step = 2
    assert track(state, {"eval/segm_AP_worst_class": 0.2})[0]
    state.step = 4
    improved, stop = track(state, {"eval/segm_AP": 0.3})
    assert not improved and stop.startswith("early stopping at step 4")
    assert "evaluation at step 4 has no eval/segm_AP_worst_class (objective_metric): counted " \
           "as not improving" in caplog.text


@pytest.mark.parametrize("name", ["train/loss", "eval/bbox_ARmax1"])
def test_a_best_of_a_figure_that_is_no_objective_raises(name):
    with pytest.raises(KeyError, match="is not an evaluation metric line"):
        best_evaluation.Best(name)
