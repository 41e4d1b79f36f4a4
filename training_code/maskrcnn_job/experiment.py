"""Hyperparameters + dataset -> Model Garden experiment config (the model, data and optimizer).

Starts from Model Garden's registered `maskrcnn_resnetfpn_coco` experiment and overrides what the
hyperparameters choose. The `compact` preset is the configuration measured to learn in minutes
on this project's 2-core CPU machines (small heads, 4 px anchors, few ROIs; figures in
training_code/README.md). `build_model` builds the task's model with the distribution backend's
synchronized batch norm.
"""

import contextlib
import dataclasses
import glob
import json
import math
import os
from typing import List, Optional

import tf_keras
from official.core import base_task
from official.core import config_definitions as cfg
from official.core import exp_factory
from official.vision import registry_imports  # noqa: F401  (registers the vision experiments)

from maskrcnn_contract.hyperparameters import Hyperparameters
from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER

EXPERIMENT = "maskrcnn_resnetfpn_coco"


def locate_corruption(pattern: str) -> str:
    """Where the first unreadable record of the shards matching `pattern` is, for an error
    message: 'shard S, record N (after image id I)'. Reads the shards in order (a failure path:
    the job stops anyway); the pattern itself when every record reads."""
    import tensorflow as tf

    for shard in sorted(glob.glob(pattern)):
        index, last_id = 0, None
        try:
            for record in tf.data.TFRecordDataset(shard):
                example = tf.train.Example.FromString(record.numpy())
                ids = example.features.feature["image/source_id"].bytes_list.value
                last_id = ids[0].decode() if ids else last_id
                index += 1
        except tf.errors.DataLossError:
            after = f" (after image id {last_id})" if last_id is not None else ""
            return f"shard {shard}, record {index}{after}"
    return pattern


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Where the `train` channel's files are and what they hold (its dataset_info.json)."""

    train_files: str
    val_files: str
    val_annotations: str
    num_classes: int
    num_train_images: int
    num_val_images: int

    @classmethod
    def from_channel(cls, channel: str) -> "Dataset":
        info_path = os.path.join(channel, DATASET_COMPLETE_MARKER)
        if not os.path.isfile(info_path):
            raise FileNotFoundError(
                f"{info_path} is missing: the train channel must be the output of "
                "maskrcnn_job.coco_to_tfrecord (tfrecords/, annotations/, dataset_info.json)")
        with open(info_path, encoding="utf-8") as f:
            info = json.load(f)
        dataset = cls(
            train_files=os.path.join(channel, "tfrecords", "train-*.tfrecord"),
            val_files=os.path.join(channel, "tfrecords", "val-*.tfrecord"),
            val_annotations=os.path.join(channel, "annotations", "instances_val2017.json"),
            num_classes=int(info["num_classes"]),
            num_train_images=int(info["splits"]["train"]["num_images"]),
            num_val_images=int(info["splits"]["val"]["num_images"]),
        )
        for split, shards in (("train", info["splits"]["train"]["shards"]),
                              ("val", info["splits"]["val"]["shards"])):
            missing = [s for s in shards if not os.path.isfile(os.path.join(channel, "tfrecords", s))]
            if missing:
                raise FileNotFoundError(f"{split} shards listed in {info_path} are missing: "
                                        f"{missing[:3]}{' ...' if len(missing) > 3 else ''}")
        if not os.path.isfile(dataset.val_annotations):
            raise FileNotFoundError(f"{dataset.val_annotations} is missing")
        return dataset


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Training length and learning rate, in steps, for a given number of ranks."""

    steps_per_epoch: int
    total_steps: int
    peak_learning_rate: float
    warmup_steps: int
    decay_boundaries: List[int]
    eval_every_steps: int  # 0: only at the end

    @classmethod
    def build(cls, hps: Hyperparameters, num_train_images: int, num_ranks: int) -> "Schedule":
        global_batch = hps.images_per_gpu * num_ranks
        steps_per_epoch = max(1, math.ceil(num_train_images / global_batch))
        total = hps.max_steps or max(1, round(hps.epochs * steps_per_epoch))
        boundaries = [round(e * steps_per_epoch) for e in hps.lr_decay_epoch_list]
        return cls(
            steps_per_epoch=steps_per_epoch,
            total_steps=total,
            # Linear scaling with the number of ranks, as in Horovod's examples (Goyal et al.).
            peak_learning_rate=hps.base_learning_rate * num_ranks,
            warmup_steps=min(hps.warmup_steps, total),
            decay_boundaries=[b for b in boundaries if 0 < b < total],
            eval_every_steps=round(hps.eval_every_epochs * steps_per_epoch),
        )

    def optimization_config(self, momentum: float) -> dict:
        """Model Garden's OptimizationConfig: SGD, linear warmup from 1/3 of peak, 10x drops."""
        if self.decay_boundaries:
            values = [self.peak_learning_rate * 0.1 ** i
                      for i in range(len(self.decay_boundaries) + 1)]
            learning_rate = {"type": "stepwise", "stepwise": {
                "boundaries": self.decay_boundaries, "values": values}}
        else:
            learning_rate = {"type": "constant",
                             "constant": {"learning_rate": self.peak_learning_rate}}
        config = {"optimizer": {"type": "sgd", "sgd": {"momentum": momentum}},
                  "learning_rate": learning_rate}
        if self.warmup_steps:
            config["warmup"] = {"type": "linear", "linear": {
                "warmup_steps": self.warmup_steps,
                "warmup_learning_rate": self.peak_learning_rate / 3}}
        return config


