"""Hyperparameter parsing, metric definitions, and the README table (pure Python, fast)."""

import json
import os
import re

import pytest

from maskrcnn_contract import hyperparameters, metrics
from maskrcnn_contract.hyperparameters import HyperparameterError

TRAINING_CODE = os.path.join(os.path.dirname(__file__), "..", "..", "training_code")


def test_defaults_and_string_values_from_sagemaker():
    hps = hyperparameters.parse({"image_size": "512", "mixed_precision": "false",
                                 "base_learning_rate": "0.02", "backbone": "resnet101",
                                 "lr_decay_epochs": "8, 11", "sagemaker_mpi_enabled": "true"})
    assert hps.image_size == 512 and hps.mixed_precision is False
    assert hps.base_learning_rate == 0.02 and hps.backbone == "resnet101"
    assert hps.lr_decay_epoch_list == (8.0, 11.0)
    assert hps.images_per_gpu == hyperparameters.Hyperparameters().images_per_gpu


def test_json_file_with_sdk_encoded_strings(tmp_path):
    path = tmp_path / "hyperparameters.json"
    path.write_text(json.dumps({"backbone": '"resnet18"', "epochs": "2.5", "seed": "7",
                                "lr_decay_epochs": '"2"'}))
    hps = hyperparameters.parse_json_file(str(path))
    assert (hps.backbone, hps.epochs, hps.seed) == ("resnet18", 2.5, 7)


@pytest.mark.parametrize("raw, message", [
    ({"image_sise": "512"}, "unknown hyperparameter(s): image_sise"),
    ({"image_size": "big"}, "image_size='big': expected an integer"),
    ({"image_size": "2.5"}, "image_size='2.5': expected an integer"),
    ({"image_size": "32"}, "image_size=32: must be >= 64"),
    ({"backbone": "vgg16"}, "backbone='vgg16': expected one of resnet18"),
    ({"batch_norm": "synced"}, "batch_norm='synced': expected one of frozen, sync, per_rank"),
    ({"mixed_precision": "maybe"}, "mixed_precision='maybe': expected true or false"),
    ({"base_learning_rate": "nan"}, "base_learning_rate='nan': not a finite number"),
    ({"lr_decay_epochs": "8,x"}, "lr_decay_epochs='8,x': expected comma-separated numbers"),
    ({"lr_decay_epochs": "11,8"}, "must be positive and increasing"),
    # Values a training run cannot mean: refused, not replaced (once one step, once no update).
    ({"epochs": "0"}, "epochs=0.0: must be > 0.0"),
    ({"base_learning_rate": "0"}, "base_learning_rate=0.0: must be > 0.0"),
    # A drop at or past the end would never happen: it was dropped without a word.
    ({"epochs": "12", "lr_decay_epochs": "8,12"}, "every drop must come before the end of "
                                                  "training, epochs=12"),
    # The best checkpoint and early stopping would watch a figure no evaluation computes.
    ({"validation_losses": "false", "objective_metric": "eval/mask_loss"},
     "objective_metric='eval/mask_loss' is a validation loss, and validation_losses=false "
     "computes none"),
])
def test_bad_hyperparameters_name_the_value(raw, message):
    with pytest.raises(HyperparameterError) as error:
        hyperparameters.parse(raw)
    assert message in str(error.value)


def test_batch_norm_defaults_to_frozen_which_needs_the_pretrained_channel():
    hps = hyperparameters.parse({})
    assert hps.batch_norm == "frozen"
    hyperparameters.check_pretrained_channel(hps, has_pretrained=True)
    with pytest.raises(HyperparameterError) as error:
        hyperparameters.check_pretrained_channel(hps, has_pretrained=False)
    assert "batch_norm=frozen" in str(error.value)
    assert "`pretrained` channel" in str(error.value) and "batch_norm=sync" in str(error.value)
    for mode in ("sync", "per_rank"):
        hps = hyperparameters.parse({"batch_norm": mode})
        assert hps.batch_norm == mode
        hyperparameters.check_pretrained_channel(hps, has_pretrained=False)


