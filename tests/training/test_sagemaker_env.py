"""The container layout as the job reads it: the checkpoint directory is the launcher's."""

from maskrcnn_contract import job_io

from maskrcnn_job import sagemaker_env


def test_checkpoint_dir_is_where_the_launcher_has_sagemaker_sync(tmp_path):
    assert sagemaker_env.load({}).checkpoint_dir == job_io.CHECKPOINT_LOCAL_PATH
    moved = sagemaker_env.load({"OPT_ML_ROOT": str(tmp_path)})
    assert moved.checkpoint_dir == str(tmp_path / "checkpoints")
