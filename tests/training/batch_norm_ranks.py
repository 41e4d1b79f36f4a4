"""Test-only program, one process per rank under mpirun (test_batch_norm.py): what each
`batch_norm` mode does to the batch-norm layers, observed on every rank.

Every rank gets different data. Rank 0 writes $BN_TEST_OUT/results.json with the observations the
tests assert on:
- `averaging`: one Horovod step against the step on both ranks' images (averaging_ranks.py).
- `layer`: the backend's synchronized layer and tf_keras's stock one, 3 training steps each: the
  moving statistics of every rank against what the concatenation of both ranks' inputs gives,
  and the input gradients against the stock layer on that concatenation.
- `sync`, `frozen`: the job's Trainer (ResNet-18, compact heads, 64 px), 3 steps each: the class
  of every batch-norm layer, which layers' statistics differ between ranks or moved, and the
  backbone's first layer against the global batch's statistics. `frozen` restores a backbone
  checkpoint written from the `sync` model, its batch-norm weights set to distinctive values.
- `replicas`: the job's end-of-run check that the ranks hold the same weights, against each
  rank's own fingerprint of its weights, and with rank 1's weights made to differ.
- `validation_losses`: the `sync` Trainer's evaluator computing the validation losses on its
  model (its share of the val split, every rank): which variables moved (none may), and which
  the same pass moves with its batch norm in training mode (the break the test names).
`per_rank` builds Model Garden's model unchanged: its config is checked in test_experiment.py,
and the per-rank layer's failing the checks above is shown by `layer`.
The steps run eagerly: the same layers, optimizer and allreduces as the job's traced step,
without tracing Mask R-CNN's training step twice per rank (about half of this program's time).
"""

import hashlib
import json
import os

import numpy as np
import tensorflow as tf
import tf_keras
from tf_keras.src.layers.normalization.batch_normalization import BatchNormalizationBase

from maskrcnn_contract import hyperparameters
from maskrcnn_job.distribution import horovod_backend
from maskrcnn_job.data import layout
from maskrcnn_job.training import evaluation, trainer

import averaging_ranks  # beside this program, which mpirun runs as a script

STEPS = 3
PARTS = ("backbone", "decoder", "rpn_head", "detection_head", "mask_head")


def _global_moments(backend, x: np.ndarray, axes) -> tuple:
    """Mean and (biased) variance over every rank's `x`, as if concatenated."""
    parts = backend.gather_objects(x.astype(np.float64))
    everything = np.concatenate(parts, axis=0)
    return everything.mean(axis=axes), everything.var(axis=axes)


def _moving(layer) -> list:
    return [layer.moving_mean.numpy(), layer.moving_variance.numpy()]


def _error_vs_global(layer, previous, mean, variance) -> float:
    """Largest relative difference of the layer's moving statistics from the moving average
    that the global batch's statistics give."""
    expected = [layer.momentum * p + (1 - layer.momentum) * g
                for p, g in zip(previous, (mean, variance))]
    return max(float(np.max(np.abs(a - e) / (np.abs(e) + 1e-3)))
               for a, e in zip(_moving(layer), expected))


def _same_on_every_rank(backend, arrays) -> bool:
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays))
    return len(set(backend.gather_objects(digest.hexdigest()))) == 1


def layer_steps(backend, layer) -> list:
    """3 steps of `layer` on this rank's inputs (shifted and scaled by rank)."""
    rng = np.random.default_rng(backend.rank)
    reference = tf_keras.layers.BatchNormalization(momentum=layer.momentum, fused=False)

    @tf.function
    def step(x, w):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, training=True) * w)
        return tape.gradient(loss, x)

    observed = []
    for _ in range(STEPS):
        x = rng.normal(backend.rank, 1 + backend.rank, (2, 4, 4, 3)).astype(np.float32)
        w = rng.normal(size=x.shape).astype(np.float32)
        previous = _moving(layer) if layer.built else [np.zeros(3), np.ones(3)]
        gradient = step(tf.constant(x), tf.constant(w)).numpy()
        mean, variance = _global_moments(backend, x, (0, 1, 2))
        # The gradient of the sum of every rank's loss, on the concatenated batch, sliced.
        x_all = tf.constant(np.concatenate(backend.gather_objects(x)))
        with tf.GradientTape() as tape:
            tape.watch(x_all)
            loss = tf.reduce_sum(reference(x_all, training=True)
                                 * np.concatenate(backend.gather_objects(w)))
        expected_gradient = tape.gradient(loss, x_all).numpy()[2 * backend.rank:][:2]
        observed.append({
            "same_on_every_rank": _same_on_every_rank(backend, _moving(layer)),
            "error_vs_global": _error_vs_global(layer, previous, mean, variance),
            "gradient_error": max(backend.gather_objects(
                float(np.max(np.abs(gradient - expected_gradient))))),
        })
    return observed


