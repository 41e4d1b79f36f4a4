"""Test-only: one synchronous training step through a distribution backend, next to the step
that one process taking every replica's images would make (numpy).

What a data-parallel backend must get right for the synchronous distributions: the update is the
gradient AVERAGED over every replica's images (not summed), at the peak learning rate the
schedule scales with the replicas (`base_learning_rate` x replicas). Since that peak over the
average equals one process's step on all the images at the same peak, the step is compared with
numpy's: w1 = w0 - peak x mean gradient of the squared error over the whole batch. The model is a
linear layer (its gradient is exact in closed form); the backend, its gradient tape, input
sharding and step runner, Model Garden's optimizer and the job's Schedule are the job's own.

Run by test_batch_norm.py's mpirun (Horovod, through batch_norm_ranks.py) and, as a program, by
test_gradient_averaging.py on 2 TF_CONFIG workers (MultiWorkerMirroredStrategy): the chief writes
$AVERAGING_OUT.
"""

import json
import os
import time

import numpy as np
import tensorflow as tf
import tf_keras
from official.modeling import optimization

from maskrcnn_contract import hyperparameters
from maskrcnn_job.training.schedule import Schedule

IMAGES_PER_REPLICA = 2
BASE_LEARNING_RATE = 0.01
FEATURES = 6


def averaging_step(backend) -> dict:
    """One step of the backend on IMAGES_PER_REPLICA examples per replica; the update it made
    and numpy's update for the same step on all of them."""
    hps = hyperparameters.parse({
        "images_per_gpu": IMAGES_PER_REPLICA, "base_learning_rate": BASE_LEARNING_RATE,
        "warmup_steps": 0, "lr_decay_epochs": "", "max_steps": 1})
    total = IMAGES_PER_REPLICA * backend.size
    schedule = Schedule.build(hps, num_train_images=total, num_replicas=backend.size)
    rng = np.random.default_rng(11)
    inputs = rng.normal(size=(total, FEATURES)).astype(np.float32)
    targets = rng.normal(size=(total, 1)).astype(np.float32)
    start = rng.normal(size=(FEATURES, 1)).astype(np.float32)
    with backend.scope():
        layer = tf_keras.layers.Dense(1, use_bias=False,
                                      kernel_initializer=tf_keras.initializers.Constant(start))
        model = tf_keras.Sequential([tf_keras.Input((FEATURES,)), layer])
        factory = optimization.OptimizerFactory(optimization.OptimizationConfig(
            schedule.optimization_config(hps.momentum)))
        optimizer = factory.build_optimizer(factory.build_learning_rate())
        optimizer._create_all_weights(model.trainable_variables)  # as the trainer does

    def step_fn(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        gradients = backend.gradient_tape(tape).gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return {"loss": loss}

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        per_replica = context.get_per_replica_batch_size(schedule.global_batch)
        return (tf.data.Dataset.from_tensor_slices((inputs, targets))
                .shard(context.num_input_pipelines, context.input_pipeline_id)
                .batch(per_replica).repeat())

    backend.broadcast_from_chief(model.trainable_variables)
    backend.step_runner(step_fn, dataset_fn)(1)
    update = layer.kernel.numpy() - start
    # d/dw mean((x w - y)^2) = 2/n x^T (x w - y), over every replica's examples.
    gradient = 2.0 / total * inputs.T.astype(np.float64) @ (inputs @ start - targets)
    expected = -schedule.peak_learning_rate * gradient
    return {"replicas": backend.size, "peak_learning_rate": schedule.peak_learning_rate,
            "update": update.ravel().tolist(), "expected_update": expected.ravel().tolist(),
            "relative_error": float(np.max(np.abs(update - expected)) / np.max(np.abs(expected)))}


def main() -> None:
    """One MultiWorkerMirroredStrategy worker of the cluster in $TF_CONFIG."""
    from maskrcnn_job.distribution import cluster_spec, tf_strategies

    tf.config.threading.set_intra_op_parallelism_threads(1)
    backend = tf_strategies.MultiWorkerMirroredBackend(cluster_spec.current())
    result = averaging_step(backend)
    if backend.is_chief:
        with open(os.environ["AVERAGING_OUT"], "w", encoding="utf-8") as f:
            json.dump(result, f)
    backend.gather_objects("done")  # no worker leaves while the other still reduces
    # The gather can end on the chief while the other worker still fetches the chief's part:
    # the chief leaves last, once each other worker says its gather ended (job.run does the same
    # through the workers' status servers; "Socket closed" on worker 1 in make check, 2026-12-07).
    left = os.path.join(os.path.dirname(os.environ["AVERAGING_OUT"]), "left-{}")
    if backend.is_chief:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                os.path.exists(left.format(index)) for index in range(1, backend.size)):
            time.sleep(0.05)
    else:
        with open(left.format(backend.rank), "w", encoding="utf-8"):
            pass
    os._exit(0)  # as job.run: TensorFlow's coordination service would wait at exit


if __name__ == "__main__":
    main()
