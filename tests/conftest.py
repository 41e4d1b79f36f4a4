"""Shared test set-up: quiet jsii's Node end-of-life banner before aws_cdk starts Node."""

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# `make test` runs `pytest -n 2 --dist loadfile` (pytest-xdist): each test file runs whole on one
# worker, so its module fixtures (a training test file's end-to-end runs) are built once; session
# fixtures (the CDK apps of tests/infra, moto of tests/launcher) once per worker that needs them.
# Not `--dist loadgroup`: under pytest 9 xdist 3.8 cannot tag its groups (it rewrites
# `item._nodeid`, which pytest 9 no longer reads), so every test would be its own unit.
# Two end-to-end files may run at once: the emulated hosts of each run have namespaces of their
# own, and the waits in them (toolkit start-up and its 30 s sleeps, sshd, failure detection) leave
# a core free for the other.
