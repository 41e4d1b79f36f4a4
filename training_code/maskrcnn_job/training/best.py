"""The best evaluation so far by the run's objective, and when it is time to stop early.

Pure Python: the trainer's chief updates it after each evaluation and shares its decisions with
the other ranks. Its state lives beside the best checkpoint (BEST_DIR under the checkpoint
directory SageMaker syncs: apart from the rolling ckpt-N, which resume reads and the checkpoint
manager deletes), so that a resumed job remembers the best so far and how long ago it was.
docs/evaluation.md, "The best checkpoint and early stopping".
"""

import dataclasses
import json
import os
from typing import List, Optional, Tuple

from maskrcnn_contract import metrics

BEST_DIR = "best"  # under the checkpoint directory
STATE_FILE = "best.json"
REPORT_DIR = "evaluation"  # the best evaluation's report, kept with its checkpoint


@dataclasses.dataclass
class Best:
    """The best evaluation of `metric` so far (step None: none yet), and the steps of the
    evaluations since it that did not improve on it."""

    metric: str
    min_delta: float = 0.0
    step: Optional[int] = None
    value: Optional[float] = None
    not_improved: List[int] = dataclasses.field(default_factory=list)

    def __post_init__(self):
        # KeyError for a figure that is no objective (the hyperparameter's check refuses it first).
        self.maximize = metrics.objective_direction(self.metric) == metrics.MAXIMIZE

    @property
    def evaluations_since(self) -> int:
        return len(self.not_improved)

    def improves(self, value: float) -> bool:
        """Whether `value` beats the best by more than min_delta (the first one always does)."""
        if self.value is None:
            return True
        gain = value - self.value if self.maximize else self.value - value
        return gain > self.min_delta

    def update(self, step: int, value: float) -> bool:
        """Records the evaluation of `step`; True when it is the new best."""
        if self.improves(value):
            self.step, self.value, self.not_improved = step, value, []
            return True
        self.not_improved.append(step)
        return False

    def forget_after(self, step: int) -> None:
        """Drops the evaluations after `step`: a job that resumes from `step` makes them again.
        (The best itself stays, even if later: its checkpoint and its figure are real.)"""
        self.not_improved = [s for s in self.not_improved if s <= step]

    def should_stop(self, patience: int) -> bool:
        """`patience` evaluations in a row without improvement (0: never)."""
        return bool(patience) and self.evaluations_since >= patience

    def describe(self) -> str:
        if self.step is None:
            return f"none ({self.metric} not computed yet)"
        return f"step {self.step} ({self.metric} {self.value:.4f})"

    def state(self) -> dict:
        return {"metric": self.metric, "step": self.step, "value": self.value,
                "not_improved": self.not_improved}


def state_file(checkpoint_dir: str) -> str:
    return os.path.join(checkpoint_dir, BEST_DIR, STATE_FILE)


def write(checkpoint_dir: str, best: Best) -> None:
    """best.json, replaced whole (a job stopped while writing leaves the previous one)."""
    path = state_file(checkpoint_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".incomplete", "w", encoding="utf-8") as f:
        json.dump(best.state(), f, indent=1)
    os.replace(path + ".incomplete", path)


def read(checkpoint_dir: str, metric: str, min_delta: float) -> Tuple[Best, Optional[str]]:
    """The best of an earlier job of this run (resume), and why it is not used when it is not
    (None when it is, or when there is none): it was chosen by another objective_metric."""
    best = Best(metric, min_delta)
    path = state_file(checkpoint_dir)
    if not os.path.isfile(path):
        return best, None
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    if saved.get("metric") != metric:
        return best, (f"the best checkpoint in {os.path.dirname(path)} (step {saved.get('step')}) "
                      f"was chosen by {saved.get('metric')}, and this job's objective_metric is "
                      f"{metric}: it is replaced by this job's first evaluation")
    return dataclasses.replace(best, step=saved["step"], value=saved["value"],
                               not_improved=list(saved["not_improved"])), None