def test_readme_table_matches_the_module():
    with open(os.path.join(TRAINING_CODE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert hyperparameters.markdown_table() in readme


def test_metric_regexes_read_the_printed_lines():
    lines = [metrics.format_line(name, 0.25 + i) for i, name in enumerate(metrics.ALL_METRICS)]
    log = "\n".join(["[1,0]<stdout>:" + lines[0]] + lines[1:] + ["eval/bbox_AP50: 0.5"])
    for definition in metrics.METRIC_DEFINITIONS:
        found = [float(m) for m in re.findall(definition["Regex"], log)]
        index = metrics.ALL_METRICS.index(definition["Name"])
        expected = [0.25 + index] + ([0.5] if definition["Name"] == "eval/bbox_AP50" else [])
        assert found == expected, definition["Name"]
    assert {"train/loss", "train/learning_rate", "train/images_per_sec", "eval/bbox_AP",
            "eval/bbox_AP50", "eval/segm_AP", "eval/segm_AP50"} <= set(metrics.ALL_METRICS)
    with pytest.raises(KeyError, match="undeclared metric"):
        metrics.format_line("eval/typo", 1.0)



@pytest.mark.parametrize("distribution", ["multi_worker_mirrored", "parameter_server"])
def test_fp16_allreduce_without_horovod_is_refused_not_ignored(distribution):
    """Only Horovod's allreduce compresses: under the strategies the job ignored it without a
    word. check_distribution (the job at start, the launcher before it sends) refuses it."""
    hps = hyperparameters.parse({"distribution": distribution, "fp16_allreduce": "true"})
    with pytest.raises(HyperparameterError) as error:
        hyperparameters.check_distribution(hps)
    assert (f"fp16_allreduce=true compresses Horovod's allreduce; distribution={distribution} "
            "has none to compress") in str(error.value)
    assert "remove it, or choose distribution=horovod" in str(error.value)
    hyperparameters.check_distribution(hyperparameters.parse({"fp16_allreduce": "true"}))


# The fine-tune recipe training_code/README.md gave: warmup_steps=500 "for a few hundred images".
RECIPE = {"epochs": "8", "lr_decay_epochs": "7", "warmup_steps": "500"}


def test_a_warmup_longer_than_a_run_of_epochs_is_refused_naming_the_runs_length():
    hps = hyperparameters.parse(RECIPE)
    length = hyperparameters.run_length(hps, num_train_images=300, num_replicas=16)
    assert (length.global_batch, length.steps_per_epoch, length.total_steps) == (32, 10, 80)
    problem, = hyperparameters.run_length_problems(hps, length)
    assert problem == (
        "hyperparameter warmup_steps=500: this run is 80 steps (epochs=8 x 10 steps per epoch, "
        "for 300 training images in global batches of 32: images_per_gpu=2 x 16 replicas), so "
        "it would end still warming up and never train at its peak learning rate; allowed: "
        "warmup_steps from 0 to 79 for this run, or a longer one (at least epochs=51 for this "
        "warmup)")
    with pytest.raises(HyperparameterError, match="warmup_steps=500: this run is 80 steps"):
        hyperparameters.check_run_length(hps, length)
    # The limits it names are the limits: 79 passes, 80 (the whole run) does not, and so do 51
    # epochs with the 500 steps.
    for warmup, refused in ((79, False), (80, True)):
        hps = hyperparameters.parse(dict(RECIPE, warmup_steps=warmup))
        assert bool(hyperparameters.run_length_problems(hps, length)) is refused
    hps = hyperparameters.parse(dict(RECIPE, epochs="51"))
    assert hyperparameters.check_run_length(hps, hyperparameters.run_length(hps, 300, 16)) == []


def test_max_steps_cuts_the_warmup_loudly_with_the_value_used():
    """A run cut short on purpose (max_steps) keeps the full run's warmup, cut to its length: not
    refused, printed with the value used (run_length_problems says why)."""
    hps = hyperparameters.parse({"max_steps": "20"})
    length = hyperparameters.run_length(hps, num_train_images=16, num_replicas=2)
    assert hyperparameters.run_length_problems(hps, length) == []
    assert hyperparameters.check_run_length(hps, length) == [
        "warning: warmup_steps=500 is longer than this run (max_steps=20): the learning rate "
        "warms up over all 20 steps instead (warmup_steps=20) and reaches its peak only at the "
        "last step"]
    assert hyperparameters.warmup_steps_used(hps, length) == 20
    hps = hyperparameters.parse({"max_steps": "20", "warmup_steps": "20"})
    assert hyperparameters.check_run_length(hps, length) == []


def test_an_evaluation_period_under_one_step_is_refused_not_rounded_to_the_end():
    hps = hyperparameters.parse({"eval_every_epochs": "0.01", "warmup_steps": "0"})
    length = hyperparameters.run_length(hps, num_train_images=800, num_replicas=16)
    problem, = hyperparameters.run_length_problems(hps, length)
    assert problem.startswith("hyperparameter eval_every_epochs=0.01: this run is 300 steps "
                              "(epochs=12 x 25 steps per epoch")
    assert problem.endswith("so that is every 0.25 steps, less than one, and the job would "
                            "evaluate only at the end; allowed: 0 (only at the end) or at "
                            "least 0.04 (one step)")
    for period, steps in (("0", 0), ("0.04", 1), ("1", 25)):
        hps = hyperparameters.parse({"eval_every_epochs": period, "warmup_steps": "0"})
        assert hyperparameters.run_length_problems(hps, length) == []
        assert hyperparameters.eval_every_steps(hps, length) == steps


def test_same_classes_is_the_names_and_annotation_ids_in_order():
    run = {"categories": [{"id": 1, "name": "bolt", "source_id": 3},
                          {"id": 2, "name": "nut", "source_id": 17}]}
    same = hyperparameters.same_classes
    assert same(run, [{"id": 1, "name": "bolt", "source_id": 3},
                      {"id": 2, "name": "nut", "source_id": 17}])
    assert not same(run, [{"id": 1, "name": "nut", "source_id": 17},
                          {"id": 2, "name": "bolt", "source_id": 3}])  # the ids follow the order
    assert not same(run, [{"id": 1, "name": "bolt", "source_id": 4},
                          {"id": 2, "name": "nut", "source_id": 17}])
    # A dataset staged before the ids were numbered: its ids are the annotation file's.
    assert same(run, [{"id": 3, "name": "bolt"}, {"id": 17, "name": "nut"}])
    # A run that recorded no classes shares none (the launcher read it as [], the job failed).
    assert not same({}, []) and not same({"categories": []}, [])


@pytest.mark.parametrize("name", ["train/loss", "eval/bbox_ARmax10", "eval/segm_ap",
                                  "segm_AP"])
def test_an_objective_that_is_no_evaluation_metric_line_is_refused_naming_the_allowed(name):
    """The best checkpoint and early stopping read the objective from an evaluation's metric
    lines: anything else (a training figure, a figure left out of the metric lines, a typo) is
    refused by name before the job starts, with what is allowed."""
    with pytest.raises(HyperparameterError) as error:
        hyperparameters.parse({"objective_metric": name})
    assert str(error.value).startswith(f"hyperparameter objective_metric={name!r}: expected one "
                                       "of eval/bbox_AP, eval/bbox_AP50")
    assert "eval/loss" in str(error.value) and "eval/segm_AP_worst_class" in str(error.value)
    assert hyperparameters.parse({}).objective_metric == "eval/segm_AP"


def test_losses_are_minimized_and_every_other_objective_maximized():
    assert metrics.VALIDATION_LOSS_METRICS == (
        "eval/loss", "eval/rpn_score_loss", "eval/rpn_box_loss", "eval/frcnn_cls_loss",
        "eval/frcnn_box_loss", "eval/mask_loss")
    for name in metrics.OBJECTIVE_METRICS:
        expected = metrics.MINIMIZE if name.endswith("loss") else metrics.MAXIMIZE
        assert metrics.objective_direction(name) == expected, name
    # Every objective is a metric line (SageMaker reads it, a tuning job can take it), and so is
    # the best so far; the figures left out still reach TensorBoard (left_out_of_metric_lines).
    assert set(metrics.OBJECTIVE_METRICS) | {metrics.BEST_OBJECTIVE} <= set(metrics.ALL_METRICS)
    assert len(metrics.METRIC_DEFINITIONS) <= metrics.MAX_METRIC_DEFINITIONS
    assert metrics.left_out_of_metric_lines("eval/segm_ARmax10")
    assert not metrics.left_out_of_metric_lines("eval/segm_ARmax100")


def test_early_stopping_that_could_never_stop_the_run_is_refused_naming_the_limits():
    """40 steps evaluated every 10: evaluations at 10, 20, 30 before the end. The earliest stop
    is `patience` evaluations after the first, so 2 can stop the run (at 30), 3 cannot."""
    hps = hyperparameters.parse({"max_steps": "40", "eval_every_epochs": "0.25",
                                 "early_stopping_patience": "3"})
    length = hyperparameters.run_length(hps, num_train_images=160, num_replicas=2)
    assert hyperparameters.evaluations_before_the_end(hps, length) == 3
    problem, = hyperparameters.run_length_problems(hps, length)
    assert problem == (
        "hyperparameter early_stopping_patience=3: this run is 40 steps (max_steps=40; an epoch "
        "is 40 steps, for 160 training images in global batches of 4: images_per_gpu=2 x 2 "
        "replicas), evaluated every 10 steps (eval_every_epochs=0.25), 3 time(s) before its "
        "end, so it could never stop early; allowed: 0 (off) or 1 to 2 for this run, or "
        "evaluate more often (eval_every_epochs)")
    for patience in (0, 1, 2):
        hps = hyperparameters.parse({"max_steps": "40", "eval_every_epochs": "0.25",
                                     "early_stopping_patience": patience})
        assert hyperparameters.run_length_problems(hps, length) == []
    hps = hyperparameters.parse({"max_steps": "40", "eval_every_epochs": "0",
                                 "early_stopping_patience": "1"})
    problem, = hyperparameters.run_length_problems(hps, length)
    assert "evaluated only at its end (eval_every_epochs=0), so it could never stop early; " \
           "allowed: 0 (off), or evaluate more often" in problem
