"""Emulated SageMaker training hosts on this machine, running the real training toolkit (root only).

Each host is to the job what a training instance is:
- its own network namespace, joined to the others by a bridge in a namespace of its own; the
  interface is `eth0`, as `resourceconfig.json` says (the toolkit's mpirun binds to it);
- its own hostname (algo-k) and mount namespace, in which /opt/ml, /opt/ml/code, the channels,
  /etc/hosts, /etc/environment, /etc/pam.d/sshd, /root/.ssh, /tmp, /run and /dev/shm are its own.
  Real mounts, not a moved root: the toolkit's MPI runner preloads a `gethostname` library that
  reads /opt/ml/input/config/resourceconfig.json at that exact path;
- its own PID namespace: when the toolkit's `train` (PID 1 there) exits, everything it started on
  that host (sshd, orted, ranks) dies with it, as with a container.
The DLC's entry point runs in each: sagemaker-training's `train`, with the DLC's
SAGEMAKER_TRAINING_MODULE and the Dockerfile's ENV, over /opt/ml/code staged as the image holds it
(the repository's .dockerignore applied). The toolkit starts sshd itself; the master (the first
host) waits for the workers' sshd, then runs mpirun over ssh.

SageMaker's side is emulated as far as the job can see it: a host that exits non-zero fails the
job, its `failure` file (first 1024 characters) is the failure reason, and the other hosts are
stopped. The worker hosts' toolkit exits 0 even when a rank on them failed (it only waits for the
master), so the reason always comes from the master's toolkit, which quotes the ranks' stderr.

What lies beyond the hosts (SageMaker's: AWS's endpoints and, through the VPC's NAT gateway, the
internet) is only what the harness forwards: each of `forwarded_ports` (a server on this machine's
127.0.0.1) answers the hosts at OUTSIDE:<the same port>, an address of their bridge. Nothing else
leaves the hosts' network.

Outside the namespaces nothing changes but two empty mount points created if missing (/opt/ml,
/root/.ssh). Namespaces are named after this process, removed on exit, and leftovers of a killed
run are removed by the next one.
"""

import ctypes
import dataclasses
import fnmatch
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

NAMESPACE_PREFIX = "smhost-"
SUBNET = "10.213.0"            # private to the namespaces: no route leaves them
OUTSIDE = f"{SUBNET}.254"      # the bridge's own address: where the forwarded ports answer
INTERFACE = "eth0"             # SageMaker's network_interface_name
SSHD = "/usr/sbin/sshd"
FAILURE_REASON_CHARS = 1024    # DescribeTrainingJob's FailureReason: the failure file's first 1 KiB
# What the DLC itself sets (aws/deep-learning-containers, docker/tensorflow/2.21/Dockerfile.cuda,
# the runtime-base and sagemaker stages' ENV), less what names its GPU and EFA paths; the
# Dockerfile's own ENV is added.
DLC_ENVIRONMENT = {
    "SAGEMAKER_TRAINING_MODULE": "sagemaker_tensorflow_container.training:main",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "PYTHONIOENCODING": "UTF-8",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "KMP_AFFINITY": "granularity=fine,compact,1,0",
    "KMP_BLOCKTIME": "1",
    "KMP_SETTINGS": "0",
    "RDMAV_FORK_SAFE": "1",
    "TF_AUTOTUNE_THRESHOLD": "2",
    "DLC_CONTAINER_TYPE": "training",
    "HOME": "/root",
}


class Unavailable(RuntimeError):
    """This machine cannot emulate hosts (no root, no namespaces, no sshd, no toolkit)."""


@dataclasses.dataclass
class HostResult:
    name: str
    exit_code: Optional[int]     # None: stopped by the harness
    opt_ml: str
    log_file: str

    def failure(self) -> str:
        path = os.path.join(self.opt_ml, "output", "failure")
        if not os.path.exists(path):
            return ""
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()


