"""The host list -> TF_CONFIG of each strategy, on 1, 2 and 5 hosts (pure Python)."""

import glob
import json
import os
import re

import pytest

from maskrcnn_job.distribution import cluster_spec
from tests.paths import REPO



def _hosts(n):
    return [f"algo-{i + 1}" for i in range(n)]


@pytest.mark.parametrize("count", [1, 2, 5])
def test_multi_worker_mirrored_is_one_worker_per_host_on_port_8890(count):
    hosts = _hosts(count)
    for index, host in enumerate(hosts):
        config = cluster_spec.multi_worker_mirrored(hosts, host)
        assert config["cluster"] == {"worker": [f"{h}:8890" for h in hosts]}
        assert config["task"] == {"type": "worker", "index": index}


def test_multi_worker_mirrored_matches_the_toolkits_own_tf_config():
    """The toolkit writes TF_CONFIG under its MWMS flag; the job builds the same one when it is
    missing. Compared with the installed toolkit's function, not with a copy of its output."""
    training = glob.glob(os.path.join(
        REPO, ".venv-dlc", "lib", "python3*", "site-packages", "sagemaker_tensorflow_container",
        "training.py"))
    if not training:
        pytest.skip("the DLC stand-in (.venv-dlc) is not set up")
    source = open(training[0], encoding="utf-8").read()
    match = re.search(r"def _build_tf_config_for_mwms\(.*?\n(?=def )", source, re.S)
    namespace = {}
    exec(match.group(0), namespace)  # pure dict building, no imports  # noqa: S102
    hosts = _hosts(5)
    for host in hosts:
        assert cluster_spec.multi_worker_mirrored(hosts, host) == \
            namespace["_build_tf_config_for_mwms"](hosts, host)


@pytest.mark.parametrize("count", [2, 5])
def test_parameter_server_cluster_chief_first_host_worker_and_ps_everywhere(count):
    hosts = _hosts(count)
    cluster = cluster_spec.parameter_server_cluster(hosts)
    assert cluster == {"chief": ["algo-1:2222"],
                       "worker": [f"{h}:2223" for h in hosts],
                       "ps": [f"{h}:2224" for h in hosts]}
    # Only the task types TF2's ParameterServerStrategy accepts (no TF1 `master`).
    assert set(cluster) <= {"chief", "worker", "ps", "evaluator"}
    every_task = [t for h in hosts for t in cluster_spec.parameter_server_tasks(hosts, h)]
    assert sorted(every_task) == sorted(
        [("chief", 0)] + [(kind, i) for kind in ("worker", "ps") for i in range(count)])
    assert cluster_spec.parameter_server_tasks(hosts, "algo-1") == [
        ("ps", 0), ("worker", 0), ("chief", 0)]
    assert cluster_spec.parameter_server_tasks(hosts, hosts[-1]) == [
        ("ps", count - 1), ("worker", count - 1)]
    config = cluster_spec.parameter_server(hosts, ("worker", count - 1))
    assert config["task"] == {"type": "worker", "index": count - 1}
    assert config["cluster"] == cluster


def test_parameter_server_on_one_host_talks_over_localhost():
    cluster = cluster_spec.parameter_server_cluster(["algo-1"])
    assert cluster == {"chief": ["localhost:2222"], "worker": ["localhost:2223"],
                       "ps": ["localhost:2224"]}
    assert cluster_spec.parameter_server_tasks(["algo-1"], "algo-1") == [
        ("ps", 0), ("worker", 0), ("chief", 0)]


def test_tf_config_of_the_process_is_parsed_or_named_as_malformed():
    config = cluster_spec.parameter_server(_hosts(2), ("ps", 1))
    assert cluster_spec.task_of(cluster_spec.current({"TF_CONFIG": json.dumps(config)})) == ("ps", 1)
    assert cluster_spec.current({}) is None
    with pytest.raises(cluster_spec.ClusterError, match="TF_CONFIG is not a cluster"):
        cluster_spec.current({"TF_CONFIG": '{"cluster": {}}'})


@pytest.mark.parametrize("hosts, current, message", [
    ([], "algo-1", "no hosts"),
    (["algo-1", "algo-1"], "algo-1", "listed twice"),
    (["algo-1", "algo-2"], "algo-3", "'algo-3' is not one of the hosts"),
])
def test_bad_host_lists_are_refused_by_name(hosts, current, message):
    with pytest.raises(cluster_spec.ClusterError, match=message):
        cluster_spec.multi_worker_mirrored(hosts, current)
    with pytest.raises(cluster_spec.ClusterError, match=message):
        cluster_spec.parameter_server_tasks(hosts, current)
