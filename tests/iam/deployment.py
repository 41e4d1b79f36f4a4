"""The fake deployment the IAM evaluation synthesizes and resolves: the launcher tests' (the
deployment name, region and account of tests/launcher/conftest.py and moto's account), and the
values it publishes where a test has no moto server seeding them (the staging tests)."""

from __future__ import annotations

import json
from pathlib import Path

from stacks import dlc

DEPLOYMENT_NAME = "maskrcnn-test"
SSM_PATH = "/" + DEPLOYMENT_NAME
REGION = "eu-west-2"
ACCOUNT = "123456789012"  # moto's default account
BUCKET = f"{DEPLOYMENT_NAME}-data-{ACCOUNT}"
ROOT = Path(__file__).resolve().parents[2]

# What the deployment publishes, for tests that have no moto server seeding it: IDs in AWS's
# forms, prefixes and images as the template publishes them.
STAND_INS = {
    "region": REGION,
    "job-name-prefix": DEPLOYMENT_NAME,
    "data-bucket": BUCKET,
    "datasets-prefix": "datasets/",
    "imports-prefix": "imports/",
    "pretrained-prefix": "pretrained/",
    "output-prefix": "jobs/",
    "checkpoint-prefix": "checkpoints/",
    "samples-prefix": "samples/",
    "internet-egress": "true",
    "kms-key-arn": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/00000000-0000-0000-0000-000000000000",
    "efs-id": "fs-00000000",
    "efs-datasets-path": "/datasets",
    "efs-pretrained-path": "/pretrained",
    "fsx-id": "fs-00000000000000001",
    "fsx-mount-name": "abcd1234",
    "fsx-datasets-path": "/abcd1234/datasets",
    "fsx-pretrained-path": "/abcd1234/pretrained",
    "datasync-task-arns": ",".join(f"arn:aws:datasync:{REGION}:{ACCOUNT}:task/task-0000000000000000{i}"
                                   for i in (1, 2)),
    "subnet-ids": "subnet-00000000000000001,subnet-00000000000000002",
    "security-group-ids": "sg-00000000000000001",
    "training-role-arn": f"arn:aws:iam::{ACCOUNT}:role/training",
    "staging-role-arn": f"arn:aws:iam::{ACCOUNT}:role/staging",
    "model-role-arn": f"arn:aws:iam::{ACCOUNT}:role/model",
    "training-image-uri": (f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/"
                           f"cdk-hnb659fds-container-assets-{ACCOUNT}-{REGION}:0123abcd"),
    "inference-image-gpu-uri": dlc.inference_image(REGION, "gpu"),
    "inference-image-cpu-uri": dlc.inference_image(REGION, "cpu"),
    "model-package-group": f"{DEPLOYMENT_NAME}-models",
    "mlflow-tracking-server-arn": (f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:mlflow-tracking-server/"
                                   f"{DEPLOYMENT_NAME}-mlflow"),
}
STAND_IN_VPC = "vpc-00000000000000001"


def synthesize(outdir: Path) -> dict:
    """The deployment stack's template of an app deployed as DEPLOYMENT_NAME in REGION with the
    MLflow tracking server (the cdk.json context otherwise), as tests/infra/conftest.py
    synthesizes its apps."""
    import aws_cdk as cdk

    from app import build_app

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    app = cdk.App(context={**context, "maskrcnn:deployment_name": DEPLOYMENT_NAME,
                           "maskrcnn:region": REGION, "maskrcnn:mlflow": "tracking-server"},
                  outdir=str(outdir))
    build_app(app)
    stacks = {s.stack_name: s.template for s in app.synth().stacks_recursively}
    return stacks[DEPLOYMENT_NAME]
