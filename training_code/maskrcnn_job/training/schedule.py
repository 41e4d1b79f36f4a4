"""A run's step arithmetic, built once: how long, how fast the learning rate moves, and when the
loop logs, saves and evaluates. Pure Python; the experiment config and the trainer both read it.
"""

import dataclasses
import math
from typing import List

from maskrcnn_contract.hyperparameters import Hyperparameters


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
        global_batch = hps.images_per_gpu * num_replicas
        steps_per_epoch = max(1, math.ceil(num_train_images / global_batch))
        total = hps.max_steps or max(1, round(hps.epochs * steps_per_epoch))
        boundaries = [round(e * steps_per_epoch) for e in hps.lr_decay_epoch_list]
        return cls(
            global_batch=global_batch,
            steps_per_epoch=steps_per_epoch,
            total_steps=total,
            # Linear scaling with the number of replicas, as in Horovod's examples (Goyal et al.).
            peak_learning_rate=hps.base_learning_rate * num_replicas,
            warmup_steps=min(hps.warmup_steps, total),
            decay_boundaries=[b for b in boundaries if 0 < b < total],
            eval_every_steps=round(hps.eval_every_epochs * steps_per_epoch),
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
