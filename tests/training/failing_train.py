"""Test-only entry point: train.py with one rank failing at one step.

Run by `python -m maskrcnn_local.local_run --program tests/training/failing_train.py` with
INJECT_FAILURE=RANK:STEP; that rank (worker index under multi_worker_mirrored) raises when it
would run step STEP, as a real fault would, and the job's own failure handling takes over.
"""

import os

from maskrcnn_job import job
from maskrcnn_job.training import trainer

RANK, STEP = (int(v) for v in os.environ["INJECT_FAILURE"].split(":"))
_train_steps = trainer.Trainer.train_steps


def _failing_train_steps(self, count):
    if self.backend.rank == RANK and self.step + count >= STEP:
        losses = _train_steps(self, STEP - 1 - self.step) if STEP - 1 > self.step else []
        del losses
        raise RuntimeError(f"injected failure at step {self.step + 1}")
    return _train_steps(self, count)


if __name__ == "__main__":
    trainer.Trainer.train_steps = _failing_train_steps
    job.main()
