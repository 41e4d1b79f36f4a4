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

