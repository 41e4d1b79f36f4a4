"""Hyperparameters + dataset + schedule -> Model Garden experiment config (model, data, optimizer).

Starts from Model Garden's registered `maskrcnn_resnetfpn_coco` experiment and overrides what the
hyperparameters choose. The `compact` preset is the configuration measured to learn in minutes
on this project's 2-core CPU machines (small heads, 4 px anchors, few ROIs; figures in
docs/benchmarks.md). `build_model` builds the task's model with the distribution backend's
synchronized batch norm.
"""

import contextlib
from typing import Optional

import tf_keras
from official.core import base_task, exp_factory
from official.core import config_definitions as cfg
from official.vision import registry_imports  # noqa: F401  (registers the vision experiments)

from maskrcnn_contract.hyperparameters import Hyperparameters

from maskrcnn_job.data import layout
from maskrcnn_job.training.schedule import Schedule

EXPERIMENT = "maskrcnn_resnetfpn_coco"


# Variants as data, the way Model Garden declares them: an override of the experiment config.
PRESETS = {
    "standard": {},
    # Measured to learn in minutes on a 2-core CPU at 128 px (docs/benchmarks.md).
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


def build(hps: Hyperparameters, channel: layout.Channel, info: layout.DatasetInfo,
          schedule: Schedule, use_gpu: bool,
          init_checkpoint: Optional[str] = None) -> cfg.ExperimentConfig:
    """The experiment of a run on `channel` (whose contents `info` describes), its batch size,
    length and learning rate from `schedule`."""
    config = exp_factory.get_exp_config(EXPERIMENT)
    mixed = hps.mixed_precision and use_gpu
    config.runtime.mixed_precision_dtype = "float16" if mixed else "float32"
    config.runtime.enable_xla = False
    task = config.task
    # Model Garden's default points at a gs:// ResNet-50; only the `pretrained` channel sets one.
    task.init_checkpoint = init_checkpoint
    task.init_checkpoint_modules = "backbone"
    task.annotation_file = channel.annotations(layout.VAL)
    task.losses.l2_weight_decay = hps.weight_decay
    model = task.model
    model.num_classes = info.num_classes
    model.input_size = [hps.image_size, hps.image_size, 3]
    model.backbone.resnet.model_id = int(hps.backbone[len("resnet"):])
    # docs/batch-norm.md: `frozen` and `sync` synchronize every batch norm that
    # learns statistics (build_model supplies the layer); `frozen` keeps the backbone's pretrained
    # ones (Model Garden's bn_trainable=False: inference mode, gamma and beta not trained).
    model.norm_activation.use_sync_bn = hps.batch_norm in ("frozen", "sync")
    model.backbone.resnet.bn_trainable = hps.batch_norm != "frozen"
    data_dtype = "float16" if mixed else "float32"
    for data, split in ((task.train_data, layout.TRAIN), (task.validation_data, layout.VAL)):
        data.input_path = channel.shards(split)
        data.is_training = split == layout.TRAIN
        data.global_batch_size = schedule.global_batch
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


def validation_loss_data(config: cfg.ExperimentConfig):
    """The data config of the validation losses: the val split with the training parser's
    settings (the anchors' and proposals' sampling, the mask crop: the losses of training), its
    augmentation off, read as the evaluation reads it (evaluation.validation_loss_inputs)."""
    task = config.task
    data = task.train_data.replace(
        input_path=task.validation_data.input_path, is_training=False, drop_remainder=False,
        cache=False, global_batch_size=task.validation_data.global_batch_size)
    data.parser.aug_rand_hflip = data.parser.aug_rand_vflip = False
    data.parser.aug_scale_min = data.parser.aug_scale_max = 1.0
    data.parser.aug_type = None
    return data


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
