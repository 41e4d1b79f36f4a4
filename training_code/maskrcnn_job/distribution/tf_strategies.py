"""TensorFlow's own strategies behind the seam `horovod_backend.HorovodBackend` defines.

- `MultiWorkerMirroredBackend`: synchronous; one process per host using all its GPUs; collective
  all-reduce (NCCL on GPUs, ring on CPU).
- `ParameterServerBackend`: asynchronous; variables on the PS tasks, each scheduled step runs on
  whichever worker is free and applies its own gradients; this process is the coordinator.
- `serve`: what a PS or worker task of the parameter-server cluster runs (a bare server).

Both backends' tapes give each replica's share of the mean gradient, which the optimizer sums over
the replicas that step together (all of them under MWMS; the GPUs of one worker under PS): the
same averaged update as Horovod's tape gives, so the training step is one function for the three.
"""

import json
import logging
import os
import pickle
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from maskrcnn_job.distribution import cluster_spec
from maskrcnn_job.distribution.backend import OnStep, check_fingerprints_equal, weights_fingerprint

log = logging.getLogger(__name__)


class StrategySyncBatchNormalization(tf_keras.layers.BatchNormalization):
    """tf_keras batch norm synchronized over the replicas of the strategy's step: tf_keras's own
    `synchronized=True` (an all-reduce of sum, sum of squares and count in replica context)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, synchronized=True, **kwargs)


class _ReplicaShareTape:
    """A GradientTape whose gradient() returns each replica's share of the average: divided by
    the replicas in sync. The optimizer's apply_gradients sums them over the replicas (its
    all-reduce under MWMS, the aggregation onto the PS variables under PS): the average."""

    def __init__(self, tape: tf.GradientTape):
        self._tape = tape

    def gradient(self, target, sources):
        gradients = self._tape.gradient(target, sources)
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if replicas == 1:
            return gradients
        return [None if g is None
                else tf.IndexedSlices(g.values / replicas, g.indices, g.dense_shape)
                if isinstance(g, tf.IndexedSlices) else g / replicas
                for g in gradients]


def _visible_gpus() -> list:
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    return gpus


def _plain_copy(model, build: Callable) -> Callable[[], Any]:
    """A function that returns a model built outside the strategy, holding `model`'s current
    values. Evaluation and export run on the copy: under MWMS reading a batch-norm statistic in
    cross-replica context is a collective (a hang when workers run unequal numbers of eval
    batches), under PS every read of every batch would cross the network. Built on first use, so
    that a run which ends before evaluating (a failure, a resume past its last step) never pays
    for a second model."""
    built: Dict[str, Any] = {}

    def current():
        if not built:
            copy = build()
            pairs = list(zip(copy.variables, model.variables))
            mismatched = [(a.name, b.name) for a, b in pairs if a.shape != b.shape]
            if len(copy.variables) != len(model.variables) or mismatched:
                raise RuntimeError(f"the inference copy does not match the model: {mismatched[:3]}")
            built.update(copy=copy, pairs=pairs)
        # The same order on every worker: under MWMS some reads are collectives.
        for target, source in built["pairs"]:
            target.assign(source.read_value())
        return built["copy"]

    return current


def _as_float64(value: tf.Tensor) -> tf.Tensor:
    # One dtype for the whole list (the collective packs it into one tensor); float64 holds
    # float32 values and the integer step counter exactly.
    return tf.cast(value, tf.float64)


class _StrategyBackend:
    """What both strategy backends share: one process per host with its GPUs as replicas,
    variables created in the strategy's scope, the tf_keras synchronized batch norm, gradients
    as each replica's share, and inference on a plain copy of the model."""

    strategy: tf.distribute.Strategy  # each backend's, made by its constructor
    size = property(lambda self: self.strategy.num_replicas_in_sync)
    local_rank = property(lambda self: 0)
    first_steps = 1  # every replica steps at once
    sync_batch_norm_layer = StrategySyncBatchNormalization

    def scope(self):
        return self.strategy.scope()

    def inference_model(self, model, build: Callable):
        return _plain_copy(model, build)

    def gradient_tape(self, tape: tf.GradientTape):
        return _ReplicaShareTape(tape)


