"""Per-rank timing program, started by cpu_scaling.py under mpirun (not a test, not the job).

Builds the job exactly as train.py does (same Trainer, same Horovod backend, same input
pipeline), then measures on every rank and reports from rank 0 as one JSON line:
  step_s        median wall time of a training step (after warm-up)
  allreduce_s   median time of one grouped allreduce of gradient-shaped tensors alone
  parse_images_per_sec_per_rank  the input pipeline alone, first pass (decode + parse)
  input_images_per_sec_per_rank  the input pipeline alone, from the cache
"""

import json
import os
import time

import numpy as np

from maskrcnn_job import job, sagemaker_env


def _median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def main():
    steps = int(os.environ.get("BENCH_STEPS", "30"))
    warmup = int(os.environ.get("BENCH_WARMUP", "5"))
    trainer = job.build_trainer(sagemaker_env.load())
    trainer.start()
    backend = trainer.backend
    per_rank_batch = trainer.hps.images_per_gpu

    # The input pipeline alone: the first pass decodes and parses every image (what an uncached
    # pipeline, as on COCO, always does); later passes read the parsed cache (compact preset).
    pipeline = trainer.training_iterator()
    batches_per_epoch = trainer.schedule.steps_per_epoch  # per rank: its share of one epoch
    next(pipeline)  # start-up: threads, file listing
    started = time.perf_counter()
    for _ in range(batches_per_epoch - 1):
        next(pipeline)
    parse_ips = (batches_per_epoch - 1) * per_rank_batch / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(batches_per_epoch):
        next(pipeline)
    input_ips = batches_per_epoch * per_rank_batch / (time.perf_counter() - started)

    iterator = trainer.training_iterator()
    for _ in range(warmup):
        trainer.train_step(*next(iterator))

    def one_step():
        losses = trainer.train_step(*next(iterator))
        losses["total_loss"].numpy()  # wait for the step to finish

    step_s = _median_seconds(one_step, steps)

    import tensorflow as tf
    gradients = [tf.zeros_like(v) for v in trainer.model.trainable_variables]
    hvd = backend._hvd  # pylint: disable=protected-access  (measuring the backend itself)
    hvd.grouped_allreduce(gradients, op=hvd.Average)  # negotiate once
    allreduce_s = _median_seconds(
        lambda: [g.numpy() for g in hvd.grouped_allreduce(gradients, op=hvd.Average)], 10)

    result = {"ranks": backend.size, "images_per_rank": per_rank_batch,
              "threads_per_rank": trainer.hps.threads_per_rank, "step_s": step_s,
              "allreduce_s": allreduce_s if backend.size > 1 else 0.0,
              "input_images_per_sec_per_rank": input_ips,
              "parse_images_per_sec_per_rank": parse_ips,
              "parameters": int(sum(np.prod(v.shape) for v in trainer.model.trainable_variables))}
    if backend.is_chief:
        print("BENCH " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
