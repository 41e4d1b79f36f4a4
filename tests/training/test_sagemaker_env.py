"""The container layout as the job reads it: the checkpoint directory is the launcher's."""

import json

import pytest
from maskrcnn_contract import job_io

from maskrcnn_job import sagemaker_env


def test_checkpoint_dir_is_where_the_launcher_has_sagemaker_sync(tmp_path):
    assert sagemaker_env.load({}).checkpoint_dir == job_io.CHECKPOINT_LOCAL_PATH
    moved = sagemaker_env.load({"OPT_ML_ROOT": str(tmp_path)})
    assert moved.checkpoint_dir == str(tmp_path / "checkpoints")


def test_host_comes_from_resourceconfig_not_the_masters_forwarded_variables(tmp_path):
    """The toolkit's mpirun forwards the master's SM_CURRENT_HOST to ranks on other hosts."""
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-2", "hosts": ["algo-1", "algo-2"]}))
    env = sagemaker_env.load({"OPT_ML_ROOT": str(tmp_path), "SM_CURRENT_HOST": "algo-1",
                              "SM_HOSTS": '["algo-1", "algo-2"]'})
    assert env.current_host == "algo-2" and env.hosts == ["algo-1", "algo-2"]
    # Without the file (a bare local run), the variables are all there is.
    bare = sagemaker_env.load({"OPT_ML_ROOT": str(tmp_path / "none"), "SM_CURRENT_HOST": "algo-3",
                               "SM_HOSTS": '["algo-3"]'})
    assert bare.current_host == "algo-3"


def _job(tmp_path, hyperparameters: dict, environ: dict):
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    return sagemaker_env.load({"OPT_ML_ROOT": str(tmp_path), **environ})


def test_a_launch_keeps_its_checkpoints_in_the_synced_directory(tmp_path):
    """Every job of a run resumes the run's checkpoints: the directory SageMaker syncs with the
    run's CheckpointConfig, whatever the job is named."""
    env = _job(tmp_path, {"max_steps": "10"}, {"TRAINING_JOB_NAME": "maskrcnn-run-1-2026"})
    assert sagemaker_env.own_checkpoint_dir(env) == str(tmp_path / "checkpoints")


def test_a_tuning_candidate_keeps_its_checkpoints_below_its_job_name(tmp_path):
    """A candidate (SageMaker's _tuning_objective_metric among its hyperparameters) shares the
    synced directory with the tuning job's other candidates: its own files go below its training
    job's name, which SageMaker sets in TRAINING_JOB_NAME (docs/aws-rules.md TUN-6)."""
    candidate = {"max_steps": "10", job_io.TUNING_OBJECTIVE_METRIC: "eval/best_objective"}
    env = _job(tmp_path, candidate, {"TRAINING_JOB_NAME": "maskrcnn-lr-1-003-0e830ada"})
    assert env.job_name == "maskrcnn-lr-1-003-0e830ada"
    assert sagemaker_env.own_checkpoint_dir(env) == \
        str(tmp_path / "checkpoints" / "maskrcnn-lr-1-003-0e830ada")


@pytest.mark.parametrize("environ", [{}, {"TRAINING_JOB_NAME": ""},
                                     {"TRAINING_JOB_NAME": "../other-candidate"}])
def test_a_candidate_without_its_job_name_is_a_clear_error(tmp_path, environ):
    """Never the shared directory instead: the candidate would resume another's weights."""
    env = _job(tmp_path, {job_io.TUNING_OBJECTIVE_METRIC: "eval/best_objective"}, environ)
    with pytest.raises(sagemaker_env.ContractError,
                       match=r"a tuning job's candidate \(_tuning_objective_metric among its "
                             r"hyperparameters\) keeps its checkpoints below its training job's "
                             r"name, and TRAINING_JOB_NAME="):
        sagemaker_env.own_checkpoint_dir(env)