class MultiWorkerMirroredBackend(_StrategyBackend):
    """MultiWorkerMirroredStrategy: one process (worker) per host, one replica per GPU (or one on
    CPU). Rank = worker index; size = replicas in sync."""

    def __init__(self, tf_config: Optional[dict]):
        """`tf_config`: this worker's cluster; None: one worker (this host alone)."""
        if tf_config is not None:
            os.environ[cluster_spec.TF_CONFIG] = json.dumps(tf_config)
        gpus = _visible_gpus()
        self.num_gpus = len(gpus)
        implementation = (tf.distribute.experimental.CommunicationImplementation.NCCL if gpus
                          else tf.distribute.experimental.CommunicationImplementation.RING)
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=implementation))
        self._workers = len(tf_config["cluster"]["worker"]) if tf_config else 1
        self._worker = int(tf_config["task"]["index"]) if tf_config else 0
        self._local_replicas = self.strategy.num_replicas_in_sync // self._workers

    rank = property(lambda self: self._worker)
    is_chief = property(lambda self: self._worker == 0)

    def input_context(self) -> tf.distribute.InputContext:
        """Evaluation: each worker reads its share, one batch at a time on its first device."""
        return tf.distribute.InputContext(num_input_pipelines=self._workers,
                                          input_pipeline_id=self._worker,
                                          num_replicas_in_sync=self.size)

    def input_seed(self, seed: int) -> int:
        return seed

    def step_runner(self, step_fn: Callable, dataset_fn: Callable) -> Callable:
        """(count) -> this worker's losses (mean over its replicas) of `count` synchronous steps;
        `dataset_fn` gives each worker's pipeline (the strategy splits it over its replicas)."""
        strategy = self.strategy
        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

        @tf.function
        def one_step(batch):
            per_replica = strategy.run(step_fn, args=batch)
            return {name: strategy.experimental_local_results(value)
                    for name, value in per_replica.items()}

        def run(count: int, on_step: OnStep = None) -> List[Dict[str, np.ndarray]]:
            results = []
            for _ in range(count):
                losses = one_step(next(iterator))
                results.append({name: np.mean([v.numpy() for v in values])
                                for name, values in losses.items()})
                if on_step:
                    on_step(len(results))
            return results

        return run

    checkpoint_options = None

    def checkpoint_directory(self, directory: str) -> str:
        """Every worker saves (reading batch-norm statistics is a collective); only the chief's
        copy goes to `directory`, the others to a scratch directory removed after the save."""
        if self.is_chief:
            return directory
        return tempfile.mkdtemp(prefix=f"checkpoint-worker-{self._worker}-")

    def _replica_all_reduce(self, variables: Sequence[tf.Variable], first_replica_only: bool):
        strategy = self.strategy
        op = tf.distribute.ReduceOp.SUM if first_replica_only else tf.distribute.ReduceOp.MEAN

        @tf.function
        def reduce():
            def replica_fn():
                context = tf.distribute.get_replica_context()
                values = [_as_float64(tf.identity(v)) for v in variables]
                if first_replica_only:
                    first = tf.equal(context.replica_id_in_sync_group, 0)
                    values = [tf.where(first, v, tf.zeros_like(v)) for v in values]
                return context.all_reduce(op, values)
            return strategy.experimental_local_results(strategy.run(replica_fn))[0]

        for variable, value in zip(variables, reduce()):
            variable.assign(tf.cast(value, variable.dtype))

    def broadcast_from_chief(self, variables: Sequence[tf.Variable]) -> None:
        """The chief's first replica's values everywhere: a sum to which only it adds (exact)."""
        self._replica_all_reduce(list(variables), first_replica_only=True)

    def average_variables(self, variables: Sequence[tf.Variable]) -> None:
        self._replica_all_reduce(list(variables), first_replica_only=False)

    def mean(self, value: float) -> float:
        strategy = self.strategy
        result = strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.MEAN, tf.constant(value, tf.float64)))
        return float(strategy.experimental_local_results(result)[0])

    def gather_objects(self, obj: Any) -> List[Any]:
        """Every worker's `obj`, in worker order, on every worker (pickled, sent as int64)."""
        payload = pickle.dumps(obj)
        words = np.frombuffer(payload + b"\0" * (-len(payload) % 8), dtype=np.int64)
        strategy = self.strategy

        def gather(value):
            result = strategy.run(lambda: tf.distribute.get_replica_context().all_gather(
                value, axis=0))
            return strategy.experimental_local_results(result)[0].numpy()

        lengths = gather(tf.constant([len(payload)], tf.int64))
        longest = int(lengths.max() + 7) // 8
        padded = np.zeros((1, longest), np.int64)
        padded[0, :len(words)] = words
        rows = gather(tf.constant(padded))
        # Every local replica contributed a copy; replica ids are worker-major.
        firsts = range(0, len(lengths), self._local_replicas)
        return [pickle.loads(rows[i].tobytes()[:int(lengths[i])]) for i in firsts]

    def check_replicas_equal(self, variables: Sequence[tf.Variable]) -> List[str]:
        return check_fingerprints_equal(self.gather_objects(weights_fingerprint(variables)),
                                        "worker")