@dataclasses.dataclass
class JobResult:
    hosts: List[HostResult]
    timed_out: bool

    @property
    def succeeded(self) -> bool:
        return not self.timed_out and all(h.exit_code == 0 for h in self.hosts)

    @property
    def failure_reason(self) -> str:
        """What DescribeTrainingJob would report: the failure file of the host that failed."""
        for host in self.hosts:
            if host.exit_code not in (0, None):
                return host.failure()[:FAILURE_REASON_CHARS]
        return "ran past the time limit" if self.timed_out else ""


def check_available(python: str) -> None:
    """Raises Unavailable with what to do, before anything is created."""
    if os.geteuid() != 0:
        raise Unavailable("emulated hosts need root (network and mount namespaces); run as root, "
                          "or use one host (--hosts 1), which needs neither")
    for tool in ("ip", "unshare", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise Unavailable(f"emulated hosts need `{tool}`: apt-get install iproute2 util-linux "
                              "openssh-client (`make setup` does)")
    if not os.path.exists(SSHD):
        raise Unavailable(f"emulated hosts need {SSHD} (the toolkit starts it on every host): "
                          "apt-get install openssh-server (`make setup` does)")
    if not os.path.exists(python):
        raise Unavailable(f"the image's Python {python} does not exist: run `make setup`")
    probe = subprocess.run([python, "-c", "import sagemaker_training.cli.train, mpi4py"],
                           capture_output=True, text=True)
    if probe.returncode:
        raise Unavailable(f"{python} lacks the training toolkit or mpi4py: run `make setup`\n"
                          + probe.stderr[-500:])
    name = f"{NAMESPACE_PREFIX}{os.getpid()}-probe"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode:
        raise Unavailable(f"cannot create a network namespace: {made.stderr.strip()} (a container "
                          "without CAP_SYS_ADMIN cannot; use --hosts 1)")
    subprocess.run(["ip", "netns", "del", name], check=True)


def remove_stale_namespaces() -> None:
    """Namespaces of harness runs whose process is gone (killed before its cleanup)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.strip() else ""
        if not name.startswith(NAMESPACE_PREFIX):
            continue
        owner = name[len(NAMESPACE_PREFIX):].split("-")[0]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def dockerignored(relative_path: str, rules: List[str]) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-includes; a pattern that matches a
    directory matches what is below it; `**/` matches any number of folders, none included."""
    parts = relative_path.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for rule in rules:
        negated = rule.startswith("!")
        pattern = (rule[1:] if negated else rule).rstrip("/")
        patterns = [pattern.replace("**/", "*/")]
        if pattern.startswith("**/"):
            patterns.append(pattern[3:])
        if any(fnmatch.fnmatchcase(c, p) for c in candidates for p in patterns):
            excluded = not negated
    return excluded


def stage_code(repo: str, source: str, destination: str) -> None:
    """/opt/ml/code as the image has it: `source` (a folder of `repo`) minus .dockerignore."""
    with open(os.path.join(repo, ".dockerignore"), encoding="utf-8") as f:
        rules = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    shutil.rmtree(destination, ignore_errors=True)
    for folder, _dirs, files in os.walk(source):
        for name in files:
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, repo).replace(os.sep, "/")
            if dockerignored(relative, rules):
                continue
            target = os.path.join(destination, os.path.relpath(path, source))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(path, target)


def dockerfile_environment(dockerfile: str) -> Dict[str, str]:
    """The Dockerfile's ENV KEY=VALUE pairs (continuation lines and comments handled)."""
    with open(dockerfile, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if not line.strip().startswith("#")]
    text = "\n".join(lines).replace("\\\n", " ")
    environment = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for pair in line[4:].split():
                key, _, value = pair.partition("=")
                environment[key] = value
    return environment


