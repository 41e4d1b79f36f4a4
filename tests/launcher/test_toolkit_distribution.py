"""docs/aws-rules.md SM-13: what the DLC's TensorFlow training toolkit does with the toolkit
hyperparameters the launcher sends for each distribution. The real toolkit
(sagemaker-tensorflow-training's sagemaker_tensorflow_container/training.py over sagemaker-training,
installed in .venv-dlc as in the image) reads each request's hyperparameters as SageMaker hands
them over (input/config/hyperparameters.json) on every host of a two-host job; only the program
start (`entry_point.run`) is replaced by a recorder."""

import json
import subprocess

import pytest

from maskrcnn_launcher.training import jobs, submit
from maskrcnn_launcher.training.options import LaunchOptions

from tests.launcher.conftest import shared_boto_session
from tests.paths import REPO

DLC_PYTHON = REPO / ".venv-dlc" / "bin" / "python"
HOSTS = ["algo-1", "algo-2"]

# Run by the DLC venv's Python: argv = base dir, {case: hyperparameters}, hosts. Prints, per case
# and host, the runner the toolkit starts the program with and the TF_CONFIG it gives it; then the
# cluster it would build with its own parameter-server flag.
TOOLKIT_RUN = r"""
import json, os, sys, types
base, cases, hosts = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
os.environ["SAGEMAKER_BASE_DIR"] = base
# training.py imports TensorFlow at the top; nothing run here calls it.
sys.modules["tensorflow"] = types.ModuleType("tensorflow")
from sagemaker_training import entry_point, environment, runner
from sagemaker_tensorflow_container import training

config = os.path.join(base, "input", "config")
os.makedirs(config, exist_ok=True)
with open(os.path.join(config, "inputdataconfig.json"), "w") as f:
    json.dump({}, f)
started = []
entry_point.run = lambda **kwargs: started.append(kwargs)
out = {}
for case, hyperparameters in cases.items():
    with open(os.path.join(config, "hyperparameters.json"), "w") as f:
        json.dump(hyperparameters, f)
    for host in hosts:
        env = environment.Environment(resource_config={
            "current_host": host, "hosts": hosts, "network_interface_name": "eth0"})
        training.train(env, [])
        call, = started
        started.clear()
        out.setdefault(case, {})[host] = {
            "runner": call.get("runner_type", runner.ProcessRunnerType).name,
            "tf_config": json.loads(call["env_vars"].get("TF_CONFIG", "null"))}
out["toolkit_ps_flag"] = training._build_tf_config_for_ps(hosts, hosts[0])
print(json.dumps(out))
"""


def test_the_toolkit_starts_each_distribution_as_the_launcher_asks(deployment, tmp_path):
    """Rule SM-13. horovod: mpirun on every host, no TF_CONFIG. multi_worker_mirrored: the
    program once per host with a TF_CONFIG of one worker per host on port 8890. parameter_server
    (no flag): the program once per host, no TF_CONFIG, so the job builds its own cluster. The
    toolkit's own parameter-server flag would give a TF1 cluster with a `master` task, and PS
    servers of its own on port 2223, which is why the launcher never sends it."""
    if not DLC_PYTHON.exists():
        pytest.fail("the DLC stand-in venv .venv-dlc is missing: run `make setup`")
    cases = {}
    for distribution in ("horovod", "multi_worker_mirrored", "parameter_server"):
        launch = jobs.training_job(deployment, LaunchOptions(distribution=distribution),
                                   shared_boto_session())
        cases[distribution] = submit.send(launch, deployment, dry_run=True)["HyperParameters"]
    result = subprocess.run([str(DLC_PYTHON), "-c", TOOLKIT_RUN, str(tmp_path),
                             json.dumps(cases), json.dumps(HOSTS)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    started = json.loads(result.stdout.strip().splitlines()[-1])

    assert started["horovod"] == {h: {"runner": "MPI", "tf_config": None} for h in HOSTS}
    workers = [f"{h}:8890" for h in HOSTS]
    assert started["multi_worker_mirrored"] == {
        h: {"runner": "Process",
            "tf_config": {"cluster": {"worker": workers}, "environment": "cloud",
                          "task": {"type": "worker", "index": i}}}
        for i, h in enumerate(HOSTS)}
    assert started["parameter_server"] == {h: {"runner": "Process", "tf_config": None}
                                           for h in HOSTS}
    cluster = started["toolkit_ps_flag"]["cluster"]
    assert cluster["master"] == ["algo-1:2222"] and "chief" not in cluster
    assert cluster["ps"] == ["algo-1:2223", "algo-2:2223"]
