"""The training job as SageMaker starts it: inputs -> backend -> Trainer -> run, and what a
failure leaves.

`train.py` (the container's SAGEMAKER_PROGRAM) calls `main` in every process the toolkit starts:
- horovod: every rank (mpirun);
- multi_worker_mirrored: one worker per host (the toolkit's TF_CONFIG; built here on one host);
- parameter_server: once per host, without TF_CONFIG: that process starts and watches this host's
  tasks (distribution/parameter_server_host.py), which run `main` again with their own TF_CONFIG:
  the chief trains, a PS or worker task serves.
Inputs are read from the SageMaker layout (channels, hyperparameters.json); on any error the cause
goes to /opt/ml/output/failure and the process exits non-zero at once, without waiting on
collectives, so that mpirun (-mca orte_abort_on_non_zero_status 1) or SageMaker ends the job. A
process that trains does the same when it makes no progress for too long (training/watchdog.py).
A process whose TensorFlow lost a peer (its coordination service's heartbeats: a frozen
MultiWorkerMirroredStrategy worker aborts the others' collectives within seconds, long before any
stall budget) fails naming that peer and its host, and what the peers' status servers say
(`PeerLostError`).
"""

import ctypes
import glob
import logging
import os
import re
import sys
import traceback
import warnings
from typing import List, Optional

from maskrcnn_contract import hyperparameters, job_io

from maskrcnn_job import sagemaker_env  # pure Python, fast
from maskrcnn_job.data import layout
from maskrcnn_job.distribution import cluster_spec
from maskrcnn_job.distribution.backend import Backend
from maskrcnn_job.training import watchdog as stall


def ignore_library_notices() -> None:
    """Python warnings about the libraries, not the job, on SageMaker as here; set before anything
    imports TensorFlow (this module does not; train.py imports it first)."""
    # google.api_core, which TensorFlow imports (its GCE cluster resolver), warns that Google will
    # stop supporting this Python version: nothing a job's reader can act on. The image sets the
    # same filter in PYTHONWARNINGS for the toolkit's process (training_code/Dockerfile).
    warnings.filterwarnings("ignore", category=FutureWarning,
                            module=r"google\.api_core\._python_version_support")


ignore_library_notices()


# absl::SetMinLogLevel(absl::LogSeverityAtLeast), in the absl release TensorFlow 2.21 links
# (lts_20250814).
_ABSL_SET_MIN_LOG_LEVEL = "_ZN4absl12lts_2025081414SetMinLogLevelENS0_18LogSeverityAtLeastE"


def quiet_tensorflow() -> None:
    """TensorFlow's settings that exist only once it is imported; on SageMaker as here."""
    import tensorflow as tf
    from tensorflow.python.util import deprecation

    # Deprecation notices (Model Garden calling map_fn with dtype=) are for the authors of the code
    # that calls TensorFlow: the switch TensorFlow's own deprecation.silence() turns off.
    deprecation._PRINT_DEPRECATION_WARNINGS = False
    # TensorFlow logs part of its C++ messages through absl (grappler's cost estimator: an
    # "Error in PredictCost()" warning per traced function), which does not read
    # TF_CPP_MIN_LOG_LEVEL; absl's own minimum level, exported by TensorFlow's framework library,
    # gets the same value (absl numbers its severities alike: 0 INFO, 1 WARNING, 2 ERROR, 3 FATAL).
    # Without that symbol (another TensorFlow build) absl logs as before.
    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")
    if level not in ("0", "1", "2", "3"):
        return
    framework = os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework.so.2")
    try:
        set_min_log_level = ctypes.CDLL(framework)[_ABSL_SET_MIN_LOG_LEVEL]
    except (OSError, AttributeError):
        return
    set_min_log_level(ctypes.c_int(int(level)))


def rank_from_environment() -> str:
    """This process's name in the job before the backend starts (so even start-up errors name
    it): `rank N` (MPI), `worker N` / `chief 0` / `ps N` (TF_CONFIG), else `rank 0`."""
    for key in ("OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "PMI_RANK"):
        if key in os.environ:
            return f"rank {int(os.environ[key])}"
    try:
        task = cluster_spec.task_of(cluster_spec.current())
    except cluster_spec.ClusterError:
        task = None
    return f"{task[0]} {task[1]}" if task else "rank 0"


def read_hyperparameters(env: sagemaker_env.JobEnvironment) -> hyperparameters.Hyperparameters:
    if not os.path.isfile(env.hyperparameters_file):
        raise sagemaker_env.ContractError(f"{env.hyperparameters_file} does not exist")
    hps = hyperparameters.parse_json_file(env.hyperparameters_file)
    hyperparameters.check_distribution(hps)
    return hps


def make_backend(hps: hyperparameters.Hyperparameters,
                 env: sagemaker_env.JobEnvironment) -> Backend:
    """This process's distribution backend: the only place that chooses one."""
    if hps.distribution == "horovod":
        from maskrcnn_job.distribution import horovod_backend

        return horovod_backend.HorovodBackend(fp16_allreduce=hps.fp16_allreduce)
    from maskrcnn_job.distribution import tf_strategies

    tf_config = cluster_spec.current()
    if hps.distribution == "multi_worker_mirrored":
        if tf_config is None and len(env.hosts) > 1:
            # The toolkit writes it when the launch sets its MWMS flag; the same cluster here.
            tf_config = cluster_spec.multi_worker_mirrored(env.hosts, env.current_host)
        return tf_strategies.MultiWorkerMirroredBackend(tf_config)
    assert tf_config is not None  # run() starts the host's tasks where there is none
    return tf_strategies.ParameterServerBackend(tf_config)


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


def report_failure(env: sagemaker_env.JobEnvironment, message: str) -> None:
    """`message` (its first line: "<rank> on <host>: ...") where SageMaker takes the job's failure
    reason from. First on stderr, one line, opening with a word the toolkit's error scan looks
    for ("Exception"): on the master host the toolkit quotes stderr from that line on in its
    failure file, which is the job's failure reason even when this rank runs on a worker host
    (whose own toolkit exits 0; docs/aws-rules.md SM-9). Then the failure file of this host
    (SM-8)."""
    first, _, rest = message.partition("\n")
    print(f"Exception in the training job, {first}" + (f"\n{rest}" if rest else ""),
          file=sys.stderr, flush=True)
    sagemaker_env.write_failure(env.failure_file, message)


def stall_watchdog(env: sagemaker_env.JobEnvironment,
                   hps: hyperparameters.Hyperparameters) -> stall.Watchdog:
    """This process's stall watchdog (not started): its report is the failure's."""
    watchdog = stall.Watchdog(rank_from_environment(), env.current_host,
                              step_budget_s=hps.stall_timeout_minutes * 60,
                              slow_budget_s=hps.stall_timeout_slow_phases_minutes * 60,
                              report=lambda message: report_failure(env, message))
    if hps.distribution == "parameter_server":
        # The chief's peers are TensorFlow's servers, which serve no status: every host's
        # supervisor answers for its tasks instead.
        from maskrcnn_job.distribution import parameter_server_host

        watchdog.add_peers(parameter_server_host.status_addresses(env.hosts))
    return watchdog


class PeerLostError(RuntimeError):
    """TensorFlow declared peers lost and failed this process's step; the message's first line
    names them, their hosts and what the stall watchdog's peers answer."""


# TensorFlow's coordination service, on peers that missed their heartbeats (TF 2.21's words).
_UNHEALTHY = re.compile(r"unhealthy \(stopped sending heartbeats\):\s*"
                        r"((?:/job:\w+/replica:\d+/task:\d+\s*)+)")


def lost_peers(text: str, tf_config: Optional[dict]) -> List[str]:
    """The tasks that TensorFlow's error `text` says stopped sending heartbeats, as the job names
    processes ("worker 1 on algo-2": the host from the TF_CONFIG cluster), in order."""
    names = []
    for match in _UNHEALTHY.finditer(text):
        for task_type, index in re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", match.group(1)):
            try:
                host = " on " + cluster_spec.address(
                    tf_config,  # type: ignore[arg-type]  # None: the TypeError below
                    (task_type, int(index))).rsplit(":", 1)[0]
            except (KeyError, IndexError, TypeError):
                host = ""
            if f"{task_type} {index}{host}" not in names:
                names.append(f"{task_type} {index}{host}")
    return names


def peer_lost(error: BaseException, watchdog: stall.Watchdog) -> Optional[PeerLostError]:
    """`error` as a PeerLostError if TensorFlow raised it for lost peers, else None. Its first
    line: "TensorFlow's coordination service lost worker 1 on algo-2 (...)", then what the peers
    answer ("; not answering: worker 1 on algo-2": frozen, not crashed); the error follows."""
    try:
        config = cluster_spec.current()
    except cluster_spec.ClusterError:
        config = None
    lost = lost_peers(str(error), config)
    if not lost:
        return None
    first = (f"TensorFlow's coordination service lost {', '.join(lost)} (no heartbeats within "
             "its timeout)")
    first += watchdog.ask_peers(stall.FIRST_LINE_CHARS - len(first) - 80)  # never raises
    return PeerLostError(f"{first}\n{type(error).__name__}: {error}")


def build_trainer(env: sagemaker_env.JobEnvironment, hps: hyperparameters.Hyperparameters,
                  watchdog: Optional[stall.Watchdog] = None):
    """Validates the inputs, starts the backend, builds the model: everything before the loop."""
    channel = layout.Channel(env.channel(job_io.TRAIN_CHANNEL))
    pretrained = env.optional_channel(job_io.PRETRAINED_CHANNEL)
    init = env.optional_channel(job_io.INIT_CHANNEL)
    hyperparameters.check_pretrained_channel(hps, has_pretrained=pretrained is not None,
                                             has_init=init is not None)
    if init is not None:  # an earlier run of another backbone or preset fails here, in a second
        from maskrcnn_job.training import init_from_checkpoint

        try:
            init_from_checkpoint.check(init, hps)
        except init_from_checkpoint.InitError as error:
            raise sagemaker_env.ContractError(str(error)) from None
    info = channel.read_info()
    checkpoint_dir = sagemaker_env.own_checkpoint_dir(env)

    import tensorflow as tf  # only after the cheap checks: a bad input fails in a second

    quiet_tensorflow()
    if hps.threads_per_rank:
        tf.config.threading.set_intra_op_parallelism_threads(hps.threads_per_rank)
        if hps.distribution == "horovod":
            # Not under the strategies: their remote functions block inter-op threads while
            # they wait on other tasks, and with one such thread a step on a worker never ends.
            tf.config.threading.set_inter_op_parallelism_threads(hps.threads_per_rank)
    from maskrcnn_job.training import trainer

    backend = make_backend(hps, env)
    paths = trainer.Paths(
        checkpoint_dir=checkpoint_dir, model_dir=env.model_dir,
        output_data_dir=env.output_data_dir, tensorboard_dir=env.tensorboard_dir,
        init_checkpoint=pretrained_checkpoint(pretrained) if pretrained and not init else None,
        init_from=init)
    if backend.is_chief:
        logging.info("%s: %d replica(s) per step on %d host(s), %d GPU(s) visible here; %s",
                     hps.distribution, backend.size, len(env.hosts), backend.num_gpus, hps)
        if checkpoint_dir != env.checkpoint_dir:
            logging.info("a tuning job's candidate: its checkpoints are in %s, apart from the "
                         "other candidates' in %s", checkpoint_dir, env.checkpoint_dir)
    # The chief's MLflow run when the launch names a tracking server (training/tracking.py).
    from maskrcnn_job.training import tracking

    tracker = tracking.start(hps) if backend.is_chief else tracking.Tracker.off()
    try:
        return trainer.Trainer(hps, channel, info, backend, paths, watchdog=watchdog,
                               tracker=tracker)
    except BaseException:
        tracker.end(failed=True)
        raise


def run(env: sagemaker_env.JobEnvironment) -> None:
    """What this process does in the job, by distribution and TF_CONFIG task."""
    hps = read_hyperparameters(env)
    if hps.distribution == "parameter_server":
        task = cluster_spec.task_of(cluster_spec.current())
        if task is None:  # as the toolkit starts it: this host's tasks, watched
            from maskrcnn_job.distribution import parameter_server_host

            status = parameter_server_host.run(env, hps)
            if status:  # the chief failed and wrote the failure file itself
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
            return
        if task[0] in ("ps", "worker"):
            from maskrcnn_job.distribution import tf_strategies

            quiet_tensorflow()
            tf_config = cluster_spec.current()
            assert tf_config is not None  # its task came from it
            tf_strategies.serve(tf_config, hps.threads_per_rank)
            return
    watchdog = stall_watchdog(env, hps)
    watchdog.start(stall.START)
    built = None
    try:
        built = build_trainer(env, hps, watchdog)
        built.run()
    except BaseException as error:
        if built is not None:
            built.tracker.end(failed=True)  # the chief's MLflow run, if any
        lost = peer_lost(error, watchdog) if isinstance(error, Exception) else None
        if lost is None:
            raise
        raise lost from error
    watchdog.stop()
    built.finish_tracking()  # the chief's SavedModel and report, after the others are done
    if hps.distribution == "multi_worker_mirrored" and built.backend.is_chief:
        # The last collective can end here while another worker still fetches the chief's part
        # of it: the chief leaves after the others (seen: "Socket closed" on worker 1).
        staying = watchdog.wait_for_peers_to_leave()
        if staying:
            print(f"the chief leaves while {', '.join(staying)} still run, "
                  f"{stall.PEERS_LEAVE_TIMEOUT_S:.0f} s after the end of training",
                  file=sys.stderr, flush=True)
    if hps.distribution != "horovod":
        # Done, files closed. At interpreter exit TensorFlow's coordination service would wait
        # for the peers that already left (40 s measured on 2 emulated hosts) before exiting 0.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def main() -> None:
    name = rank_from_environment()
    # Logging from rank 0 (the chief); the other processes only report problems.
    chief = name in ("rank 0", "worker 0", "chief 0")
    logging.basicConfig(level=logging.INFO if chief else logging.WARNING,
                        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s")
    # Model Garden and TensorFlow's SavedModel writer log library detail through absl at INFO
    # (the FPN's input specs, sharding-callback times, a SavedModel's renamed inputs by the
    # hundred); their warnings stay.
    logging.getLogger("absl").setLevel(logging.WARNING)
    env = sagemaker_env.load()
    try:
        run(env)
    except BaseException as error:  # noqa: BLE001  (also KeyboardInterrupt/SystemExit: report them)
        message = f"{name} on {env.current_host}: {type(error).__name__}: {error}".strip()
        report_failure(env, message)
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        # Not sys.exit: interpreter shutdown would wait on Horovod's collectives with the peers.
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
