"""Backbone checkpoints written the way Model Garden's ImageNet ones are read
(tf.train.Checkpoint(backbone=...)), with random weights: the staging tests check that a
checkpoint restores into the backbone, not what it learned. Each is written once for this
Model Garden and kept in the tests' build cache (tests/build_cache.py): writing ResNet-50's costs
a process TensorFlow's import and the backbone's build (~12 s of CPU)."""

import os

from tests import build_cache

# What a checkpoint is made from: the experiment whose backbone config it takes, and the packages
# that build and write it.
SOURCES = ("training_code/maskrcnn_job/training/experiment.py",)
PACKAGES = ("tf-models-official", "tensorflow", "tf_keras")


def published(depth: int, prefix: str) -> dict:
    """{file name: bytes} of a ResNet-`depth` backbone checkpoint named `prefix` (ckpt-N)."""
    digest = build_cache.key(SOURCES, PACKAGES, depth, prefix)
    with build_cache.entry(f"backbone-resnet{depth}", digest) as directory:
        if not (directory / f"{prefix}.index").is_file():
            _write(depth, str(directory / prefix))
        return {name: (directory / name).read_bytes() for name in os.listdir(directory)
                if name.startswith(prefix + ".")}


def _write(depth: int, path: str) -> None:
    import tensorflow as tf
    import tf_keras
    from official.core import exp_factory
    from official.vision.modeling.backbones import factory

    from maskrcnn_job.training import experiment

    model_config = exp_factory.get_exp_config(experiment.EXPERIMENT).task.model
    model_config.backbone.resnet.model_id = depth
    backbone = factory.build_backbone(tf_keras.layers.InputSpec(shape=[None, None, None, 3]),
                                      model_config.backbone, model_config.norm_activation)
    tf.train.Checkpoint(backbone=backbone).write(path)
