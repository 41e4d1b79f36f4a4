"""One host's part of the parameter-server cluster: start this host's tasks and watch them.

The toolkit runs train.py once per host (no distribution flag: cluster_spec.py says why); that
process runs `run`, which starts this host's tasks as train.py again, each with its TF_CONFIG and
a `--tf_task=TYPE:INDEX` argument (only so that `ps` shows which task a process is):
a PS and a worker on every host, the chief (the coordinator, which trains) on the first. Then:
- the chief exits: the host's other tasks are stopped and its exit status is the host's (the chief
  wrote the failure file itself if it failed);
- a PS exits: the variables it held are gone, so the job cannot go on: failure file, exit 1;
- a worker exits: it is started again (at most MAX_WORKER_RESTARTS times). The coordinator
  reschedules the steps it lost on the other workers and uses it again when it is back
  (TensorFlow's worker-failure handling for ClusterCoordinator);
- on the other hosts, the chief's port stops answering (it finished, or failed and its host
  stops the job): the tasks are stopped and the host exits 0, as the toolkit's own PS mode waits
  for its master.
SIGTERM (SageMaker stopping the job) stops every task.

The supervisor also serves its tasks' states (`HostTasks.status`: each task's pid, its state read
from /proc, "stopped" after a SIGSTOP, its restarts) at cluster_spec.SUPERVISOR_PORT, in the
protocol of the stall watchdog's peers (training/peers.py): the chief is the only process that
runs the training loop, and its peers are TensorFlow's servers, which serve no status; when its
watchdog fires, it asks every host's supervisor (`status_addresses`), so that the job's failure
reason names the frozen task and its host ("stopped by a signal: ps:1 on algo-2"), or the host
whose supervisor no longer answers.
"""

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

from maskrcnn_contract.hyperparameters import Hyperparameters

from maskrcnn_job import sagemaker_env
from maskrcnn_job.distribution import cluster_spec
from maskrcnn_job.training import peers

log = logging.getLogger(__name__)

MAX_WORKER_RESTARTS = 3
POLL_SECONDS = 0.5
# How long the other hosts wait for the chief to come up (TensorFlow's import and the model build
# on a busy host take a minute at most; the dataset is read later).
CHIEF_START_TIMEOUT_SECONDS = 900
CHIEF_GONE_AFTER_FAILED_PROBES = 3
SUPERVISOR = "the supervisor"  # its name in the chief's stall report: "the supervisor on algo-2"
# /proc/<pid>/stat's state -> a task's state in the supervisor's status (peers.py reads them).
PROC_STATES = {"R": peers.RUNNING, "S": peers.RUNNING, "I": peers.RUNNING,
               "D": "in uninterruptible sleep", "T": "stopped", "t": "traced",
               "Z": "exited", "X": "exited"}


class TaskFailed(RuntimeError):
    """A task of this host ended in a way the job cannot survive."""


def _reachable(address: str, timeout: float = 1.0) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def _describe_exit(status: int) -> str:
    if status < 0:
        return f"was killed by signal {signal.Signals(-status).name}"
    return f"exited with status {status}"