# Variants as data, the way Model Garden declares them: an override of the experiment config.
PRESETS = {
    "standard": {},
    # Measured to learn in minutes on a 2-core CPU at 128 px (training_code/README.md).
    "compact": {"task": {
        "model": {
            "max_level": 5,
            # Small objects: the default smallest anchor (32 px) is too big at 128 px.
            "anchor": {"num_scales": 2, "aspect_ratios": [0.5, 1.0, 2.0], "anchor_size": 4.0},
            "decoder": {"fpn": {"num_filters": 64}},
            "rpn_head": {"num_filters": 64},
            "detection_head": {"num_convs": 0, "num_fcs": 2, "fc_dims": 256},
            "roi_generator": {"pre_nms_top_k": 600, "num_proposals": 128,
                              "test_pre_nms_top_k": 600, "test_num_proposals": 64},
            "roi_sampler": {"num_sampled_rois": 64},
            "mask_sampler": {"num_sampled_masks": 16},
            "mask_head": {"num_convs": 2, "num_filters": 64},
            "detection_generator": {"pre_nms_top_k": 200, "max_num_detections": 20},
            # 0.997 is too slow to settle within ~1k steps.
            "norm_activation": {"norm_momentum": 0.9},
        },
        "train_data": {
            "parser": {"rpn_batch_size_per_im": 64, "mask_crop_size": 56,
                       "aug_scale_min": 1.0, "aug_scale_max": 1.0},
            "cache": True,
        },
    }},
}


def build(hps: Hyperparameters, dataset: Dataset, num_ranks: int, use_gpu: bool,
          init_checkpoint: Optional[str] = None) -> cfg.ExperimentConfig:
    schedule = Schedule.build(hps, dataset.num_train_images, num_ranks)
    config = exp_factory.get_exp_config(EXPERIMENT)
    mixed = hps.mixed_precision and use_gpu
    config.runtime.mixed_precision_dtype = "float16" if mixed else "float32"
    config.runtime.enable_xla = False
    task = config.task
    # Model Garden's default points at a gs:// ResNet-50; only the `pretrained` channel sets one.
    task.init_checkpoint = init_checkpoint
    task.init_checkpoint_modules = "backbone"
    task.annotation_file = dataset.val_annotations
    task.losses.l2_weight_decay = hps.weight_decay
    model = task.model
    model.num_classes = dataset.num_classes
    model.input_size = [hps.image_size, hps.image_size, 3]
    model.backbone.resnet.model_id = int(hps.backbone[len("resnet"):])
    # training_code/README.md, "Batch norm": `frozen` and `sync` synchronize every batch norm that
    # learns statistics (build_model supplies the layer); `frozen` keeps the backbone's pretrained
    # ones (Model Garden's bn_trainable=False: inference mode, gamma and beta not trained).
    model.norm_activation.use_sync_bn = hps.batch_norm in ("frozen", "sync")
    model.backbone.resnet.bn_trainable = hps.batch_norm != "frozen"
    data_dtype = "float16" if mixed else "float32"
    for data, pattern, training in ((task.train_data, dataset.train_files, True),
                                    (task.validation_data, dataset.val_files, False)):
        data.input_path = pattern
        data.is_training = training
        data.global_batch_size = hps.images_per_gpu * num_ranks
        data.dtype = data_dtype
        data.seed = hps.seed
    task.train_data.parser.aug_rand_hflip = True
    task.train_data.parser.max_num_instances = hps.max_instances
    task.validation_data.drop_remainder = False
    task.validation_data.parser.max_num_instances = max(hps.max_instances, 100)
    config.override(PRESETS[hps.model_preset], is_strict=True)
    trainer = config.trainer
    trainer.train_steps = schedule.total_steps
    trainer.optimizer_config = type(trainer.optimizer_config)(
        schedule.optimization_config(hps.momentum))
    config.validate()
    return config


@contextlib.contextmanager
def _every_batch_norm_is(layer_class: type):
    """While it is active, every batch-norm layer Model Garden creates is a `layer_class`.

    Model Garden relies on a tf.distribute strategy to synchronize batch norm: the ResNet, its
    blocks, the FPN and the heads create `tf_keras.layers.BatchNormalization(
    synchronized=use_sync_bn)`, the RPN head `tf_keras.layers.experimental.SyncBatchNormalization`;
    without a strategy (Horovod) both normalize per rank. And its factory does not pass
    use_sync_bn to the mask head, which would stay per rank even under a strategy. Each module
    looks the names up on `tf_keras.layers` when it builds, so both are replaced for the build
    and restored after, instead of forking Model Garden.
    """
    layers = tf_keras.layers
    stock, stock_sync = layers.BatchNormalization, layers.experimental.SyncBatchNormalization

    def batch_normalization(*args, synchronized=None, **kwargs):
        del synchronized  # every layer is synchronized
        return layer_class(*args, **kwargs)

    layers.BatchNormalization = layers.experimental.SyncBatchNormalization = batch_normalization
    try:
        yield
    finally:
        layers.BatchNormalization, layers.experimental.SyncBatchNormalization = stock, stock_sync


def build_model(task: base_task.Task, sync_batch_norm_layer: type) -> tf_keras.Model:
    """The task's model. With use_sync_bn (batch_norm `sync` or `frozen`) every batch-norm layer
    is a `sync_batch_norm_layer`, the distribution backend's synchronized one."""
    if not task.task_config.model.norm_activation.use_sync_bn:
        return task.build_model()
    with _every_batch_norm_is(sync_batch_norm_layer):
        return task.build_model()
