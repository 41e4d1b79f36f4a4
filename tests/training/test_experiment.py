"""Model Garden config from hyperparameters, the learning-rate schedule, per-rank input sharding."""

import os
import re

import pytest

from maskrcnn_contract import hyperparameters

from maskrcnn_job.data import coco_to_tfrecord, layout
from maskrcnn_job.training import experiment
from maskrcnn_job.training.schedule import Schedule
from maskrcnn_local import synthetic_coco


@pytest.fixture(scope="module")
def channel(small_coco, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("channel"))
    # 3 kB shards: several train files, so that file-level sharding is exercised too.
    coco_to_tfrecord.convert_coco_dir(small_coco, out, shard_mb=0.003, progress=False)
    return out


def _hps(**overrides):
    # warmup_steps: shorter than the small channel's 12-step runs (a longer one is refused).
    base = {"backbone": "resnet18", "model_preset": "compact", "image_size": "64",
            "mixed_precision": "true", "warmup_steps": "5"}
    return hyperparameters.parse(dict(base, **overrides))


def _build(hps, channel_dir, num_replicas, use_gpu):
    """The experiment as the trainer builds it: the channel's info, the schedule once."""
    channel = layout.Channel(channel_dir)
    info = channel.read_info()
    schedule = Schedule.build(hps, info.splits["train"].num_images, num_replicas)
    return experiment.build(hps, channel, info, schedule, use_gpu=use_gpu)


def test_config_follows_hyperparameters_and_dataset(channel):
    config = _build(_hps(images_per_gpu="3"), channel, num_replicas=4, use_gpu=False)
    task = config.task
    assert task.model.backbone.resnet.model_id == 18
    assert task.model.input_size == [64, 64, 3]
    assert task.model.num_classes == len(synthetic_coco.CATEGORIES) + 1  # raw ids, 0 background
    assert task.model.anchor.anchor_size == 4.0  # compact preset
    assert task.train_data.global_batch_size == 12
    assert task.init_checkpoint is None
    assert task.annotation_file == layout.Channel(channel).annotations("val")
    assert task.train_data.input_path == os.path.join(channel, "tfrecords", "train-*.tfrecord")
    # Mixed precision only where there is a GPU.
    assert config.runtime.mixed_precision_dtype == "float32"
    gpu = _build(_hps(backbone="resnet50", model_preset="standard"), channel, 8, True)
    assert gpu.runtime.mixed_precision_dtype == "float16"
    assert gpu.task.train_data.dtype == "float16"
    assert gpu.task.model.anchor.anchor_size == 8.0  # Model Garden's COCO default


def test_batch_norm_modes_configure_model_garden(channel):
    """per_rank is Model Garden's model unchanged: tf_keras's layers, each rank's statistics.
    sync and frozen build with the backend's layer (their steps: test_batch_norm.py)."""
    import tf_keras

    stock = tf_keras.layers.BatchNormalization
    seen = {}

    class Task:  # records the layer Model Garden's modules would look up while building
        def __init__(self, config):
            self.task_config = config.task

        def build_model(self):
            seen[mode] = tf_keras.layers.BatchNormalization
            return mode

    class SyncLayer:
        pass

    for mode, sync, trainable in (("per_rank", False, True), ("sync", True, True),
                                  ("frozen", True, False)):
        config = _build(_hps(batch_norm=mode), channel, num_replicas=2, use_gpu=False)
        assert config.task.model.norm_activation.use_sync_bn is sync
        assert config.task.model.backbone.resnet.bn_trainable is trainable
        assert experiment.build_model(Task(config), SyncLayer) == mode
        assert tf_keras.layers.BatchNormalization is stock  # restored after the build
    assert seen["per_rank"] is stock
    assert seen["sync"] is not stock and seen["frozen"] is not stock
    assert isinstance(seen["sync"](), SyncLayer)


def test_every_model_preset_is_a_model_garden_override():
    assert set(experiment.PRESETS) == set(hyperparameters.MODEL_PRESETS)


def test_learning_rate_schedule_scales_warms_up_and_decays():
    from official.modeling import optimization

    hps = _hps(base_learning_rate="0.01", warmup_steps="10", epochs="4", lr_decay_epochs="2,3")
    schedule = Schedule.build(hps, num_train_images=200, num_replicas=4)
    assert schedule.steps_per_epoch == 25  # 200 images / (2 images x 4 ranks)
    assert schedule.total_steps == 100
    assert schedule.decay_boundaries == [50, 75]
    assert schedule.peak_learning_rate == pytest.approx(0.04)
    config = optimization.OptimizationConfig(schedule.optimization_config(momentum=0.9))
    lr = optimization.OptimizerFactory(config).build_learning_rate()
    # PiecewiseConstantDecay: a boundary step still has the previous rate.
    values = {step: float(lr(step)) for step in (0, 5, 10, 50, 51, 75, 76, 99)}
    assert values[0] == pytest.approx(0.04 / 3)
    assert values[5] == pytest.approx((0.04 / 3 + 0.04) / 2, rel=1e-5)
    assert values[10] == values[50] == pytest.approx(0.04)
    assert values[51] == values[75] == pytest.approx(0.004)
    assert values[76] == values[99] == pytest.approx(0.0004)