_INIT_SCRIPT = r"""#!/bin/bash
# One emulated host: PID 1 of its own PID, mount and UTS namespaces, inside its network namespace.
# Usage: init.sh HOST_DIR PYTHON. Mount order matters: /tmp last, as the host's own files may
# live under the real /tmp.
set -euo pipefail
host_dir=$1
python=$2
mapfile -t container_env < "$host_dir/../container.env"
mapfile -t keep_visible < "$host_dir/../keep-visible"
hostname "$(cat "$host_dir/hostname")"
mount --make-rprivate /
mount --bind "$host_dir/opt_ml" /opt/ml
mount --bind -o ro "$host_dir/../code" /opt/ml/code
while IFS='=' read -r channel source; do
  mount --bind -o ro "$source" "/opt/ml/input/data/$channel"
done < "$host_dir/channels"
mount --bind "$host_dir/etc/hosts" /etc/hosts
mount --bind "$host_dir/etc/environment" /etc/environment
mount --bind "$host_dir/etc/pam-sshd" /etc/pam.d/sshd
mount --bind "$host_dir/ssh" /root/.ssh
mount -t tmpfs tmpfs /run && mkdir -p /run/sshd
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /var/log
# The host's own /tmp hides the real one, and with it anything under it this host needs (the
# repository, the venvs, the work directory when they live under /tmp): those are bound back.
mkdir -p /run/outer-tmp && mount --bind /tmp /run/outer-tmp
mount --bind "$host_dir/tmp" /tmp
for path in "${keep_visible[@]}"; do
  mkdir -p "$path" && mount --bind "/run/outer-tmp/${path#/tmp/}" "$path"
done
cd /opt/ml/code
# The container's environment only, as a container starts with the image's ENV.
exec env -i "${container_env[@]}" "$python" -c \
  "import sys; from sagemaker_training.cli.train import main; sys.exit(main())"
"""


# What inputdataconfig.json says of a channel unless told otherwise: an S3 channel in File mode.
DEFAULT_CHANNEL_CONFIG = {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                          "RecordWrapperType": "None"}


