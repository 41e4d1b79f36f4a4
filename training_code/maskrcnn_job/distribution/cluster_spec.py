"""The training hosts -> TensorFlow clusters (TF_CONFIG) for the tf.distribute strategies.

Pure Python: the job, local_run and the tests call it without TensorFlow.

- multi_worker_mirrored: the cluster the DLC's TensorFlow toolkit writes when the launch sets
  `sagemaker_multi_worker_mirrored_strategy_enabled` (sagemaker_tensorflow_container/training.py,
  `_build_tf_config_for_mwms`): one `worker` per host, port 8890, one process per host. The job
  uses the toolkit's TF_CONFIG when it is there and builds the same one when it is not (one host).
- parameter_server: the job's own TF2 cluster, not the toolkit's. With
  `sagemaker_parameter_server_enabled` the toolkit writes a TF1 cluster (`master` on the first
  host at 2222, `worker` on the others, `ps` on every host at 2223, a PS it starts itself) and runs
  the script on every host; TF2's ParameterServerStrategy accepts only `chief`, `worker`, `ps` and
  `evaluator` tasks (tensorflow/python/distribute/multi_worker_util.py,
  `_validate_cluster_spec`), runs the training program only on the coordinator (the chief), and
  needs every worker and PS to be a bare `tf.distribute.Server`. So the launch sends no toolkit
  flag; the toolkit runs train.py once per host, and the job starts this host's tasks itself
  (maskrcnn_job/distribution/parameter_server_host.py): a PS and a worker on every host (the PS on
  CPU, the worker with the host's GPUs), the chief (coordinator) on the first host. That process
  (the host's supervisor) also serves its tasks' states at SUPERVISOR_PORT.
"""

import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

MWMS_PORT = 8890    # the toolkit's
CHIEF_PORT = 2222
WORKER_PORT = 2223
PS_PORT = 2224
# Each host's supervisor of its parameter-server tasks serves their states there, for the chief's
# stall watchdog (parameter_server_host.py); the training security group admits it (SM-3).
SUPERVISOR_PORT = 2225

TF_CONFIG = "TF_CONFIG"

Task = Tuple[str, int]  # (task type, index)


class ClusterError(ValueError):
    """The hosts cannot form the cluster the strategy needs."""


def _check_hosts(hosts: Sequence[str], current_host: Optional[str] = None) -> None:
    if not hosts:
        raise ClusterError("no hosts: resourceconfig.json lists none")
    if len(set(hosts)) != len(hosts):
        raise ClusterError(f"hosts {list(hosts)}: a host is listed twice")
    if current_host is not None and current_host not in hosts:
        raise ClusterError(f"current host {current_host!r} is not one of the hosts {list(hosts)}")


def multi_worker_mirrored(hosts: Sequence[str], current_host: str) -> dict:
    """TF_CONFIG of `current_host` under MultiWorkerMirroredStrategy: the toolkit's, exactly."""
    _check_hosts(hosts, current_host)
    return {"cluster": {"worker": [f"{h}:{MWMS_PORT}" for h in hosts]},
            "environment": "cloud",
            "task": {"type": "worker", "index": list(hosts).index(current_host)}}


def parameter_server_cluster(hosts: Sequence[str]) -> Dict[str, List[str]]:
    """chief on the first host; a worker and a PS on every host. One host's tasks talk over
    localhost (its name need not resolve: local runs)."""
    _check_hosts(hosts)
    names = ["localhost"] if len(hosts) == 1 else list(hosts)
    return {"chief": [f"{names[0]}:{CHIEF_PORT}"],
            "worker": [f"{h}:{WORKER_PORT}" for h in names],
            "ps": [f"{h}:{PS_PORT}" for h in names]}


def parameter_server_tasks(hosts: Sequence[str], current_host: str) -> List[Task]:
    """The tasks `current_host` runs, in the order they are started (servers before the chief)."""
    _check_hosts(hosts, current_host)
    index = list(hosts).index(current_host)
    tasks: List[Task] = [("ps", index), ("worker", index)]
    if index == 0:
        tasks.append(("chief", 0))
    return tasks


def parameter_server(hosts: Sequence[str], task: Task) -> dict:
    """TF_CONFIG of one task of the parameter-server cluster."""
    cluster = parameter_server_cluster(hosts)
    task_type, index = task
    if task_type not in cluster or not 0 <= index < len(cluster[task_type]):
        raise ClusterError(f"task {task_type}:{index} is not in the cluster {cluster}")
    return {"cluster": cluster, "environment": "cloud",
            "task": {"type": task_type, "index": index}}


def current(environ=None) -> Optional[dict]:
    """The TF_CONFIG of this process, parsed; None if it has none."""
    environ = os.environ if environ is None else environ
    text = environ.get(TF_CONFIG, "").strip()
    if not text:
        return None
    try:
        config = json.loads(text)
        config["task"]["type"], int(config["task"]["index"]), dict(config["cluster"])
    except (ValueError, KeyError, TypeError) as error:
        raise ClusterError(f"TF_CONFIG is not a cluster with a task ({error}): {text[:200]}") \
            from None
    return config


def task_of(config: Optional[dict]) -> Optional[Task]:
    if config is None:
        return None
    return config["task"]["type"], int(config["task"]["index"])


def address(config: dict, task: Task) -> str:
    task_type, index = task
    return config["cluster"][task_type][index]