def process_state(pid: int, proc: str = "/proc") -> str:
    """The state of process `pid` (PROC_STATES), "gone" if it no longer exists."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8") as f:
            code = f.read().rsplit(")", 1)[1].split()[0]  # pid (comm) state ...: comm may hold ")"
    except (OSError, IndexError):
        return "gone"
    return PROC_STATES.get(code, f"in state {code}")


def status_addresses(hosts) -> List[peers.Address]:
    """Every host's supervisor, as the chief's stall watchdog asks them: at a fixed port, known
    from the hosts alone (no exchange: the chief has no peer that runs the loop)."""
    return [{"who": SUPERVISOR, "host": host, "port": cluster_spec.SUPERVISOR_PORT}
            for host in hosts]


class HostTasks:
    """This host's task processes."""

    def __init__(self, hosts, current_host: str, program_argv):
        self.hosts = list(hosts)
        self.current_host = current_host
        self.program_argv = list(program_argv)
        self.processes: Dict[cluster_spec.Task, subprocess.Popen] = {}
        self.restarts: Dict[cluster_spec.Task, int] = {}
        self._lock = threading.Lock()  # `status` reads the processes from the server's thread

    def start(self, task: cluster_spec.Task) -> None:
        environment = dict(os.environ)
        environment[cluster_spec.TF_CONFIG] = json.dumps(
            cluster_spec.parameter_server(self.hosts, task))
        command = self.program_argv + [f"--tf_task={task[0]}:{task[1]}"]
        process = subprocess.Popen(command, env=environment)
        with self._lock:
            self.processes[task] = process
        log.info("%s: started %s:%d (pid %d)", self.current_host, task[0], task[1],
                 self.processes[task].pid)

    def status(self) -> dict:
        """What this supervisor answers the chief's stall watchdog (peers.py): its tasks, in the
        order they were started, each with its state (an exited one's as `check` says it)."""
        with self._lock:
            processes = list(self.processes.items())
            restarts = dict(self.restarts)
        tasks = []
        for task, process in processes:
            code = process.returncode  # set by `check`'s poll, in the main thread
            tasks.append({"task": f"{task[0]}:{task[1]}", "pid": process.pid,
                          "state": process_state(process.pid) if code is None
                          else _describe_exit(code),
                          "restarts": restarts.get(task, 0)})
        return {"who": SUPERVISOR, "host": self.current_host, "tasks": tasks}

    def stop_all(self, grace_seconds: float = 10.0) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
                # A stopped task (SIGSTOP) holds the SIGTERM until continued, else it would take
                # the whole grace and a SIGKILL.
                process.send_signal(signal.SIGCONT)
        deadline = time.time() + grace_seconds
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def check(self) -> Optional[int]:
        """One look at every task: restarts a lost worker; the host's exit status once the chief
        has exited; raises TaskFailed when a PS (or a worker past its restarts) is lost."""
        for task, process in list(self.processes.items()):
            status = process.poll()
            if status is None:
                continue
            task_type, index = task
            where = f"{task_type}:{index} on {self.current_host}"
            if task_type == "chief":
                return status
            if task_type == "ps":
                raise TaskFailed(f"parameter server {where} {_describe_exit(status)}: the "
                                 "variables it held are lost, the job cannot continue")
            if self.restarts.get(task, 0) >= MAX_WORKER_RESTARTS:
                raise TaskFailed(f"worker {where} {_describe_exit(status)} after "
                                 f"{MAX_WORKER_RESTARTS} restarts")
            with self._lock:
                self.restarts[task] = self.restarts.get(task, 0) + 1
            log.warning("worker %s %s; starting it again (restart %d of %d): the coordinator "
                        "runs its steps on the other workers meanwhile", where,
                        _describe_exit(status), self.restarts[task], MAX_WORKER_RESTARTS)
            print(f"worker {where} {_describe_exit(status)}; restarting it "
                  f"({self.restarts[task]}/{MAX_WORKER_RESTARTS})", flush=True)
            self.start(task)
        return None


def run(env: sagemaker_env.JobEnvironment, hps: Hyperparameters,
        program_argv=None) -> int:
    """Starts and watches this host's tasks; returns the host's exit status."""
    del hps  # the tasks read the hyperparameters themselves
    logging.getLogger().setLevel(logging.INFO)
    tasks = HostTasks(env.hosts, env.current_host,
                      program_argv or [sys.executable, os.path.abspath(sys.argv[0])])
    chief_address = cluster_spec.parameter_server_cluster(env.hosts)["chief"][0]
    is_chief_host = env.current_host == env.hosts[0]

    def on_sigterm(signum, frame):  # noqa: ARG001
        tasks.stop_all()
        os._exit(128 + signal.SIGTERM)

    if threading.current_thread() is threading.main_thread():  # where signals are delivered
        signal.signal(signal.SIGTERM, on_sigterm)
    server = serve_status(tasks)
    try:
        for task in cluster_spec.parameter_server_tasks(env.hosts, env.current_host):
            tasks.start(task)
        started, chief_seen, failed_probes = time.time(), False, 0
        while True:
            status = tasks.check()
            if status is not None:  # the chief, on this host
                if status:
                    print(f"chief on {env.current_host} {_describe_exit(status)}", flush=True)
                    if status < 0:  # killed: it wrote nothing itself
                        sagemaker_env.write_failure(
                            env.failure_file,
                            f"chief on {env.current_host} {_describe_exit(status)}")
                return 1 if status else 0
            if not is_chief_host:
                if _reachable(chief_address):
                    chief_seen, failed_probes = True, 0
                elif chief_seen:
                    failed_probes += 1
                    if failed_probes >= CHIEF_GONE_AFTER_FAILED_PROBES:
                        print(f"{env.current_host}: the chief ({chief_address}) is gone; "
                              "stopping this host's tasks", flush=True)
                        return 0
                elif time.time() - started > CHIEF_START_TIMEOUT_SECONDS:
                    raise TaskFailed(f"the chief ({chief_address}) did not come up within "
                                     f"{CHIEF_START_TIMEOUT_SECONDS} s")
            time.sleep(POLL_SECONDS)
    finally:
        tasks.stop_all()
        if server is not None:
            server.close()


def serve_status(tasks: HostTasks) -> Optional[peers.StatusServer]:
    """This host's tasks' states at SUPERVISOR_PORT, before they start (the chief may stall in its
    start-up); None if it cannot listen, which leaves the job as it was (said in the log)."""
    try:
        return peers.StatusServer(tasks.status, port=cluster_spec.SUPERVISOR_PORT)
    except OSError as error:
        # No exception class name in the log (the toolkit's failure scan, aws-rules.md SM-9).
        print(f"{tasks.current_host}: the supervisor serves no status for the chief's stall "
              f"watchdog ({error})", flush=True)
        return None
