"""Test-only entry point: train.py whose first evaluation waits SECONDS on every rank before its
first batch, as a large val set's first batches or a slow file system would keep it without
progress: longer than test_stall.py's step budget on any machine, so that the evaluation phase is
shown to be watched on the slow phases' budget, not the step budget.

Run by `python -m maskrcnn_local.local_run --program tests/training/slow_evaluation_train.py`.
"""

import time

from maskrcnn_job import job
from maskrcnn_job.training import evaluation

SECONDS = 20
_local_results = evaluation.Evaluator._local_results
_waited = []


def _slow_first_evaluation(self, on_batch):
    if not _waited:
        _waited.append(SECONDS)
        time.sleep(SECONDS)
    return _local_results(self, on_batch)


if __name__ == "__main__":
    evaluation.Evaluator._local_results = _slow_first_evaluation
    job.main()