class Cluster:
    """N emulated hosts for one training job; use as a context manager (it always cleans up)."""

    def __init__(self, work_dir: str, host_count: int, python: str, repo: str,
                 hyperparameters: Dict[str, str], channels: Dict[str, str],
                 environment: Optional[Dict[str, str]] = None,
                 extra_code: Sequence[str] = (), keep_checkpoints: bool = False,
                 instance_type: str = "ml.m5.xlarge", job_name: str = "local-emulated-job",
                 request_environment: Optional[Dict[str, str]] = None,
                 channel_configs: Optional[Dict[str, dict]] = None,
                 forwarded_ports: Sequence[int] = ()):
        """`channels`: name -> the local directory mounted read-only at
        /opt/ml/input/data/<name>; `channel_configs`: name -> its inputdataconfig.json entry
        (DEFAULT_CHANNEL_CONFIG otherwise). `environment` and `request_environment`: see
        container_environment. `extra_code`: files copied into /opt/ml/code beside the training
        code (a test's own program); `keep_checkpoints`: leave each host's /opt/ml/checkpoints as
        the previous run left it, as SageMaker restores a job's checkpoints to its hosts;
        `forwarded_ports`: ports of servers on this machine's 127.0.0.1 that the hosts reach at
        OUTSIDE:<port>."""
        if host_count < 1:
            raise ValueError(f"host_count {host_count}: at least one host")
        self.work_dir = os.path.abspath(work_dir)
        self.hosts = [f"algo-{k + 1}" for k in range(host_count)]
        self.python = python
        self.repo = repo
        self.hyperparameters = hyperparameters
        self.channels = channels
        self.channel_configs = dict(channel_configs or {})
        self.environment = dict(environment or {})
        self.request_environment = dict(request_environment or {})
        self.extra_code = list(extra_code)
        self.keep_checkpoints = keep_checkpoints
        self.instance_type = instance_type
        self.job_name = job_name
        self.forwarded_ports = list(forwarded_ports)
        self._tag = f"{NAMESPACE_PREFIX}{os.getpid()}-{int(time.time() * 1000) % 100000}"
        self._namespaces: List[str] = []
        self._processes: Dict[str, subprocess.Popen] = {}
        self._forwards: List[_PortForward] = []

    # -- layout -------------------------------------------------------------------------------

    def host_dir(self, host: str) -> str:
        return os.path.join(self.work_dir, "hosts", host)

    def opt_ml(self, host: str) -> str:
        return os.path.join(self.host_dir(host), "opt_ml")

    def _write(self, path: str, text: str, mode: int = 0o644) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(path, mode)

    def _prepare_files(self) -> None:
        hosts_root = os.path.join(self.work_dir, "hosts")
        code = os.path.join(hosts_root, "code")
        stage_code(self.repo, os.path.join(self.repo, "training_code"), code)
        for path in self.extra_code:
            shutil.copy2(path, code)
        key = os.path.join(hosts_root, "id_rsa")
        if not os.path.exists(key):  # one key pair for all hosts, as the DLC bakes one in
            subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-N", "", "-f", key], check=True)
        with open(key + ".pub", encoding="utf-8") as f:
            public_key = f.read()
        with open("/etc/pam.d/sshd", encoding="utf-8") as f:
            # The DLC's "SSH login fix": pam_loginuid cannot work in a container.
            pam_sshd = re.sub(r"session\s+required\s+pam_loginuid\.so",
                              "session optional pam_loginuid.so", f.read())
        etc_hosts = "127.0.0.1 localhost\n" + "".join(
            f"{SUBNET}.{k + 1} {host}\n" for k, host in enumerate(self.hosts))
        groups = [{"instance_group_name": "homogeneousCluster",
                   "instance_type": self.instance_type, "hosts": self.hosts}]
        for host in self.hosts:
            root = self.host_dir(host)
            opt_ml = self.opt_ml(host)
            for sub in ("output", "model") + (() if self.keep_checkpoints else ("checkpoints",)):
                shutil.rmtree(os.path.join(opt_ml, sub), ignore_errors=True)
            for sub in ("code", "model", "output/data", "checkpoints", "input/config"):
                os.makedirs(os.path.join(opt_ml, sub), exist_ok=True)
            for channel in self.channels:
                os.makedirs(os.path.join(opt_ml, "input", "data", channel), exist_ok=True)
            config = os.path.join(opt_ml, "input", "config")
            self._write(os.path.join(config, "hyperparameters.json"),
                        json.dumps(self.hyperparameters, indent=1))
            self._write(os.path.join(config, "inputdataconfig.json"), json.dumps(
                {c: self.channel_configs.get(c, DEFAULT_CHANNEL_CONFIG) for c in self.channels},
                indent=1))
            self._write(os.path.join(config, "resourceconfig.json"), json.dumps({
                "current_host": host, "current_instance_type": self.instance_type,
                "current_group_name": "homogeneousCluster", "hosts": self.hosts,
                "instance_groups": groups, "network_interface_name": INTERFACE}, indent=1))
            self._write(os.path.join(root, "hostname"), host + "\n")
            self._write(os.path.join(root, "channels"), "".join(
                f"{name}={os.path.abspath(path)}\n" for name, path in self.channels.items()))
            self._write(os.path.join(root, "etc", "hosts"), etc_hosts)
            self._write(os.path.join(root, "etc", "environment"), "")
            self._write(os.path.join(root, "etc", "pam-sshd"), pam_sshd)
            ssh = os.path.join(root, "ssh")
            shutil.rmtree(ssh, ignore_errors=True)
            os.makedirs(ssh, mode=0o700)
            shutil.copy2(key, os.path.join(ssh, "id_rsa"))
            shutil.copy2(key + ".pub", os.path.join(ssh, "id_rsa.pub"))
            self._write(os.path.join(ssh, "authorized_keys"), public_key, 0o600)
            self._write(os.path.join(ssh, "config"),
                        "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
                        "  LogLevel ERROR\n", 0o600)
            tmp = os.path.join(root, "tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            os.chmod(tmp, 0o1777)
        # Files every host reads alike: written once, beside the hosts' folders.
        self._write(os.path.join(hosts_root, "keep-visible"),
                    "".join(p + "\n" for p in self._paths_under_tmp()))
        self._write(os.path.join(hosts_root, "container.env"), "".join(
            f"{k}={v}\n" for k, v in self.container_environment().items()))
        self._write(os.path.join(hosts_root, "init.sh"), _INIT_SCRIPT, 0o755)
        for mount_point in ("/opt/ml", "/root/.ssh"):
            os.makedirs(mount_point, exist_ok=True)

    def _paths_under_tmp(self) -> List[str]:
        """What the hosts use that lives under the real /tmp: the repository, the work directory,
        and the image Python's prefix and import path (a layered venv names another venv)."""
        probe = subprocess.run(
            [self.python, "-c", "import sys; print('\\n'.join([sys.prefix, *sys.path]))"],
            capture_output=True, text=True, check=True)
        candidates = {os.path.realpath(p) for p in
                      [self.repo, self.work_dir, *probe.stdout.splitlines()] if p}
        under_tmp = sorted(p for p in candidates if p.startswith("/tmp/") and os.path.isdir(p))
        # Only the outermost: a bind of a folder brings what is below it.
        return [p for p in under_tmp
                if not any(p.startswith(q + "/") for q in under_tmp if q != p)]

    # -- network ------------------------------------------------------------------------------

    def _ip(self, *args: str) -> None:
        result = subprocess.run(["ip", *args], capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")

    def _create_network(self) -> None:
        switch = f"{self._tag}-sw"
        self._ip("netns", "add", switch)
        self._namespaces.append(switch)
        self._ip("-n", switch, "link", "add", "br0", "type", "bridge")
        self._ip("-n", switch, "link", "set", "br0", "up")
        for k, host in enumerate(self.hosts):
            namespace = f"{self._tag}-{host}"
            self._ip("netns", "add", namespace)
            self._namespaces.append(namespace)
            port = f"port{k + 1}"
            self._ip("link", "add", INTERFACE, "netns", namespace, "type", "veth",
                     "peer", "name", port, "netns", switch)
            self._ip("-n", switch, "link", "set", port, "master", "br0", "up")
            self._ip("-n", namespace, "addr", "add", f"{SUBNET}.{k + 1}/24", "dev", INTERFACE)
            self._ip("-n", namespace, "link", "set", INTERFACE, "up")
            self._ip("-n", namespace, "link", "set", "lo", "up")
        if self.forwarded_ports:
            self._ip("-n", switch, "addr", "add", f"{OUTSIDE}/24", "dev", "br0")
            for forwarded in self.forwarded_ports:
                self._forwards.append(_PortForward(switch, forwarded))

    # -- run ----------------------------------------------------------------------------------

    def container_environment(self) -> Dict[str, str]:
        """The container's environment, each layer over the ones before it: the DLC's
        (DLC_ENVIRONMENT); the image's ENV (training_code/Dockerfile); what SageMaker sets
        (TRAINING_JOB_NAME; PATH: the image Python's first); `environment`, this machine's (a CPU's
        settings, the stand-ins for AWS); last `request_environment`, the CreateTrainingJob
        request's `Environment`, which SageMaker sets in the container over the image's ENV
        (docs/aws-rules.md SM-14, SM-17)."""
        env = dict(DLC_ENVIRONMENT)
        env.update(dockerfile_environment(os.path.join(self.repo, "training_code", "Dockerfile")))
        env["PATH"] = os.path.dirname(self.python) + ":/usr/local/sbin:/usr/local/bin:" \
            "/usr/sbin:/usr/bin:/sbin:/bin"
        env["TRAINING_JOB_NAME"] = self.job_name
        env.update(self.environment)
        env.update(self.request_environment)
        return env

    def _start(self, host: str) -> subprocess.Popen:
        command = ["ip", "netns", "exec", f"{self._tag}-{host}",
                   "unshare", "--uts", "--mount", "--pid", "--fork", "--kill-child",
                   "--mount-proc", "bash", os.path.join(self.work_dir, "hosts", "init.sh"),
                   self.host_dir(host), self.python]
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def run(self, timeout: float, echo=sys.stdout) -> JobResult:
        """Starts every host, streams their logs prefixed with the host name, and returns when all
        have exited; a host exiting non-zero stops the others (SageMaker ends the job)."""
        self._prepare_files()
        self._create_network()
        logs = {host: os.path.join(self.host_dir(host), "log.txt") for host in self.hosts}
        exit_codes: Dict[str, Optional[int]] = {}
        lock = threading.Lock()
        readers = []
        for host in self.hosts:
            process = self._start(host)
            self._processes[host] = process
            reader = threading.Thread(target=_copy_lines,
                                      args=(process.stdout, logs[host], host, echo, lock),
                                      daemon=True)
            reader.start()
            readers.append(reader)
        deadline = time.time() + timeout
        timed_out = False
        while len(exit_codes) < len(self.hosts):
            for host, process in self._processes.items():
                if host not in exit_codes and process.poll() is not None:
                    exit_codes[host] = process.returncode
            if any(code not in (0, None) for code in exit_codes.values()):
                break
            if time.time() > deadline:
                timed_out = True
                break
            time.sleep(0.5)
        self._stop_all()
        for reader in readers:
            reader.join(timeout=10)
        return JobResult(
            hosts=[HostResult(host, exit_codes.get(host), self.opt_ml(host), logs[host])
                   for host in self.hosts], timed_out=timed_out)

    def _stop_all(self) -> None:
        for process in self._processes.values():
            if process.poll() is None:
                try:  # unshare --kill-child takes the host's PID 1, and so all of the host, along
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for process in self._processes.values():
            process.wait()

    def __enter__(self) -> "Cluster":
        remove_stale_namespaces()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop_all()
        for forward in self._forwards:
            forward.close()
        self._forwards.clear()
        for namespace in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        self._namespaces.clear()


def _copy_lines(stream, log_file: str, host: str, echo, lock: threading.Lock) -> None:
    with open(log_file, "w", encoding="utf-8") as log:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            log.write(line)
            log.flush()
            if echo is not None:
                with lock:
                    echo.write(f"[{host}] {line}")
                    echo.flush()


_CLONE_NEWNET = 0x40000000


def _listening_socket_in(namespace: str, address: str, port: int) -> socket.socket:
    """A TCP socket listening at address:port in the network namespace `namespace`: a thread of
    its own joins the namespace (setns changes the calling thread only), binds, and ends; the
    socket stays in the namespace it was made in."""
    made: Dict[str, Any] = {}

    def make() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(f"/var/run/netns/{namespace}", "rb") as handle:
                if libc.setns(handle.fileno(), _CLONE_NEWNET) != 0:
                    error = ctypes.get_errno()
                    raise OSError(error, f"setns into {namespace}: {os.strerror(error)}")
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((address, port))
            listener.listen(64)
            made["socket"] = listener
        except BaseException as error:  # noqa: BLE001  (handed to the caller's thread)
            made["error"] = error

    thread = threading.Thread(target=make, name=f"listen-{namespace}")
    thread.start()
    thread.join()
    if "error" in made:
        raise made["error"]
    return made["socket"]


class _PortForward:
    """OUTSIDE:<port> in the hosts' network -> 127.0.0.1:<port> here, one connection at a time
    each way (a TCP relay: the servers here need not know the hosts' network)."""

    def __init__(self, namespace: str, port: int):
        self.port = port
        self._listener = _listening_socket_in(namespace, OUTSIDE, port)
        self._listener.settimeout(0.5)
        self._closed = threading.Event()
        self._open: List[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True, name=f"forward-{port}").start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                inside, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                here = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            except OSError:
                inside.close()
                continue
            inside.settimeout(None)
            here.settimeout(None)
            with self._lock:
                self._open += [inside, here]
            threading.Thread(target=self._relay, args=(inside, here), daemon=True).start()

    def _relay(self, inside: socket.socket, here: socket.socket) -> None:
        back = threading.Thread(target=_pump, args=(here, inside), daemon=True)
        back.start()
        _pump(inside, here)
        back.join()
        with self._lock:
            for connection in (inside, here):
                connection.close()
                if connection in self._open:
                    self._open.remove(connection)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for connection in self._open:
                connection.close()
            self._open.clear()


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copies one direction of a connection until its end, then ends that direction of the
    other side."""
    try:
        while True:
            data = source.recv(1 << 16)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    try:
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass
