"""Data parallelism through Horovod: the only module that imports it.

`HorovodBackend` is one `backend.Backend` (the seam the trainer talks to): one process (rank)
per GPU, gradients averaged by Horovod's allreduce. tf_strategies.py holds TensorFlow's own.
"""

import contextlib
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from maskrcnn_job.distribution.backend import OnStep, check_fingerprints_equal, weights_fingerprint


class HorovodSyncBatchNormalization(tf_keras.layers.BatchNormalization):
    """tf_keras batch norm whose training statistics are those of the global batch: each rank's
    sum, sum of squares and count are summed over the ranks with one Horovod allreduce in the
    forward pass (gradients flow back through it), as horovod.tensorflow.sync_batch_norm does;
    that class subclasses TensorFlow's default Keras (3) layer; Model Garden builds tf_keras ones.

    Overrides `_calculate_mean_and_var`, as tf_keras's SyncBatchNormalization does for
    tf.distribute; `synchronized=True` keeps the layer off fused batch norm, which would not call
    it. Inference (and a layer with trainable=False) uses the moving statistics: no allreduce.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, synchronized=True, **kwargs)

    def _calculate_mean_and_var(self, inputs, reduction_axes, keep_dims, mask=None):
        import horovod.tensorflow as hvd

        if mask is not None:
            raise ValueError(f"{self.name}: masked inputs are not supported")
        if hvd.size() == 1:
            return self._no_sync_calculate_mean_and_var(inputs, reduction_axes, keep_dims)
        # float32 under mixed precision too: call() casts `inputs` to the variables' dtype.
        local_sum = tf.reduce_sum(inputs, axis=reduction_axes, keepdims=True)
        local_squared_sum = tf.reduce_sum(tf.square(inputs), axis=reduction_axes, keepdims=True)
        local_count = tf.cast(tf.size(inputs, tf.int64) // tf.size(local_sum, tf.int64),
                              inputs.dtype)
        total_sum, total_squared_sum, total_count = tf.unstack(hvd.allreduce(
            tf.stack([local_sum, local_squared_sum, tf.fill(tf.shape(local_sum), local_count)]),
            op=hvd.Sum))
        mean = total_sum / total_count
        # Var = E[x^2] - E[x]^2, clipped at 0 against rounding.
        variance = tf.maximum(total_squared_sum / total_count - tf.square(mean), 0.0)
        if not keep_dims:
            mean = tf.squeeze(mean, reduction_axes)
            variance = tf.squeeze(variance, reduction_axes)
        return mean, variance


class HorovodBackend:
    """Horovod over MPI or Gloo: one process (rank) per GPU, or per CPU slot without GPUs."""

    first_steps = 1

    def __init__(self, fp16_allreduce: bool = False):
        import horovod.tensorflow as hvd

        self._hvd = hvd
        hvd.init()
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            # One GPU per local rank; memory growth so that TF does not grab the whole card early.
            tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
            for gpu in tf.config.get_visible_devices("GPU"):
                tf.config.experimental.set_memory_growth(gpu, True)
        self.num_gpus = len(gpus)
        self._compression = hvd.Compression.fp16 if fp16_allreduce else hvd.Compression.none

    @property
    def rank(self) -> int:
        return self._hvd.rank()

    @property
    def size(self) -> int:
        return self._hvd.size()

    @property
    def local_rank(self) -> int:
        return self._hvd.local_rank()

    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    def scope(self):
        return contextlib.nullcontext()

    def input_seed(self, seed: int) -> int:
        return seed  # each rank reads its own files, in an order that resumes can vary

    @property
    def sync_batch_norm_layer(self) -> type:
        """The tf_keras layer class for batch norm over the global batch (all ranks)."""
        return HorovodSyncBatchNormalization

    def input_context(self) -> tf.distribute.InputContext:
        """Each rank reads its own 1/size of the files (or of the records if files are few)."""
        return tf.distribute.InputContext(
            num_input_pipelines=self.size, input_pipeline_id=self.rank,
            num_replicas_in_sync=self.size)

    def step_runner(self, step_fn: Callable, dataset_fn: Callable) -> Callable:
        """(count) -> this rank's losses of each of `count` synchronous steps."""
        iterator = iter(dataset_fn(self.input_context()))
        step = tf.function(step_fn)

        def run(count: int, on_step: OnStep = None) -> List[Dict[str, np.ndarray]]:
            results = []
            for _ in range(count):
                losses = step(*next(iterator))
                results.append({name: value.numpy() for name, value in losses.items()})
                if on_step:
                    on_step(len(results))
            return results

        return run

    checkpoint_options = None  # the ranks read and write their own files

    def checkpoint_directory(self, directory: str) -> Optional[str]:
        """Rank 0 writes the checkpoints; every rank holds the same state."""
        return directory if self.is_chief else None

    def inference_model(self, model, build: Callable) -> Callable[[], Any]:
        """Evaluation and export use the training model itself."""
        del build
        return lambda: model

    def gradient_tape(self, tape: tf.GradientTape) -> tf.GradientTape:
        """The tape's gradient() returns gradients averaged over all ranks."""
        return self._hvd.DistributedGradientTape(tape, compression=self._compression)

    def broadcast_from_chief(self, variables: Sequence[tf.Variable]) -> None:
        self._hvd.broadcast_variables(list(variables), root_rank=0)

    def average_variables(self, variables: Sequence[tf.Variable]) -> None:
        """Makes per-rank state (batch-norm moving statistics) equal on every rank."""
        variables = list(variables)
        averaged = self._hvd.grouped_allreduce([v.read_value() for v in variables],
                                               op=self._hvd.Average)
        for variable, value in zip(variables, averaged):
            variable.assign(value)

    def mean(self, value: float) -> float:
        return float(self._hvd.allreduce(tf.constant(value, tf.float64), op=self._hvd.Average))

    def gather_objects(self, obj: Any) -> List[Any]:
        """Every rank's `obj`, in rank order, on every rank (pickled)."""
        return self._hvd.allgather_object(obj)

    def check_replicas_equal(self, variables: Sequence[tf.Variable]) -> List[str]:
        return check_fingerprints_equal(self.gather_objects(weights_fingerprint(variables)), "rank")