def test_max_steps_places_the_drops_at_their_fraction_of_the_epochs_and_says_so(caplog):
    """The drops keep their place when max_steps cuts the run: 8 and 11 of 12 epochs are steps
    1333 and 1833 of 2000 (notebooks/README.md's example), logged for the user to see."""
    import logging

    with caplog.at_level(logging.INFO):
        schedule = Schedule.build(_hps(max_steps="2000"), num_train_images=118287,
                                  num_replicas=16)
    assert schedule.total_steps == 2000 and schedule.decay_boundaries == [1333, 1833]
    assert "the learning rate drops at steps [1333, 1833] of max_steps=2000" in caplog.text


@pytest.mark.parametrize("overrides, message", [
    # 8 and 11 of 12 epochs fall at steps 2 and 3 of 3: the second at the end.
    ({"max_steps": "3"}, "the drops fall at steps [2, 3] of a 3-step run"),
    # 2 steps per epoch: 1.1 and 1.2 epochs are both step 2.
    ({"epochs": "4", "lr_decay_epochs": "1.1,1.2"}, "at a step of its own"),
])
def test_drops_that_cannot_happen_are_refused_not_dropped(overrides, message):
    from maskrcnn_contract.hyperparameters import HyperparameterError

    with pytest.raises(HyperparameterError, match=re.escape(message)):
        Schedule.build(_hps(**overrides), num_train_images=16, num_replicas=4)


def test_missing_dataset_info_names_the_expected_layout(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset_info.json is missing"):
        layout.Channel(str(tmp_path)).read_info()


@pytest.mark.parametrize("split", ["train", "val"])
def test_ranks_read_disjoint_and_complete_shares(channel, split):
    """Model Garden's InputReader with the input context each rank gets from the backend."""
    import tensorflow as tf
    from official.vision.tasks import maskrcnn

    num_files = len([f for f in os.listdir(os.path.join(channel, "tfrecords"))
                     if f.startswith(split + "-")])
    config = _build(_hps(), channel, num_replicas=2, use_gpu=False)
    task = maskrcnn.MaskRCNNTask(config.task)
    data = config.task.validation_data
    # The val config does not shuffle or repeat: one pass shows exactly which images a rank reads.
    data.input_path = os.path.join(channel, "tfrecords", f"{split}-*.tfrecord")
    data.global_batch_size = 2
    seen = []
    for rank in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=rank,
                                             num_replicas_in_sync=2)
        ids = [int(i) for _, labels in task.build_inputs(data, input_context=context)
               for i in labels["groundtruths"]["source_id"].numpy()]
        seen.append(ids)
    expected = layout.Channel(channel).read_info().splits[split].num_images
    assert num_files > (2 if split == "train" else 0)
    assert seen[0] and seen[1]
    assert not set(seen[0]) & set(seen[1])
    assert len(seen[0]) + len(seen[1]) == expected == len(set(seen[0]) | set(seen[1]))


COCO_TRAIN_IMAGES = 118287
# Detectron's 1x schedule (Mask R-CNN R50-FPN): 16 images per step, LR 0.02, 90k steps, drops at
# 60k and 80k. The defaults must reproduce it at every scale, with linear scaling.
DETECTRON_1X = {"batch": 16, "learning_rate": 0.02, "steps": 90000, "drops": (60000, 80000)}


def _recipe_table():
    """{gpus: row} of the table in docs/training-recipe.md's "The reference recipe"."""
    doc = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "training-recipe.md")
    with open(doc, encoding="utf-8") as f:
        text = f.read().split("### The reference recipe", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[0].isdigit():
            rows[int(cells[0])] = {
                "global_batch": int(cells[1]), "peak_lr": float(cells[2]),
                "steps_per_epoch": int(cells[3]), "steps": int(cells[4]),
                "drops": [int(v) for v in cells[5].split(",")]}
    return rows


@pytest.mark.parametrize("gpus", [8, 16, 32])
def test_defaults_reproduce_detectrons_1x_schedule_as_the_recipe_says(gpus):
    hps = hyperparameters.parse({})
    schedule = Schedule.build(hps, COCO_TRAIN_IMAGES, gpus)
    batch = hps.images_per_gpu * gpus
    reference = DETECTRON_1X
    per_image = reference["learning_rate"] / reference["batch"]
    assert schedule.peak_learning_rate == pytest.approx(per_image * batch)
    images = reference["steps"] * reference["batch"]
    assert schedule.total_steps * batch == pytest.approx(images, rel=0.02)
    assert [b * batch for b in schedule.decay_boundaries] == pytest.approx(
        [d * reference["batch"] for d in reference["drops"]], rel=0.02)
    assert schedule.warmup_steps == 500
    assert _recipe_table()[gpus] == {
        "global_batch": batch, "peak_lr": pytest.approx(schedule.peak_learning_rate),
        "steps_per_epoch": schedule.steps_per_epoch, "steps": schedule.total_steps,
        "drops": schedule.decay_boundaries}
