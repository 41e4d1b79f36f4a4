"""The seam between the training loop and distribution: what the trainer may ask of a backend.

The trainer (training/trainer.py) imports no distribution code; job.py hands it one `Backend`:
`horovod_backend.HorovodBackend`, `tf_strategies.MultiWorkerMirroredBackend` or
`tf_strategies.ParameterServerBackend`. Horovod's TF2 example
(examples/tensorflow2/tensorflow2_mnist.py) is the whole story in six steps; here is where each
of them sits:

1. `hvd.init()`                          -> the backend's constructor (a strategy: its cluster)
2. pin one GPU per local rank            -> the constructor (`num_gpus`: what this process sees)
3. scale the learning rate by the size   -> `size`, which the schedule multiplies by
4. `hvd.DistributedGradientTape(tape)`   -> `gradient_tape`: gradients averaged over `size`
5. `hvd.broadcast_variables(..., 0)`     -> `broadcast_from_chief`, once, before the first step
6. checkpoints and export on rank 0      -> `is_chief`, `checkpoint_directory`

The rest carries what a Mask R-CNN job needs beyond MNIST: synchronized batch norm, each
replica's share of the input, steps run as the backend schedules them, evaluation on a model
outside the strategy, and the collectives the loop's bookkeeping needs.
"""

import hashlib
from typing import Any, Callable, ContextManager, Dict, List, Optional, Protocol, Sequence

import numpy as np

OnStep = Optional[Callable[[int], None]]  # step_runner's progress callback: steps finished


class Backend(Protocol):
    """What a distribution backend gives the trainer; each method's docstring says what for."""

    # Who this process is (steps 1, 2, 6). Read-only: the backends make several properties.
    @property
    def rank(self) -> int: ...  # this process's index in the job (a strategy's worker index)
    @property
    def size(self) -> int: ...  # replicas whose images make one update (step 3 scales by it)
    @property
    def local_rank(self) -> int: ...  # index on this host
    @property
    def is_chief(self) -> bool: ...  # restores, logs, keeps the checkpoints, exports (step 6)
    @property
    def num_gpus(self) -> int: ...  # GPUs this process uses
    @property
    def sync_batch_norm_layer(self) -> type: ...  # the tf_keras batch norm over the global batch
    @property
    def checkpoint_options(self) -> Any: ...  # tf.train.CheckpointOptions for both, or None
    # Steps whose first run builds the step's graph where it runs: 1, or one per PS worker (the
    # trainer runs that many first, in the stall watchdog's slow phase `first step`).
    @property
    def first_steps(self) -> int: ...

    def scope(self) -> ContextManager:
        """Where the model and optimizer are created (a strategy's scope; nothing for Horovod)."""

    def input_seed(self, seed: int) -> Optional[int]:
        """The seed of the training input's shuffling (None: each worker shuffles its own way)."""

    def input_context(self) -> Any:
        """This process's `tf.distribute.InputContext` for the evaluation input."""

    def step_runner(self, step_fn: Callable, dataset_fn: Callable) -> Callable[..., List[Dict]]:
        """A function (count, on_step=None) -> the losses of `count` steps, each running
        `step_fn(images, labels)` on every replica with batches from `dataset_fn(input_context)`
        (step 4 runs inside `step_fn`); `on_step(n)` after the n-th of them finished (the stall
        watchdog's progress)."""

    def gradient_tape(self, tape: Any) -> Any:
        """`tape`, whose gradient() the optimizer's apply_gradients turns into the update of the
        gradients averaged over `size` replicas (step 4)."""

    def broadcast_from_chief(self, variables: Sequence[Any]) -> None:
        """The chief's values of `variables` on every replica (step 5; once, before step 1)."""

    def checkpoint_directory(self, directory: str) -> Optional[str]:
        """Where this process writes its part of a checkpoint of `directory` (None: nowhere;
        another directory: a copy that the collective save needs and nobody keeps) (step 6)."""

    def inference_model(self, model: Any, build: Callable) -> Callable[[], Any]:
        """A function returning the model that evaluation and export run, holding `model`'s
        current values (`build` makes a plain copy outside the strategy)."""

    def average_variables(self, variables: Sequence[Any]) -> None:
        """Makes per-replica state (batch-norm moving statistics) equal everywhere."""

    def mean(self, value: float) -> float:
        """The mean of `value` over the processes (a collective: every one calls it)."""

    def gather_objects(self, obj: Any) -> List[Any]:
        """Every process's `obj`, in rank order, on every process."""

    def check_replicas_equal(self, variables: Sequence[Any]) -> List[str]:
        """Every process's `weights_fingerprint`, in rank order; raises if they differ."""


def weights_fingerprint(variables: Sequence[Any]) -> str:
    """SHA-256 of the variables' values, in name order: equal on every replica of one model."""
    digest = hashlib.sha256()
    for variable in sorted(variables, key=lambda v: v.name):
        digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest()


def check_fingerprints_equal(fingerprints: List[str], per: str) -> List[str]:
    if len(set(fingerprints)) != 1:
        raise RuntimeError(f"replicas diverged: weight fingerprints per {per} {fingerprints}")
    return fingerprints
