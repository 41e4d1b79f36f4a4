"""Shared test set-up: quiet jsii's Node end-of-life banner before aws_cdk starts Node."""

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

# `make test` runs `pytest -n 2 --dist loadgroup` (pytest-xdist). Each group runs whole on one
# worker, so its session and module fixtures are built once: the CDK apps synthesized for
# tests/infra, the moto server of tests/launcher, and each training test file's end-to-end runs.
# Two end-to-end files may run at once: the emulated hosts of each run have namespaces of their
# own, and the waits in them (toolkit start-up and its 30 s sleeps, sshd, failure detection) leave
# a core free for the other.
DIRECTORY_GROUPS = ("tests/infra/", "tests/launcher/")


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = item.nodeid.split("::")[0]
        group = next((d for d in DIRECTORY_GROUPS if path.startswith(d)), path)
        item.add_marker(pytest.mark.xdist_group(group))