def _batch_norm_layers(model) -> dict:
    """{part of the model: its batch-norm layers}."""
    layers = {}
    for part in PARTS:
        modules = getattr(model, part)
        for module in modules if isinstance(modules, list) else [modules]:
            layers.setdefault(part, []).extend(
                m for m in module.submodules if isinstance(m, BatchNormalizationBase))
    return layers


def build_trainer(backend, batch_norm, work_dir, init_checkpoint=None) -> trainer.Trainer:
    hps = hyperparameters.parse({
        "backbone": "resnet18", "model_preset": "compact", "image_size": 64,
        "mixed_precision": False, "batch_norm": batch_norm, "max_steps": STEPS, "lr_decay_epochs": "",
        "warmup_steps": 0, "base_learning_rate": 0.01})
    directory = os.path.join(work_dir, batch_norm, f"rank-{backend.rank}")
    paths = trainer.Paths(checkpoint_dir=os.path.join(directory, "checkpoints"),
                          model_dir=os.path.join(directory, "model"),
                          output_data_dir=os.path.join(directory, "output"),
                          tensorboard_dir=os.path.join(directory, "tensorboard"),
                          init_checkpoint=init_checkpoint)
    channel = layout.Channel(os.environ["BN_TEST_CHANNEL"])
    job = trainer.Trainer(hps, channel, channel.read_info(), backend, paths)
    job.start()
    return job


def describe(job) -> dict:
    """The batch-norm layers of `job`'s model: their classes and names by part, the frozen ones."""
    layers = _batch_norm_layers(job.model)
    trainable = {v.ref() for v in job.model.trainable_variables}
    in_parts = {id(l) for part in PARTS for l in layers[part]}
    return {
        "classes": {part: sorted({type(l).__name__ for l in layers[part]}) for part in PARTS},
        "layers": {part: [l.name for l in layers[part]] for part in PARTS},
        "elsewhere": [m.name for m in job.model.submodules
                      if isinstance(m, BatchNormalizationBase) and id(m) not in in_parts],
        "frozen": [l.name for part in PARTS for l in layers[part]
                   if not l.trainable and not any(v.ref() in trainable for v in l.weights)],
    }


def model_steps(backend, job) -> dict:
    """Trains STEPS steps; what the batch-norm layers did, per step."""
    layers = _batch_norm_layers(job.model)
    every = [layer for part in PARTS for layer in layers[part]]
    # The backbone's first batch norm normalizes its first convolution's output, which the
    # batch-norm mode does not change: its global statistics can be computed from the images.
    first = next(l for l in job.model.backbone.layers if isinstance(l, BatchNormalizationBase))
    first_input = tf_keras.Model(job.model.backbone.inputs, first.input)
    convolutions = [v for v in job.model.backbone.trainable_variables if "kernel" in v.name]
    kernels_before = [v.numpy() for v in convolutions]
    # The trainer's own input pipeline and step function, one step at a time, so that each
    # step's images are at hand (train_steps hides them); eagerly (see the module docstring).
    iterator = iter(job._training_inputs(backend.input_context()))  # pylint: disable=protected-access
    train_step = job._train_step_fn  # pylint: disable=protected-access
    steps = []
    for _ in range(STEPS):
        images, labels = next(iterator)
        before = [_moving(layer) for layer in every]
        previous = _moving(first)
        mean, variance = _global_moments(backend, first_input(images).numpy(), (0, 1, 2))
        train_step(images, labels)
        steps.append({
            "differ_between_ranks": [layer.name for layer in every
                                     if not _same_on_every_rank(backend, _moving(layer))],
            "moved": [layer.name for layer, old in zip(every, before)
                      if any(not np.array_equal(a, b) for a, b in zip(_moving(layer), old))],
            "first_error_vs_global": _error_vs_global(first, previous, mean, variance),
        })
    return {
        **describe(job),
        "steps": steps,
        "backbone_kernels_moved": sum(not np.array_equal(v.numpy(), before)
                                      for v, before in zip(convolutions, kernels_before)),
        "backbone_kernels": len(convolutions),
    }


