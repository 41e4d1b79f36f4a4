"""Shared fixtures for the training-job tests: a small synthetic COCO set, and the launcher tests'
fake deployment for the requests played on emulated hosts."""

import pytest


@pytest.fixture(scope="session")
def small_coco(tmp_path_factory):
    """12 train / 6 val images of 64 px in COCO 2017 layout."""
    from maskrcnn_local import synthetic_coco

    out = tmp_path_factory.mktemp("coco")
    synthetic_coco.generate(str(out), num_train=12, num_val=6, image_size=64, seed=3)
    return str(out)


@pytest.fixture
def s3(monkeypatch):
    """A moto S3 client with the deployment's data bucket (tests/iam/deployment.BUCKET)."""
    import boto3
    from moto import mock_aws

    from tests.iam.deployment import BUCKET

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client


@pytest.fixture(scope="module")
def launcher_deployment():
    """The launcher tests' fake deployment (a moto server of its own, seeded the same way), whose
    launcher-built requests the module's runs play (tests/training/fake_deployment.py)."""
    from tests.training import fake_deployment

    with fake_deployment.running() as deployment:
        yield deployment
