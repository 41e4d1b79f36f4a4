"""Test-only entry point: train.py with one rank failing at one step.

Run by `python -m maskrcnn_job.local_run --program tests/training/failing_train.py` with
INJECT_FAILURE=RANK:STEP; that rank raises in its training step, as a real fault would, and the
job's own failure handling takes over.
"""

import os

from maskrcnn_job import job, trainer

RANK, STEP = (int(v) for v in os.environ["INJECT_FAILURE"].split(":"))
_train_step = trainer.Trainer.train_step


def _failing_train_step(self, images, labels):
    if self.backend.rank == RANK and self.step + 1 >= STEP:
        raise RuntimeError(f"injected failure at step {self.step + 1}")
    return _train_step(self, images, labels)


if __name__ == "__main__":
    trainer.Trainer.train_step = _failing_train_step
    job.main()
