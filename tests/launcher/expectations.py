"""Assertions on a captured CreateTrainingJob request, shared by the notebook and CLI tests."""

import re

from maskrcnn_contract import job_io
from maskrcnn_contract import metrics as job_metrics

from tests.launcher.conftest import BUCKET, JOB_PREFIX


def toolkit_hyperparameters(distribution: str, ranks_per_host: int = None) -> dict:
    """The toolkit's hyperparameters a request of `distribution` carries, and no others: each
    starts the job its own way (docs/aws-rules.md SM-13), written out here rather than taken
    from the contract so that a change there shows."""
    return {
        "horovod": {"sagemaker_mpi_enabled": "true",
                    "sagemaker_mpi_num_of_processes_per_host": str(ranks_per_host),
                    "sagemaker_mpi_custom_mpi_options": "-x NCCL_DEBUG=WARN"},
        "multi_worker_mirrored": {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"},
        "parameter_server": {},  # the job builds its own cluster: no toolkit flag
    }[distribution]


def assert_training_request(sent: dict, params: dict, data_source: str, instance_type: str,
                            instance_count: int, ranks_per_host: int = None, spot: bool = False,
                            run_name: str = None, distribution: str = "horovod",
                            input_mode: str = None, keep_alive_seconds: int = None) -> None:
    """The request as sent. `input_mode`: None expects the default, FastFile for S3 and File for
    a file system (TRN-1); TensorBoard's summaries go below the run's folder (TRN-2); no warm pool
    unless `keep_alive_seconds` (TRN-3)."""
    name = sent["TrainingJobName"]
    # <prefix>-<run name>-<time>, the run name by default <data source>-<6 hex digits>.
    run_pattern = re.escape(run_name) if run_name else rf"{data_source}-[0-9a-f]{{6}}"
    assert re.fullmatch(rf"{JOB_PREFIX}-{run_pattern}-\d{{14}}", name), name
    run = name.rsplit("-", 1)[0]
    channels = {c["ChannelName"]: c["DataSource"] for c in sent["InputDataConfig"]}
    # The dataset and the backbone; no earlier run to fine-tune from.
    assert set(channels) == {job_io.TRAIN_CHANNEL, job_io.PRETRAINED_CHANNEL}
    # Both inputs from the launch's data source, the backbone's checkpoint in pretrained/resnet50/.
    for name, below in (("train", "datasets/coco2017"), ("pretrained", "pretrained/resnet50")):
        if data_source == "s3":
            assert channels[name] == {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/{below}/",
                "S3DataDistributionType": "FullyReplicated"}}
        else:
            fs_id, fs_type, root = {
                "efs": (params["efs-id"], "EFS", ""),
                "fsx": (params["fsx-id"], "FSxLustre", f"/{params['fsx-mount-name']}"),
            }[data_source]
            assert channels[name] == {"FileSystemDataSource": {
                "FileSystemId": fs_id, "FileSystemType": fs_type, "FileSystemAccessMode": "ro",
                "DirectoryPath": f"{root}/{below}"}}
    assert sent["VpcConfig"] == {"Subnets": params["subnet-ids"].split(","),
                                 "SecurityGroupIds": params["security-group-ids"].split(",")}
    hps = sent["HyperParameters"]
    assert hps["distribution"] == distribution  # sent explicitly, the default too
    assert {k: v for k, v in hps.items() if k.startswith("sagemaker_")} == \
        toolkit_hyperparameters(distribution, ranks_per_host)
    assert hps["batch_norm"] == "frozen"  # the default, sent explicitly
    spec = sent["AlgorithmSpecification"]
    assert spec["TrainingImage"] == params["training-image-uri"]
    assert spec["MetricDefinitions"] == job_metrics.METRIC_DEFINITIONS
    assert sent["RoleArn"] == params["training-role-arn"]
    assert sent["ResourceConfig"]["InstanceType"] == instance_type
    assert sent["ResourceConfig"]["InstanceCount"] == instance_count
    assert sent["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/jobs/"
    assert sent["CheckpointConfig"] == {"S3Uri": f"s3://{BUCKET}/checkpoints/{run}/",
                                        "LocalPath": job_io.CHECKPOINT_LOCAL_PATH}
    assert spec["TrainingInputMode"] == (input_mode or ("FastFile" if data_source == "s3"
                                                         else "File"))
    assert not any("InputMode" in c for c in sent["InputDataConfig"])  # the job's mode for all
    assert sent["TensorBoardOutputConfig"] == {
        "S3OutputPath": f"s3://{BUCKET}/jobs/tensorboard/{run}/",
        "LocalPath": "/opt/ml/output/tensorboard"}  # written out: a change in the contract shows
    assert sent["ResourceConfig"].get("KeepAlivePeriodInSeconds") == keep_alive_seconds
    assert sent.get("EnableManagedSpotTraining", False) is spot
    if spot:
        stop = sent["StoppingCondition"]
        assert stop["MaxWaitTimeInSeconds"] >= stop["MaxRuntimeInSeconds"]
