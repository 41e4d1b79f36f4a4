"""Shared test set-up: quiet jsii's Node end-of-life banner before aws_cdk starts Node."""

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Serial on purpose: with pytest-xdist (`-n 2 --dist loadfile`) the launcher tests' session-scoped
# moto state went missing on one worker (NoSuchBucket in
# test_toolkit_distribution.py, 2026-11-23; not diagnosed), and `--dist loadgroup` cannot group
# under pytest 9 (xdist 3.8 rewrites `item._nodeid`, which pytest 9 no longer reads).
