"""The container layout as the job reads it: the checkpoint directory is the launcher's."""

from maskrcnn_contract import job_io

from maskrcnn_job import sagemaker_env


def test_checkpoint_dir_is_where_the_launcher_has_sagemaker_sync(tmp_path):
    assert sagemaker_env.load({}).checkpoint_dir == job_io.CHECKPOINT_LOCAL_PATH
    moved = sagemaker_env.load({"OPT_ML_ROOT": str(tmp_path)})
    assert moved.checkpoint_dir == str(tmp_path / "checkpoints")


def test_host_comes_from_resourceconfig_not_the_masters_forwarded_variables(tmp_path):
    """The toolkit's mpirun forwards the master's SM_CURRENT_HOST to ranks on other hosts."""
    import json

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
