"""The training job as SageMaker starts it: inputs -> Trainer -> run, and what a failure leaves.

`train.py` (the container's SAGEMAKER_PROGRAM) calls `main` in every rank. Inputs are read from
the SageMaker layout (channels, hyperparameters.json); on any error the cause goes to
/opt/ml/output/failure and the process exits non-zero at once, without waiting on collectives,
so that mpirun (-mca orte_abort_on_non_zero_status 1) ends the whole job.
"""

import glob
import logging
import os
import sys
import traceback

from maskrcnn_contract import hyperparameters, job_io

from maskrcnn_job import sagemaker_env  # pure Python, fast


def rank_from_environment() -> int:
    """The MPI rank before Horovod starts (so even start-up errors name their rank)."""
    for key in ("OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "PMI_RANK"):
        if key in os.environ:
            return int(os.environ[key])
    return 0


def pretrained_checkpoint(channel: str) -> str:
    """The checkpoint prefix in the `pretrained` channel: the latest one, or the only one."""
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(channel)
    if latest:
        return latest
    prefixes = sorted({p[:-len(".index")] for p in glob.glob(os.path.join(channel, "**", "*.index"),
                                                               recursive=True)})
    if len(prefixes) != 1:
        raise sagemaker_env.ContractError(
            f"pretrained channel {channel}: expected one TensorFlow checkpoint (*.index + "
            f"*.data-*), found {len(prefixes)}: {prefixes[:3]}")
    return prefixes[0]


def build_trainer(env: sagemaker_env.JobEnvironment):
    """Validates the inputs, starts Horovod, builds the model: everything before the loop."""
    if not os.path.isfile(env.hyperparameters_file):
        raise sagemaker_env.ContractError(f"{env.hyperparameters_file} does not exist")
    hps = hyperparameters.parse_json_file(env.hyperparameters_file)
    train_channel = env.channel(job_io.TRAIN_CHANNEL)
    pretrained = env.optional_channel(job_io.PRETRAINED_CHANNEL)
    hyperparameters.check_pretrained_channel(hps, has_pretrained=pretrained is not None)

    import tensorflow as tf  # only after the cheap checks: a bad input fails in a second

    if hps.threads_per_rank:
        tf.config.threading.set_intra_op_parallelism_threads(hps.threads_per_rank)
        tf.config.threading.set_inter_op_parallelism_threads(hps.threads_per_rank)
    from maskrcnn_job import distributed, experiment, trainer

    dataset = experiment.Dataset.from_channel(train_channel)
    backend = distributed.HorovodBackend(fp16_allreduce=hps.fp16_allreduce)
    paths = trainer.Paths(
        checkpoint_dir=env.checkpoint_dir, model_dir=env.model_dir,
        output_data_dir=env.output_data_dir,
        init_checkpoint=pretrained_checkpoint(pretrained) if pretrained else None)
    if backend.is_chief:
        logging.info("%d ranks on %d host(s), %d GPU(s) visible on this host; %s", backend.size,
                     len(env.hosts), backend.num_gpus, hps)
    return trainer.Trainer(hps, dataset, backend, paths)


def main() -> None:
    rank = rank_from_environment()
    # Logging from rank 0; the other ranks only report problems.
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s rank {rank} %(levelname)s %(name)s: %(message)s")
    env = sagemaker_env.load()
    try:
        build_trainer(env).run()
    except BaseException as error:  # noqa: B902  (also KeyboardInterrupt/SystemExit: report them)
        message = f"rank {rank} on {env.current_host}: {type(error).__name__}: {error}".strip()
        # First on stderr, one line, opening with a word the toolkit's error scan looks for
        # ("Exception"): on the master host the toolkit quotes stderr from that line on in its
        # failure file, which is the job's failure reason even when this rank runs on a worker
        # host (whose own toolkit exits 0).
        print(f"Exception in the training job, {message}", file=sys.stderr, flush=True)
        traceback.print_exc()
        sagemaker_env.write_failure(env.failure_file, message)
        sys.stdout.flush()
        sys.stderr.flush()
        # Not sys.exit: interpreter shutdown would wait on Horovod's collectives with the peers.
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