def replicas(backend, job) -> dict:
    """The job's end-of-run check that every rank holds the same weights
    (Backend.check_replicas_equal, after which trainer.py prints "final weights fingerprints by
    rank"), against what each rank computes of its own weights here: the same fingerprints after
    the synchronized steps, and the check raising, naming them, once rank 1's first variable is
    moved (then put back)."""
    variables = job.model.variables
    own = hashlib.sha256()
    for variable in sorted(variables, key=lambda v: v.name):
        own.update(np.ascontiguousarray(variable.numpy()).tobytes())
    checked = backend.check_replicas_equal(variables)
    moved = sorted(variables, key=lambda v: v.name)[0]
    if backend.rank == 1:
        moved.assign_add(tf.ones_like(moved))
    try:
        backend.check_replicas_equal(variables)
        diverged = None
    except RuntimeError as error:
        diverged = str(error)
    if backend.rank == 1:
        moved.assign_sub(tf.ones_like(moved))
    return {"own": backend.gather_objects(own.hexdigest()), "checked": checked,
            "diverged": diverged}


def validation_losses(backend, job) -> dict:
    """The evaluator's validation losses on `job`'s model (Horovod: the training model itself),
    then one batch of the same losses without batch_norm_in_inference_mode, run eagerly (the
    same layers in the same mode; tracing it too cost each rank ~15 s of CPU): the variables
    each pass moved."""
    # pylint: disable=protected-access  (the evaluator's own pieces, as evaluate() runs them)
    variables = job.model.variables
    evaluator = job.evaluator
    evaluator._model = job.model

    def moved_by(run) -> list:
        before = [v.numpy() for v in variables]
        run()
        return [v.name for v, old in zip(variables, before) if not np.array_equal(v.numpy(), old)]

    found = {}

    def job_pass():
        found["sums"], found["images"] = evaluator._local_losses(lambda: None)

    def training_mode_pass():
        images, labels = next(iter(evaluation.validation_loss_inputs(
            job.task, evaluator._loss_data_config, backend.input_context())))
        evaluator._loss_batch(images, labels)

    moved = moved_by(job_pass)
    return {"moved": moved, "images": found["images"],
            "losses": {name: total / found["images"] for name, total in found["sums"].items()},
            "moved_in_training_mode": moved_by(training_mode_pass)}


def write_pretrained_backbone(backend, job, prefix) -> list:
    """Rank 0 writes `job`'s backbone as a pretrained checkpoint, its batch-norm weights set to
    values no training would give; returns them (every rank, in layer order)."""
    rng = np.random.default_rng(7)
    layers = _batch_norm_layers(job.model)["backbone"]
    values = [[rng.uniform(0.5, 1.5, v.shape).astype(np.float32) for v in l.weights]
              for l in layers]
    if backend.is_chief:
        for layer, arrays in zip(layers, values):
            for variable, array in zip(layer.weights, arrays):
                variable.assign(array)
        tf.train.Checkpoint(backbone=job.model.backbone).write(prefix)
    backend.gather_objects("written")
    return values


def frozen_backbone_unchanged(job, values) -> bool:
    layers = _batch_norm_layers(job.model)["backbone"]
    return all(np.array_equal(v.numpy(), a)
               for layer, arrays in zip(layers, values) for v, a in zip(layer.weights, arrays))


def main():
    tf.config.threading.set_intra_op_parallelism_threads(1)  # one core per rank, as local_run
    backend = horovod_backend.HorovodBackend()
    work_dir = os.environ["BN_TEST_OUT"]
    results = {"ranks": backend.size, "layer": {
        "sync": layer_steps(backend, backend.sync_batch_norm_layer(momentum=0.9)),
        "per_rank": layer_steps(backend, tf_keras.layers.BatchNormalization(momentum=0.9)),
    }, "averaging": averaging_ranks.averaging_step(backend)}
    sync = build_trainer(backend, "sync", work_dir)
    results["sync"] = model_steps(backend, sync)
    results["replicas"] = replicas(backend, sync)
    results["validation_losses"] = validation_losses(backend, sync)

    values = write_pretrained_backbone(backend, sync, os.path.join(work_dir, "pretrained", "ckpt"))
    frozen = build_trainer(backend, "frozen", work_dir,
                           init_checkpoint=os.path.join(work_dir, "pretrained", "ckpt"))
    restored = frozen_backbone_unchanged(frozen, values)
    results["frozen"] = model_steps(backend, frozen)
    results["frozen"]["backbone_is_the_pretrained_one"] = backend.gather_objects(
        [restored, frozen_backbone_unchanged(frozen, values)])
    if backend.is_chief:
        with open(os.path.join(work_dir, "results.json"), "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
