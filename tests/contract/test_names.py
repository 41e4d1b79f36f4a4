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
    """The deploy path reads these three from every deployment (the launcher's serving/endpoint_plan.py)."""
    for leaf in ("model-role-arn", "inference-image-gpu-uri", "inference-image-cpu-uri"):
        assert leaf in ssm.REQUIRED and leaf not in ssm.LISTS + ssm.PREFIXES + ssm.FSX, leaf
    # Data capture lies below the output prefix: a relative key prefix, like the others.
    assert ssm.DATA_CAPTURE_PREFIX.endswith("/") and not ssm.DATA_CAPTURE_PREFIX.startswith("/")


def test_toolkit_names_are_the_installed_toolkits_own():
    """job_io spells the training toolkits' hyperparameter names once; they must be the names the
    toolkits themselves read: sagemaker-training's `params` and sagemaker-tensorflow-training's
    `training` module, at the image's pins (installed in .venv-dlc; read, not imported, so no
    TensorFlow start-up)."""
    import ast
    import subprocess
    from pathlib import Path

    dlc_python = Path(__file__).resolve().parents[2] / ".venv-dlc" / "bin" / "python"
    site = subprocess.run([str(dlc_python), "-c", "import sagemaker_training, os; "
                           "print(os.path.dirname(os.path.dirname(sagemaker_training.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()

    def constants(relative: str) -> dict:
        tree = ast.parse((Path(site) / relative).read_text())
        found = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                try:
                    found[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    pass  # computed, e.g. USER_PROGRAM_PARAM.upper()
        return found

    params = constants("sagemaker_training/params.py")
    tensorflow = constants("sagemaker_tensorflow_container/training.py")
    assert job_io.PROGRAM == params["USER_PROGRAM_PARAM"]
    assert job_io.PROGRAM_ENV == params["USER_PROGRAM_PARAM"].upper()  # params.USER_PROGRAM_ENV
    assert job_io.MPI_ENABLED == params["MPI_ENABLED"]
    assert job_io.MPI_PROCESSES_PER_HOST == params["MPI_PROCESSES_PER_HOST"]
    assert job_io.MPI_CUSTOM_OPTIONS == params["MPI_CUSTOM_OPTIONS"]
    assert job_io.DISTRIBUTION_INSTANCE_GROUPS == params["DISTRIBUTION_INSTANCE_GROUPS"]
    assert job_io.TUNING_OBJECTIVE_METRIC == params["TUNING_METRIC_PARAM"]
    assert job_io.TRAINING_JOB_NAME_ENV == params["TRAINING_JOB_ENV"]
    assert params["SMDATAPARALLEL_CUSTOM_MPI_OPTIONS"].startswith(job_io.DATA_PARALLEL_PREFIX)
    assert tensorflow["SAGEMAKER_DISTRIBUTED_DATAPARALLEL_ENABLED"].startswith(
        job_io.DATA_PARALLEL_PREFIX)
    assert job_io.MWMS_TOOLKIT_FLAG == tensorflow["SAGEMAKER_MULTI_WORKER_MIRRORED_STRATEGY_ENABLED"]
    assert job_io.PARAMETER_SERVER_TOOLKIT_FLAG == tensorflow["SAGEMAKER_PARAMETER_SERVER_ENABLED"]
