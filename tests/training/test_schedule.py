"""The schedule's refusals and warnings about the run's length (pure Python, no TensorFlow): a
warmup past the end of a run of `epochs` and an evaluation period under one step stop the job at
start instead of being replaced; a warmup cut by max_steps is logged as a warning with the value
used. (The rule is the contract's; tests/contract/test_one_definition.py shows the launcher
applies the same one.)"""

import logging

import pytest

from maskrcnn_contract import hyperparameters
from maskrcnn_contract.hyperparameters import HyperparameterError

from maskrcnn_job.training.schedule import Schedule


def test_a_warmup_longer_than_the_run_stops_the_job_instead_of_being_cut():
    """It used to become min(warmup_steps, total): a 48-step run trained in warmup only."""
    hps = hyperparameters.parse({"epochs": "8", "lr_decay_epochs": "7", "warmup_steps": "500"})
    with pytest.raises(HyperparameterError) as error:
        Schedule.build(hps, num_train_images=300, num_replicas=25)
    assert str(error.value).startswith(
        "hyperparameter warmup_steps=500: this run is 48 steps (epochs=8 x 6 steps per epoch, "
        "for 300 training images in global batches of 50: images_per_gpu=2 x 25 replicas)")
    assert "allowed: warmup_steps from 0 to 47 for this run" in str(error.value)


def test_an_evaluation_period_under_one_step_stops_the_job_instead_of_rounding_to_the_end():
    """round(0.1 x 4 steps per epoch) was 0: "evaluate only at the end", said nowhere."""
    hps = hyperparameters.parse({"eval_every_epochs": "0.1", "warmup_steps": "10"})
    with pytest.raises(HyperparameterError, match=r"eval_every_epochs=0\.1: this run is 48 steps"
                                                  r".* every 0\.4 steps, less than one"):
        Schedule.build(hps, num_train_images=16, num_replicas=2)
    hps = hyperparameters.parse({"eval_every_epochs": "0.25", "warmup_steps": "10"})
    assert Schedule.build(hps, num_train_images=16, num_replicas=2).eval_every_steps == 1


def test_max_steps_shorter_than_the_warmup_is_logged_with_the_warmup_used(caplog):
    hps = hyperparameters.parse({"max_steps": "20", "lr_decay_epochs": ""})
    with caplog.at_level(logging.WARNING):
        schedule = Schedule.build(hps, num_train_images=16, num_replicas=2)
    assert schedule.warmup_steps == 20
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned] == [
        "warning: warmup_steps=500 is longer than this run (max_steps=20): the learning rate "
        "warms up over all 20 steps instead (warmup_steps=20) and reaches its peak only at the "
        "last step"]


def test_early_stopping_that_could_never_stop_the_run_stops_the_job_before_training():
    """A patience the run's evaluations can never reach would be a setting that does nothing:
    refused at start (Schedule.build), naming the run's evaluations and what is allowed."""
    hps = hyperparameters.parse({"max_steps": "20", "warmup_steps": "0", "eval_every_epochs": "0",
                                 "early_stopping_patience": "2"})
    with pytest.raises(HyperparameterError, match=r"early_stopping_patience=2: this run is 20 "
                                                  r"steps .* evaluated only at its end"):
        Schedule.build(hps, num_train_images=16, num_replicas=2)
    # 4 steps per epoch, evaluated every epoch: at 4, 8, 12, 16 before the end; a patience of 3
    # can stop it (at 16), 4 cannot.
    for patience, refused in ((3, False), (4, True)):
        hps = hyperparameters.parse({"max_steps": "20", "warmup_steps": "0",
                                     "eval_every_epochs": "1", "early_stopping_patience": patience})
        if refused:
            with pytest.raises(HyperparameterError, match=r"allowed: 0 \(off\) or 1 to 3 for "):
                Schedule.build(hps, num_train_images=16, num_replicas=2)
        else:
            assert Schedule.build(hps, num_train_images=16, num_replicas=2).eval_every_steps == 4
