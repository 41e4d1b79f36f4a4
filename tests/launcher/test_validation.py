"""The one validation of a launch, on the CreateTrainingJob request the SDK sends, and the launch
options that are refused before anything is built."""

import copy
import dataclasses

import boto3
import pytest

from maskrcnn_contract import ssm
from maskrcnn_launcher import data_prep, instances, jobs, settings, submit, validation
from maskrcnn_launcher.options import LaunchOptions, LaunchRequestError

from tests.launcher.conftest import JOB_PREFIX


def sent(deployment, **options):
    """The request as the SDK would send it (a dry run: validated, not sent)."""
    launch = jobs.training_job(deployment, LaunchOptions(**options), boto3.session.Session())
    return submit.send(launch, deployment, dry_run=True)


def problems_of(request, deployment, kind=validation.TRAINING):
    with pytest.raises(LaunchRequestError) as error:
        validation.validate(request, deployment, kind)
    return str(error.value)


def test_gpu_table_gives_processes_per_host():
    assert instances.processes_per_host("ml.p4d.24xlarge") == 8
    assert instances.processes_per_host("ml.g5.12xlarge") == 4
    assert instances.processes_per_host("ml.p3dn.24xlarge") == 8
    assert instances.processes_per_host("ml.m5.xlarge", explicit=1) == 1


def _fs(request):
    return request["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r["InputDataConfig"][0].update(ChannelName="training"),
     "channel 'training' is not read by the training job"),
    (lambda r: _fs(r).update(FileSystemAccessMode="rw"), "must be mounted read-only"),
    (lambda r: _fs(r).update(DirectoryPath="/fsx/datasets/coco2017"),
     "must start with the file system's mount name, /abcd1234/"),
    (lambda r: r["VpcConfig"].update(Subnets=r["VpcConfig"]["Subnets"][:1]),
     "differs from the deployment's subnet-ids"),
    (lambda r: r["VpcConfig"].update(SecurityGroupIds=["sg-0123456789abcdef0"]),
     "differs from the deployment's subnet-ids and security-group-ids"),
    (lambda r: r.update(TrainingJobName="other-fsx-1"), f"must start with {JOB_PREFIX}-"),
    (lambda r: r.update(RoleArn="arn:aws:iam::123456789012:role/admin"),
     "is not the deployment's training role"),
    (lambda r: r["InputDataConfig"].pop(0), "needs a 'train' channel"),
    (lambda r: r["HyperParameters"].update(image_size="big"), "image_size='big': expected an integer"),
    (lambda r: r["HyperParameters"].update(sagemaker_mpi_enabled="false"),
     "the toolkit's MPI runner must be enabled"),
])
def test_validation_names_the_bad_value(deployment, mutate, message):
    bad = copy.deepcopy(sent(deployment, data_source="fsx"))
    mutate(bad)
    assert message in problems_of(bad, deployment)


@pytest.mark.parametrize("instance_type, local", [
    ("ml.p4d.24xlarge", True), ("ml.p3dn.24xlarge", True), ("ml.p5.48xlarge", True),
    ("ml.g5.12xlarge", True), ("ml.g6.xlarge", True), ("ml.g4dn.12xlarge", True),
    ("ml.m5d.2xlarge", True), ("ml.p3.16xlarge", False), ("ml.m5.4xlarge", False),
])
def test_volume_key_only_where_sagemaker_accepts_one(deployment, instance_type, local):
    """ResourceConfig: "You can't request a VolumeKmsKeyId when using an instance type with local
    storage" (docs/aws-rules.md)."""
    assert instances.has_local_storage(instance_type) is local
    request = sent(deployment, instance_type=instance_type, processes_per_host=1)
    assert ("VolumeKmsKeyId" in request["ResourceConfig"]) is not local
    if local:
        bad = copy.deepcopy(request)
        bad["ResourceConfig"]["VolumeKmsKeyId"] = deployment.kms_key_arn
        assert "has local NVMe storage" in problems_of(bad, deployment)


