"""Timing program, run in place of train.py by benchmarks/cpu_scaling.py through
`python -m maskrcnn_local.local_run --program benchmarks/step_timing.py` (not a test, not the job).

It is the job's own entry point, `job.main` (logging, failure file, exit status), with `job.run`
replaced: the processes that train build the trainer exactly as train.py does (same backend,
input pipeline, step) and time it; under parameter_server the processes that do not (each host's
supervisor, the PS and worker tasks, which parameter_server_host.py starts as this program again)
run the job's own code. On emulated hosts this file is copied into /opt/ml/code, so it imports
only what the image has. The chief prints one line, `BENCH {json}`:
  workers         processes that compute (Horovod ranks, MWMS workers, PS workers)
  images_per_step images of one update (all replicas of a synchronous step; one PS worker's batch)
  images_per_sec  all workers together, over the timed steps
  step_s          a worker's step: wall time per step (synchronous), or wall time x workers / steps
                  (parameter_server, whose workers step at the same time)
  comm_s          one step's communication alone, median of BENCH_COMM_REPEATS (0 for one
                  synchronous worker):
                  horovod: a grouped allreduce of gradient-shaped zeros (fp16 if fp16_allreduce);
                  multi_worker_mirrored: the strategy's all-reduce of the same, in replica context;
                  parameter_server: one worker reading every trainable variable from the PS tasks
                  and sending a gradient-shaped update back (what a step moves), one at a time
  parse_ / input_images_per_sec_per_rank  (BENCH_INPUT=1) the input pipeline alone, first pass
                  (decode + parse) and from its cache
Settings (environment): BENCH_WARMUP (5) steps, then BENCH_STEPS (30) timed in chunks of
BENCH_CHUNK (10), step_s from the median chunk.
"""

import json
import os
import sys
import time

import numpy as np

from maskrcnn_job import job
from maskrcnn_job.distribution import cluster_spec

_job_run = job.run


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def _horovod_communication(trainer, hps):
    import horovod.tensorflow as hvd  # the backend initialized it
    import tensorflow as tf

    gradients = [tf.zeros_like(v) for v in trainer.model.trainable_variables]
    compression = hvd.Compression.fp16 if hps.fp16_allreduce else hvd.Compression.none
    return lambda: [g.numpy() for g in hvd.grouped_allreduce(
        gradients, op=hvd.Average, compression=compression)]


def _mirrored_communication(trainer, hps):
    del hps
    import tensorflow as tf

    strategy, variables = trainer.backend.strategy, trainer.model.trainable_variables

    @tf.function
    def all_reduce():
        def replica_fn():
            return tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, [tf.zeros_like(v) for v in variables])
        return strategy.run(replica_fn)

    return lambda: [strategy.experimental_local_results(t)[0].numpy() for t in all_reduce()]


def _parameter_server_communication(trainer, hps):
    del hps
    import tensorflow as tf

    strategy, variables = trainer.backend.strategy, trainer.model.trainable_variables
    coordinator = trainer.backend.coordinator

    @tf.function
    def pull_and_push(scale):
        # Each read crosses from its PS to the worker; the product is computed there (an
        # argument, so nothing folds it) and sent back to the PS that holds the variable.
        def replica_fn():
            for variable in variables:
                variable.assign_add(variable.read_value() * scale)
        strategy.run(replica_fn)

    zero = tf.constant(0.0)

    def one():
        coordinator.schedule(pull_and_push, args=(zero,))
        coordinator.join()

    return one


COMMUNICATION = {"horovod": _horovod_communication,
                 "multi_worker_mirrored": _mirrored_communication,
                 "parameter_server": _parameter_server_communication}


def _input_pipeline(trainer) -> dict:
    """The input pipeline alone: the first pass decodes and parses every image (what an uncached
    pipeline, as on COCO, always does); later passes read the parsed cache (compact preset)."""
    dataset = trainer.task.build_inputs(trainer.config.task.train_data,
                                        input_context=trainer.backend.input_context())
    pipeline = iter(dataset)
    batches = trainer.schedule.steps_per_epoch  # per rank: its share of one epoch
    per_rank = trainer.schedule.global_batch // trainer.backend.size
    next(pipeline)  # start-up: threads, file listing
    started = time.perf_counter()
    for _ in range(batches - 1):
        next(pipeline)
    parse = (batches - 1) * per_rank / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(batches):
        next(pipeline)
    cached = batches * per_rank / (time.perf_counter() - started)
    return {"parse_images_per_sec_per_rank": parse, "input_images_per_sec_per_rank": cached}


def _timed_run(env) -> None:
    hps = job.read_hyperparameters(env)
    if (hps.distribution == "parameter_server"
            and cluster_spec.task_of(cluster_spec.current()) != ("chief", 0)):
        _job_run(env)  # a host's supervisor, or a PS or worker task: the job's own code
        return
    steps = int(os.environ.get("BENCH_STEPS", "30"))
    chunk = min(steps, int(os.environ.get("BENCH_CHUNK", "10")))
    trainer = job.build_trainer(env, hps)
    backend = trainer.backend
    config = cluster_spec.current()
    workers = len(config["cluster"]["worker"]) if config else backend.size
    result = {"distribution": hps.distribution, "workers": workers, "hosts": len(env.hosts),
              "threads_per_rank": hps.threads_per_rank,
              "images_per_step": trainer.schedule.global_batch,
              "fp16_allreduce": hps.fp16_allreduce, "batch_norm": hps.batch_norm,
              "parameters": int(sum(np.prod(v.shape) for v in trainer.model.trainable_variables))}
    if os.environ.get("BENCH_INPUT") == "1":
        result.update(_input_pipeline(trainer))

    trainer.start()
    trainer.train_steps(int(os.environ.get("BENCH_WARMUP", "5")))
    chunk_s = _median_seconds(lambda: trainer.train_steps(chunk), max(1, steps // chunk))
    result["images_per_sec"] = chunk * result["images_per_step"] / chunk_s
    # Under parameter_server the workers step side by side: a worker's step spans `workers`
    # of the coordinator's steps.
    concurrent = workers if hps.distribution == "parameter_server" else 1
    result["step_s"] = chunk_s * concurrent / chunk

    communicate = COMMUNICATION[hps.distribution](trainer, hps)
    communicate()  # trace, negotiate
    repeats = int(os.environ.get("BENCH_COMM_REPEATS", "10"))
    alone = _median_seconds(communicate, repeats)
    synchronous_alone = hps.distribution != "parameter_server" and workers == 1
    result["comm_s"] = 0.0 if synchronous_alone else alone
    backend.gather_objects(None)  # every process is done before any exits
    if backend.is_chief:
        print("BENCH " + json.dumps(result), flush=True)
    if hps.distribution != "horovod":
        # As job.run: TensorFlow's coordination service would wait for the peers at exit.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    job.run = _timed_run
    job.main()
