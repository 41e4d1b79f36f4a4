"""A synchronous step on 2 replicas is the step on all their images: the gradient averaged, not
summed, at the learning rate the schedule scales with the replicas (tests/training/averaging_ranks.py
says how). Horovod's 2 ranks are checked in test_batch_norm.py's mpirun; here
MultiWorkerMirroredStrategy's 2 workers, on this host's loopback."""

import json
import os
import socket
import subprocess
import sys

import pytest

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "averaging_ranks.py")


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_a_mirrored_step_on_2_workers_is_the_step_on_all_their_images(tmp_path):
    workers = [f"localhost:{port}" for port in _free_ports(2)]
    out = tmp_path / "averaging.json"
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), AVERAGING_OUT=str(out),
                   TF_CPP_MIN_LOG_LEVEL="2")
        processes.append(subprocess.Popen([sys.executable, PROGRAM], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))
    try:
        outputs = [p.communicate(timeout=240)[0] for p in processes]
    finally:
        for p in processes:
            p.kill()
    assert all(p.returncode == 0 for p in processes), "\n".join(o[-3000:] for o in outputs)
    result = json.loads(out.read_text())
    assert result["replicas"] == 2 and result["peak_learning_rate"] == pytest.approx(0.02)
    # Summed gradients would double the update, a rate not scaled with the replicas halve it.
    assert result["relative_error"] < 1e-5, result