def test_every_problem_is_reported_at_once(deployment):
    bad = copy.deepcopy(sent(deployment, data_source="efs"))
    bad["VpcConfig"]["SecurityGroupIds"] = []
    _fs(bad)["FileSystemAccessMode"] = "rw"
    text = problems_of(bad, deployment)
    assert "differs from the deployment's" in text and "read-only" in text


def test_staging_request_passes_as_staging_and_not_as_training(fake_aws, deployment):
    launch = jobs.staging_job(deployment, boto3.session.Session())
    request = submit.send(launch, deployment, dry_run=True)
    assert request["RoleArn"] == deployment.staging_role_arn
    assert "is not the deployment's training role" in problems_of(request, deployment)


def test_fsx_path_from_ssm_must_start_with_the_mount_name(deployment):
    broken = dataclasses.replace(deployment, fsx_data_path="/datasets/coco2017")
    with pytest.raises(LaunchRequestError, match="/abcd1234/"):
        sent(broken, data_source="fsx")


def test_fsx_disabled_deployment_says_so(deployment):
    no_fsx = dataclasses.replace(deployment, fsx_id=None, fsx_mount_name=None, fsx_data_path=None)
    with pytest.raises(LaunchRequestError, match="no FSx file system"):
        sent(no_fsx, data_source="fsx")


def test_a_run_keeps_its_checkpoints_across_jobs(deployment):
    first = sent(deployment, run_name="baseline-1")
    assert first["TrainingJobName"].startswith(f"{JOB_PREFIX}-baseline-1-")
    uri = f"s3://{deployment.data_bucket}/checkpoints/{JOB_PREFIX}-baseline-1/"
    assert first["CheckpointConfig"]["S3Uri"] == uri
    assert sent(deployment, run_name="baseline-1")["CheckpointConfig"]["S3Uri"] == uri
    new_run = sent(deployment)["CheckpointConfig"]["S3Uri"]
    assert new_run != uri and new_run.startswith(f"s3://{deployment.data_bucket}/checkpoints/")


@pytest.mark.parametrize("run_name, message", [
    ("Baseline", "lowercase letters and digits"),
    ("a--b", "lowercase letters and digits"),
    ("x" * 40, "leave room for the time stamp"),
])
def test_bad_run_name_is_refused_before_building(deployment, run_name, message):
    with pytest.raises(LaunchRequestError, match=message):
        sent(deployment, run_name=run_name)


def test_spot_sets_a_wait_time_and_keeps_checkpoints(deployment):
    request = sent(deployment, use_spot=True, max_run_hours=10)
    assert request["EnableManagedSpotTraining"] is True
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 36000,
                                            "MaxWaitTimeInSeconds": 72000}
    bad = copy.deepcopy(request)
    del bad["CheckpointConfig"]
    assert "managed spot without checkpoints" in problems_of(bad, deployment)


def test_launcher_reads_exactly_the_contracts_parameters():
    assert set(settings.parameter_names()) == set(ssm.ALL)


def test_missing_ssm_parameters_are_listed():
    with pytest.raises(settings.SettingsError, match="efs-id, efs-data-path"):
        settings.from_parameters("/x", {"region": "eu-west-2"})


def test_datasync_follows_a_running_execution_instead_of_starting_another(fake_aws, deployment):
    client = fake_aws.client("datasync")
    running = client.start_task_execution(TaskArn=deployment.datasync_task_arn)["TaskExecutionArn"]
    said = []
    execution = data_prep.sync_to_efs(client, deployment, poll=0, echo=said.append)
    assert execution["TaskExecutionArn"] == running
    assert said[0].startswith("DataSync: following the execution already running")
    assert said[-1] == "DataSync: SUCCESS"


def test_console_links_use_the_partitions_console():
    from maskrcnn_launcher import follow

    assert follow.console_urls("eu-west-2", "j")["job"].startswith("https://eu-west-2.console.aws.amazon.com/")
    assert follow.console_urls("cn-north-1", "j")["job"].startswith("https://console.amazonaws.cn/")
