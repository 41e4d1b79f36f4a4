"""Synthesizes each app variant once per session; tests read the templates from the assembly.

Synthesis costs ~10 s (mostly jsii start-up and cdk-nag), so every test shares these apps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from app import build_app
from tests.paths import REPO

CDK_JSON_CONTEXT = json.loads((REPO / "cdk.json").read_text())["context"]

PIPELINE_CONTEXT = {
    "maskrcnn:pipeline_enabled": True,
    "maskrcnn:pipeline_connection_arn":
        "arn:aws:codeconnections:us-east-1:123456789012:connection/12345678-1234-1234-1234-123456789012",
    "maskrcnn:pipeline_repository": "acme/maskrcnn-sagemaker",
    "maskrcnn:pipeline_account": "123456789012",
    "maskrcnn:pipeline_region": "us-east-1",
}
# Every non-default branch at once but the Git repository (an isolated VPC reaches no Git host,
# see NO_FSX_CONTEXT): a named region whose Deep Learning Containers live in their own registry
# account, isolated VPC over three AZs, an existing EFS, SCRATCH_2 FSx, an existing SNS topic, an
# MLflow tracking server (reached through its interface endpoint only).
VARIANT_CONTEXT = {
    "maskrcnn:deployment_name": "mrcnn-dev",
    "maskrcnn:region": "eu-south-1",
    "maskrcnn:nat_gateways": 0,
    "maskrcnn:availability_zones": ["eu-south-1a", "eu-south-1b", "eu-south-1c"],
    "maskrcnn:existing_efs_id": "fs-0123456789abcdef0",
    "maskrcnn:fsx_deployment_type": "SCRATCH_2",
    "maskrcnn:fsx_storage_capacity_gib": 2400,
    "maskrcnn:notification_topic_arn": "arn:aws:sns:eu-south-1:123456789012:ml-alerts",
    "maskrcnn:mlflow": "tracking-server",
}
EXISTING_TOPIC = VARIANT_CONTEXT["maskrcnn:notification_topic_arn"]
# FSx disabled; with NAT, so a Git repository whose secret the stack creates; an email address
# subscribed to the stack's own topic.
NO_FSX_CONTEXT = {
    "maskrcnn:fsx_enabled": False,
    "maskrcnn:notification_email": "ml-team@example.com",
    "maskrcnn:git_repository_url": "https://github.com/acme/maskrcnn-notebooks.git",
    "maskrcnn:git_username": "ml-bot",
}


@dataclass
class Synthesized:
    app: cdk.App
    outdir: Path
    templates: dict[str, dict]
    deployment_name: str

    @property
    def deployment(self) -> dict:
        """The deployment stack's template (network, storage, training, notebook)."""
        return self.templates[self.deployment_name]

    @property
    def deployment_template(self) -> Template:
        return Template.from_json(self.deployment)

    def template(self, suffix: str) -> Template:
        return Template.from_json(self.raw(suffix))

    def raw(self, suffix: str) -> dict:
        matches = [name for name in self.templates if name.endswith(suffix)]
        assert len(matches) == 1, f"{suffix!r} matches {matches} of {sorted(self.templates)}"
        return self.templates[matches[0]]


def synthesize(tmp_path_factory, name: str, context: dict) -> Synthesized:
    outdir = tmp_path_factory.mktemp(name)
    app = cdk.App(context={**CDK_JSON_CONTEXT, **context}, outdir=str(outdir))
    build_app(app)
    assembly = app.synth()
    templates = {}
    for stack in assembly.stacks_recursively:
        templates[stack.stack_name] = stack.template
    name = {**CDK_JSON_CONTEXT, **context}["maskrcnn:deployment_name"]
    return Synthesized(app, outdir, templates, name)


@pytest.fixture(scope="session")
def default_app(tmp_path_factory) -> Synthesized:
    return synthesize(tmp_path_factory, "default", {})


@pytest.fixture(scope="session")
def variant_app(tmp_path_factory) -> Synthesized:
    return synthesize(tmp_path_factory, "variant", VARIANT_CONTEXT)


@pytest.fixture(scope="session")
def pipeline_app(tmp_path_factory) -> Synthesized:
    return synthesize(tmp_path_factory, "pipeline", PIPELINE_CONTEXT)


@pytest.fixture(scope="session")
def no_fsx_app(tmp_path_factory) -> Synthesized:
    return synthesize(tmp_path_factory, "no-fsx", NO_FSX_CONTEXT)
