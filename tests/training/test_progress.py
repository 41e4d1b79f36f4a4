"""The progress line and metric lines of the training loop, on a stand-in backend (no Horovod):
on stdout, where SageMaker's regexes read them, unless a local run names a metrics file."""

import types

import numpy as np
import pytest

from maskrcnn_contract import hyperparameters, metrics

from maskrcnn_job.training import tracking, trainer
from maskrcnn_job.training.schedule import Schedule


class _OneRank:
    size, is_chief = 2, True

    @staticmethod
    def mean(value):
        return value


def _trainer_at(step, total):
    t = trainer.Trainer.__new__(trainer.Trainer)  # the loop's state only, no model
    t.backend = _OneRank()
    t.schedule = Schedule.build(hyperparameters.parse({"images_per_gpu": "2", "max_steps": total,
                                                          "lr_decay_epochs": ""}),
                                num_train_images=40, num_replicas=2)
    t.learning_rate = lambda s: 0.01
    t.summary_writer = None
    t.tracker = tracking.Tracker.off()  # no MLflow run: the launch named none
    t.optimizer = types.SimpleNamespace(iterations=types.SimpleNamespace(numpy=lambda: step))
    return t


WINDOW = [{name: np.float32(1.5) for name in trainer.LOSS_NAMES}]


@pytest.fixture(autouse=True)
def _as_on_sagemaker(monkeypatch):
    monkeypatch.delenv(metrics.METRICS_FILE_ENV, raising=False)


def test_first_step_logged_has_no_throughput_instead_of_dividing_by_zero(capsys):
    _trainer_at(step=1, total=1)._log_progress(WINDOW, timed_steps=0, seconds=0.0)
    out = capsys.readouterr().out
    assert "step 1/1" in out and "img/s n/a ETA n/a" in out
    assert "train/loss: 1.5" in out and "train/images_per_sec" not in out


def test_throughput_and_eta_from_timed_steps(capsys):
    _trainer_at(step=20, total=120)._log_progress(WINDOW, timed_steps=10, seconds=10.0)
    out = capsys.readouterr().out
    # 10 steps x 2 images x 2 ranks in 10 s = 4 img/s; 100 steps x 4 images left = 100 s.
    assert "4.0 img/s ETA 1m40s" in out and "train/images_per_sec: 4" in out


def test_a_local_run_sees_one_progress_line_and_its_metric_lines_go_to_the_file(
        capsys, monkeypatch, tmp_path):
    metrics_file = tmp_path / "metrics.txt"
    monkeypatch.setenv(metrics.METRICS_FILE_ENV, str(metrics_file))
    for step in (10, 20):
        _trainer_at(step=step, total=120)._log_progress(WINDOW, timed_steps=10, seconds=10.0)
    out = capsys.readouterr().out
    assert out.splitlines() == ["step 10/120 epoch 1.00 loss 1.5000 lr 0.01000 4.0 img/s ETA 1m50s",
                                "step 20/120 epoch 2.00 loss 1.5000 lr 0.01000 4.0 img/s ETA 1m40s"]
    text = metrics_file.read_text()
    assert text.count("train/loss: 1.5\n") == 2  # appended, one line per metric and log step
    assert metrics.last_values(text)["train/step"] == 20
