"""Validation of requests for what neither botocore nor moto checks."""

import copy
import dataclasses

import pytest

from maskrcnn_launcher import data_prep, instances, request, settings


def training(deployment, **options):
    return request.build_training_request(deployment, request.LaunchOptions(**options))


def problems_of(req, deployment):
    with pytest.raises(request.LaunchRequestError) as error:
        request.validate(req, deployment)
    return str(error.value)


def test_gpu_table_gives_processes_per_host():
    assert instances.processes_per_host("ml.p4d.24xlarge") == 8
    assert instances.processes_per_host("ml.g5.12xlarge") == 4
    assert instances.processes_per_host("ml.p3dn.24xlarge") == 8
    assert instances.processes_per_host("ml.m5.xlarge", explicit=1) == 1


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r["InputDataConfig"][0].update(ChannelName="training"),
     "channel 'training' is not read by the training job"),
    (lambda r: r["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"].update(
        FileSystemId="fs-XYZ"), "file system id 'fs-XYZ' does not match"),
    (lambda r: r["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"].update(
        FileSystemAccessMode="readonly"), "access mode 'readonly' is not one of ro, rw"),
    (lambda r: r["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"].update(
        FileSystemAccessMode="rw"), "must be mounted read-only"),
    (lambda r: r["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"].update(
        DirectoryPath="/fsx/datasets/coco2017"), "must start with the file system's mount name, /abcd1234/"),
    (lambda r: r["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"].update(
        FileSystemType="Lustre"), "file system type 'Lustre' is not one of EFS, FSxLustre"),
    (lambda r: r["VpcConfig"].update(Subnets=[]), "VPC config has 0 subnets"),
    (lambda r: r["VpcConfig"].update(Subnets=[f"subnet-{i:08x}" for i in range(17)]),
     "VPC config has 17 subnets"),
    (lambda r: r["VpcConfig"].update(SecurityGroupIds=[f"sg-{i:08x}" for i in range(6)]),
     "VPC config has 6 security groups"),
    (lambda r: r["ResourceConfig"].update(InstanceType="ml.p4d"), "instance type 'ml.p4d'"),
    (lambda r: r.update(TrainingJobName="other-fsx-1"), "must start with maskrcnn-test-"),
    (lambda r: r.update(RoleArn="arn:aws:iam::123456789012:role/admin"),
     "neither the deployment's training nor staging role"),
    (lambda r: r["InputDataConfig"].pop(0), "needs a 'train' channel"),
])
def test_validation_names_the_bad_value(deployment, mutate, message):
    req = training(deployment, data_source="fsx")
    bad = copy.deepcopy(req)
    mutate(bad)
    assert message in problems_of(bad, deployment)


def test_every_problem_is_reported_at_once(deployment):
    bad = training(deployment, data_source="efs")
    bad["VpcConfig"]["SecurityGroupIds"] = []
    bad["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]["FileSystemId"] = "efs-1"
    text = problems_of(bad, deployment)
    assert "0 security groups" in text and "'efs-1'" in text


def test_fsx_path_from_ssm_must_start_with_the_mount_name(deployment):
    broken = dataclasses.replace(deployment, fsx_data_path="/datasets/coco2017")
    with pytest.raises(request.LaunchRequestError, match="/abcd1234/"):
        training(broken, data_source="fsx")


def test_fsx_disabled_deployment_says_so(deployment):
    no_fsx = dataclasses.replace(deployment, fsx_id=None, fsx_mount_name=None, fsx_data_path=None)
    with pytest.raises(request.LaunchRequestError, match="no FSx file system"):
        training(no_fsx, data_source="fsx")


def test_spot_sets_a_wait_time_and_keeps_checkpoints(deployment):
    req = training(deployment, use_spot=True, max_run_hours=10)
    assert req["EnableManagedSpotTraining"] is True
    assert req["StoppingCondition"] == {"MaxRuntimeInSeconds": 36000, "MaxWaitTimeInSeconds": 72000}
    bad = copy.deepcopy(req)
    bad["StoppingCondition"]["MaxWaitTimeInSeconds"] = 100
    assert "max wait time 100 s must be >=" in problems_of(bad, deployment)


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
