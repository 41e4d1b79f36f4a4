"""Shared test set-up: quiet jsii's Node end-of-life banner before aws_cdk starts Node."""

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Serial on purpose: with pytest-xdist (`-n 2 --dist loadfile`) the launcher tests' session-scoped
# moto state went missing on one worker (NoSuchBucket in
# test_toolkit_distribution.py, 2026-11-23; not diagnosed), and `--dist loadgroup` cannot group
# under pytest 9 (xdist 3.8 rewrites `item._nodeid`, which pytest 9 no longer reads).

# What each test costs in CPU seconds, printed at the end (tests/cpu_time.py).
pytest_plugins = ["tests.cpu_time"]

# The IAM evaluation of the AWS calls of tests marked `iam_role` (tests/iam/plugin.py).
from tests.iam.plugin import (_iam_recording, iam_published, iam_template,  # noqa: E402,F401
                              pytest_configure, pytest_runtest_call)
