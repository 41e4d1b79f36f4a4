"""Shared test set-up: quiet jsii's Node end-of-life banner before aws_cdk starts Node."""

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