class ParameterServerBackend(_StrategyBackend):
    """ParameterServerStrategy from the coordinator (the chief): the only process that runs this
    program. Steps are scheduled on the workers, which apply their own gradients to the variables
    on the PS tasks without waiting for each other."""

    def __init__(self, tf_config: dict):
        os.environ[cluster_spec.TF_CONFIG] = json.dumps(tf_config)
        self.num_gpus = len(_visible_gpus())  # the coordinator evaluates on them
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        self.strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
        self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(self.strategy)
        # Each worker builds the step's graph on its first step, not when the chief traces it: one
        # first step per worker, scheduled together, so each idle worker takes one (a worker's
        # first step in the step budget stalled a 2-host run on a loaded machine).
        self.first_steps = len(tf_config["cluster"]["worker"])

    rank = property(lambda self: 0)
    # `size`: the replicas of one worker; they step together, the workers do not.
    is_chief = property(lambda self: True)

    def input_context(self) -> tf.distribute.InputContext:
        return tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                          num_replicas_in_sync=self.size)

    def input_seed(self, seed: int) -> Optional[int]:
        """None: every worker runs the same input function, so one seed would feed them all the
        same images in the same order; unseeded, each worker shuffles its own way."""
        del seed
        return None

    def step_runner(self, step_fn: Callable, dataset_fn: Callable) -> Callable:
        """(count) -> the losses of `count` steps, scheduled on whichever workers are free (a
        step on a worker that fails is run again on another one); returns when all are done."""
        strategy, coordinator = self.strategy, self.coordinator
        # The batch shapes, static: Mask R-CNN's samplers need a static batch dimension, and the
        # elements of a per-worker iterator arrive without one.
        spec = dataset_fn(self.input_context()).element_spec
        iterator = iter(coordinator.create_per_worker_dataset(
            strategy.distribute_datasets_from_function(dataset_fn)))

        def replica_step(images, labels):
            images, labels = tf.nest.map_structure(
                lambda t, s: tf.ensure_shape(t, s.shape), (images, labels), spec)
            return step_fn(images, labels)

        @tf.function
        def one_step(per_worker_iterator):
            per_replica = strategy.run(replica_step, args=next(per_worker_iterator))
            return {name: strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None)
                    for name, value in per_replica.items()}

        def run(count: int, on_step: OnStep = None) -> List[Dict[str, np.ndarray]]:
            scheduled = [coordinator.schedule(one_step, args=(iterator,)) for _ in range(count)]
            results = []
            for remote in scheduled:  # in order; fetch() waits for that step
                results.append({name: np.asarray(value) for name, value in remote.fetch().items()})
                if on_step:
                    on_step(len(results))
            coordinator.join()
            return results

        return run

    def checkpoint_directory(self, directory: str) -> str:
        return directory

    # The variables live on the PS tasks, which would each write (and read) their shards on
    # their own host, where /opt/ml/checkpoints is not the chief's: every byte goes through the
    # chief instead (TensorFlow's io_device, meant for this).
    checkpoint_options = tf.train.CheckpointOptions(
        experimental_io_device="/job:chief/replica:0/task:0/device:CPU:0")

    def broadcast_from_chief(self, variables: Sequence[tf.Variable]) -> None:
        """One copy of each variable, on the PS tasks: nothing to broadcast."""

    def average_variables(self, variables: Sequence[tf.Variable]) -> None:
        """One copy of each variable: nothing to average."""

    def mean(self, value: float) -> float:
        return float(value)

    def gather_objects(self, obj: Any) -> List[Any]:
        return [obj]

    def check_replicas_equal(self, variables: Sequence[tf.Variable]) -> List[str]:
        return [weights_fingerprint(variables)]


def serve(tf_config: dict, threads: int = 0) -> None:
    """A PS or worker task: a bare TensorFlow server until the process is stopped. The PS keeps
    to the CPU (a GPU shared with the host's worker would be unsafe and is not needed)."""
    task = cluster_spec.task_of(tf_config)
    assert task is not None  # a PS or worker task has its TF_CONFIG
    task_type, index = task
    if task_type == "ps":
        tf.config.set_visible_devices([], "GPU")
    else:
        _visible_gpus()
    # Intra-op threads only: a step's remote receives block inter-op threads while they wait,
    # and with a single one the step on this worker never ends (seen on 2 emulated hosts).
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads)
    server = tf.distribute.Server(
        tf.train.ClusterSpec(tf_config["cluster"]), job_name=task_type, task_index=index,
        protocol="grpc", config=config, start=True)
    log.info("%s:%d serving at %s", task_type, index, server.target)
    server.join()
