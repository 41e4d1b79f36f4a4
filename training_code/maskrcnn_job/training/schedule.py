"""A run's step arithmetic, built once: how long, how fast the learning rate moves, and when the
loop logs, saves and evaluates. Pure Python; the experiment config and the trainer both read it.
"""

import dataclasses
import logging
from typing import List

from maskrcnn_contract import hyperparameters
from maskrcnn_contract.hyperparameters import HyperparameterError, Hyperparameters

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Training length, learning rate and the loop's periods, in steps, for a number of replicas."""

    global_batch: int
    steps_per_epoch: int
    total_steps: int
    peak_learning_rate: float
    warmup_steps: int
    decay_boundaries: List[int]
    eval_every_steps: int        # 0: only at the end
    checkpoint_every_steps: int
    log_every_steps: int

    @classmethod
    def build(cls, hps: Hyperparameters, num_train_images: int, num_replicas: int) -> "Schedule":
        length = hyperparameters.run_length(hps, num_train_images, num_replicas)
        global_batch, steps_per_epoch = length.global_batch, length.steps_per_epoch
        total = length.total_steps
        decays = hps.lr_decay_epoch_list
        if hps.max_steps:
            # The drops keep their place in the schedule: the same fraction of the steps as of
            # `epochs` (the contract refuses a drop at or past `epochs`).
            boundaries = [round(e / hps.epochs * total) for e in decays]
            if decays:
                log.info("lr_decay_epochs=%s of epochs=%g: the learning rate drops at steps %s "
                         "of max_steps=%d", hps.lr_decay_epochs, hps.epochs, boundaries, total)
        else:
            boundaries = [round(e * steps_per_epoch) for e in decays]
        if any(not 0 < b < total for b in boundaries) or len(set(boundaries)) < len(boundaries):
            raise HyperparameterError(
                f"hyperparameter lr_decay_epochs={hps.lr_decay_epochs!r}: the drops fall at steps "
                f"{boundaries} of a {total}-step run ({steps_per_epoch} steps per epoch), and each "
                "must come after step 0, before the last, and at a step of its own; train longer, "
                "or set lr_decay_epochs= (empty) for a constant rate")
        # A warmup past a run of `epochs`, an evaluation period under one step: refused, not
        # replaced (the contract's rule, which the launcher applies before it sends).
        for warning in hyperparameters.check_run_length(hps, length):
            log.warning(warning)
        return cls(
            global_batch=global_batch,
            steps_per_epoch=steps_per_epoch,
            total_steps=total,
            # Linear scaling with the number of replicas, as in Horovod's examples (Goyal et al.).
            peak_learning_rate=hps.base_learning_rate * num_replicas,
            warmup_steps=hyperparameters.warmup_steps_used(hps, length),
            decay_boundaries=boundaries,
            eval_every_steps=hyperparameters.eval_every_steps(hps, length),
            checkpoint_every_steps=hps.checkpoint_every_steps,
            log_every_steps=hps.log_every_steps,
        )

    def epoch(self, step: int) -> float:
        return step / self.steps_per_epoch

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
