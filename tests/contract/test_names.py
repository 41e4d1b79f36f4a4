"""The contract's names: each defined once and consistent with itself."""

import pytest

from maskrcnn_contract import job_io, ssm


def test_ssm_names_are_unique_and_the_subsets_are_among_them():
    assert len(set(ssm.ALL)) == len(ssm.ALL)
    assert set(ssm.LISTS) <= set(ssm.REQUIRED) and set(ssm.PREFIXES) <= set(ssm.REQUIRED)
    assert not set(ssm.FSX) & set(ssm.REQUIRED)


def test_parameter_name_joins_the_path_and_refuses_unknown_names():
    assert ssm.parameter_name("/maskrcnn/", "data-bucket") == "/maskrcnn/data-bucket"
    with pytest.raises(KeyError, match="'data_bucket' is not a deployment parameter"):
        ssm.parameter_name("/maskrcnn", "data_bucket")


def test_job_io_names():
    assert job_io.TRAIN_CHANNEL in job_io.TRAINING_CHANNELS
    assert job_io.PRETRAINED_CHANNEL in job_io.TRAINING_CHANNELS
    assert job_io.CHECKPOINT_LOCAL_PATH.startswith("/opt/ml/")
    assert job_io.STAGING_PROGRAM.endswith(".py")


def test_hosting_parameters_are_required_of_every_deployment():
    """The deploy path reads these three from every deployment (the launcher's deploy.py)."""
    for leaf in ("model-role-arn", "inference-image-gpu-uri", "inference-image-cpu-uri"):
        assert leaf in ssm.REQUIRED and leaf not in ssm.LISTS + ssm.PREFIXES + ssm.FSX, leaf
    # Data capture lies below the output prefix: a relative key prefix, like the others.
    assert ssm.DATA_CAPTURE_PREFIX.endswith("/") and not ssm.DATA_CAPTURE_PREFIX.startswith("/")
