"""The one validation of a launch, on the CreateTrainingJob request the SDK sends, and the launch
options that are refused before anything is built."""

import copy
import dataclasses
import functools

import pytest

from maskrcnn_contract import ssm
from maskrcnn_launcher.data import file_systems
from maskrcnn_launcher.deployment import instances, settings
from maskrcnn_launcher.training import jobs, plan, submit, validation
from maskrcnn_launcher.training.options import LaunchOptions, LaunchRequestError

from tests.launcher.conftest import BUCKET, FSX_MOUNT_NAME, JOB_PREFIX, shared_boto_session
from tests.launcher.expectations import assert_training_request, toolkit_hyperparameters


def sent(deployment, **options):
    """The request as the SDK would send it (a dry run: validated, not sent)."""
    launch = jobs.training_job(deployment, LaunchOptions(**options), shared_boto_session())
    return submit.send(launch, deployment, dry_run=True)


@functools.cache
def _valid(deployment, data_source: str) -> dict:
    """A valid request of `data_source`, built once for the tests that spoil a copy of it (each
    build ~0.3 s of CPU); its AWS calls are evaluated in the test that built it."""
    return sent(deployment, data_source=data_source)


def valid_copy(deployment, data_source: str) -> dict:
    return copy.deepcopy(_valid(deployment, data_source))


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
    # The image's ENV wins over the hyperparameter: it would be ignored (docs/aws-rules.md SM-14).
    (lambda r: r["HyperParameters"].update(sagemaker_program="other.py"),
     "hyperparameter sagemaker_program='other.py': the training image's ENV SAGEMAKER_PROGRAM "
     "wins over it"),
    (lambda r: r.update(Environment={"SAGEMAKER_PROGRAM": "stage_dataset.py"}),
     "a training job must start train.py, and this request starts stage_dataset.py"),
    # The staging job's test seam (its sources file) must never reach a launched job.
    (lambda r: r.update(Environment={"MASKRCNN_STAGING_SOURCES": "/tmp/sources.json"}),
     "Environment ['MASKRCNN_STAGING_SOURCES']: the launcher sends only SAGEMAKER_PROGRAM"),
])
def test_validation_names_the_bad_value(deployment, mutate, message):
    bad = valid_copy(deployment, "fsx")
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
    launch = jobs.staging_job(deployment, shared_boto_session())
    request = submit.send(launch, deployment, dry_run=True)
    assert request["RoleArn"] == deployment.staging_role_arn
    assert "is not the deployment's training role" in problems_of(request, deployment)
    # What starts its program: the request's Environment over the image's ENV (SM-14).
    assert request["Environment"] == {"SAGEMAKER_PROGRAM": "stage_dataset.py"}
    without = copy.deepcopy(request)
    del without["Environment"]
    assert ("a staging job must start stage_dataset.py, and this request starts train.py"
            in problems_of(without, deployment, validation.STAGING))


def test_a_deployment_without_internet_egress_refuses_the_staging_job_naming_the_way_out(
        fake_aws, deployment):
    """docs/aws-rules.md SM-15: with nat_gateways=0 the job could download nothing."""
    isolated = dataclasses.replace(deployment, internet_egress=False)
    with pytest.raises(LaunchRequestError) as error:
        jobs.staging_job(isolated, shared_boto_session())
    message = str(error.value)
    assert "internet-egress=false" in message
    assert (f"training_code/stage_dataset.py --dataset coco2017 --s3-uri "
            f"s3://{BUCKET}/datasets/coco2017/ --pretrained-s3-uri s3://{BUCKET}/pretrained/"
            ) in message


def test_fsx_path_from_ssm_must_start_with_the_mount_name(deployment):
    broken = dataclasses.replace(deployment, fsx_datasets_path="/datasets")
    with pytest.raises(LaunchRequestError, match="/abcd1234/"):
        sent(broken, data_source="fsx")


def test_fsx_disabled_deployment_says_so(deployment):
    no_fsx = dataclasses.replace(deployment, fsx_id=None, fsx_mount_name=None,
                                 fsx_datasets_path=None)
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


def test_the_longest_run_name_keeps_the_time_stamp_and_one_more_character_is_refused(deployment):
    """Rule SM-5: 63 characters, of which the SDK's `-YYYYmmddHHMMSS` takes 15."""
    room = 63 - 15 - len(f"{JOB_PREFIX}-")
    request = sent(deployment, run_name="r" * room)
    name = request["TrainingJobName"]
    assert len(name) == 63 and name.startswith(f"{JOB_PREFIX}-{'r' * room}-")
    assert name[-14:].isdigit()  # the time stamp survived whole
    with pytest.raises(LaunchRequestError, match=f"at most {63 - 15}"):
        sent(deployment, run_name="r" * (room + 1))


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
    with pytest.raises(settings.SettingsError, match="efs-id, efs-datasets-path"):
        settings.from_parameters("/x", {"region": "eu-west-2"})


def test_datasync_runs_every_task_following_a_running_execution_instead_of_starting_another(
        fake_aws, deployment):
    client = fake_aws.client("datasync")
    dataset, pretrained = deployment.datasync_task_arns  # one task per prefix
    running = client.start_task_execution(TaskArn=dataset)["TaskExecutionArn"]
    said = []
    executions = file_systems.sync_to_efs(client, deployment, poll=0, echo=said.append)
    assert [e["TaskExecutionArn"] for e in executions][0] == running
    assert executions[1]["TaskExecutionArn"].startswith(pretrained + "/execution/")
    assert [e["Status"] for e in executions] == ["SUCCESS", "SUCCESS"]
    assert said[0] == f"DataSync task 1/2 {dataset}: following the execution already running, {running}"
    started = said.index("DataSync task 1/2: SUCCESS") + 1
    assert said[started].startswith(f"DataSync task 2/2 {pretrained}: started ")
    assert said[-1] == "DataSync task 2/2: SUCCESS"


def test_console_links_use_the_partitions_console():
    from maskrcnn_launcher.runs import follow

    assert follow.console_urls("eu-west-2", "j")["job"].startswith("https://eu-west-2.console.aws.amazon.com/")
    assert follow.console_urls("cn-north-1", "j")["job"].startswith("https://console.amazonaws.cn/")


@pytest.mark.unstaged
def test_a_launch_without_its_dataset_or_backbone_is_refused_before_sending(fake_aws, deployment):
    before = len(fake_aws.requests_since(0))
    with pytest.raises(LaunchRequestError) as refused:
        sent(deployment, data_source="fsx")
    message = str(refused.value)
    assert f"s3://{BUCKET}/datasets/coco2017/dataset_info.json is missing" in message
    assert f"no resnet50 checkpoint (.index and .data-*) in s3://{BUCKET}/pretrained/resnet50/" \
        in message
    assert "python -m maskrcnn_launcher stage-dataset --dataset coco2017 --wait" in message
    # Half-staged: an .index without its data is no checkpoint yet (the staging job uploads the
    # data first, so this is one that is still uploading or was cut short).
    s3 = fake_aws.client("s3")
    s3.put_object(Bucket=BUCKET, Key="datasets/coco2017/dataset_info.json", Body=b"{}")
    s3.put_object(Bucket=BUCKET, Key="pretrained/resnet50/ckpt-28080.index", Body=b"x")
    with pytest.raises(LaunchRequestError, match="no resnet50 checkpoint") as refused:
        sent(deployment, data_source="s3")
    assert "dataset_info.json" not in str(refused.value)
    s3.put_object(Bucket=BUCKET, Key="pretrained/resnet50/ckpt-28080.data-00000-of-00001",
                  Body=b"x")
    assert sent(deployment, data_source="s3")["HyperParameters"]["batch_norm"] == "frozen"
    assert fake_aws.requests_since(before) == []


def test_a_backbone_without_a_published_checkpoint_is_refused_with_what_to_do(deployment):
    with pytest.raises(LaunchRequestError) as refused:
        sent(deployment, data_source="s3", hyperparameters={"backbone": "resnet101"})
    message = str(refused.value)
    assert "no resnet101 checkpoint" in message and "publishes no ImageNet checkpoint" in message
    assert "--no-pretrained" in message and "stage-dataset" not in message


def test_without_pretrained_weights_the_launch_warns_and_synchronizes_batch_norm(deployment,
                                                                               capsys):
    request = sent(deployment, data_source="efs", use_pretrained=False)
    assert [c["ChannelName"] for c in request["InputDataConfig"]] == ["train"]
    assert request["HyperParameters"]["batch_norm"] == "sync"
    said = capsys.readouterr().out
    assert "warning: no pretrained backbone" in said and "37.7" in said
    assert "batch_norm=sync" in said
    assert jobs.describe_inputs(request)[2:4] == [
        "backbone:     resnet50, ImageNet checkpoint from nowhere (trained from scratch)",
        "batch norm:   sync"]
    # Chosen explicitly, per_rank stays; frozen cannot work without pretrained statistics.
    assert sent(deployment, data_source="efs", use_pretrained=False,
                hyperparameters={"batch_norm": "per_rank"})["HyperParameters"]["batch_norm"] \
        == "per_rank"
    with pytest.raises(LaunchRequestError, match="batch_norm=frozen keeps the backbone's"):
        sent(deployment, data_source="efs", use_pretrained=False,
             hyperparameters={"batch_norm": "frozen"})


def test_the_launch_says_what_the_job_trains_from(deployment):
    request = sent(deployment, data_source="fsx")
    lines = jobs.describe_inputs(request)
    fsx = f"FSxLustre {deployment.fsx_id}:/{FSX_MOUNT_NAME}"
    run = request["TrainingJobName"].rsplit("-", 1)[0]
    assert lines == [f"dataset:      {fsx}/datasets/coco2017",
                     "input mode:   File: the file system is mounted, nothing copied",
                     f"backbone:     resnet50, ImageNet checkpoint from {fsx}/pretrained/resnet50",
                     "batch norm:   frozen",
                     "distribution: horovod, 8 ranks per host (one per GPU) on 2 x ml.p4d.24xlarge",
                     f"tensorboard:  s3://{BUCKET}/jobs/tensorboard/{run}/ (uploaded while the "
                     "job runs)",
                     f"mlflow:       experiment 'coco2017' on {deployment.mlflow_tracking_server_arn}"]


# Distribution: what each strategy sends, and every combination refused before sending.

DESCRIBED = {
    "horovod": "horovod, 8 ranks per host (one per GPU) on 2 x ml.p4d.24xlarge",
    "multi_worker_mirrored": "multi_worker_mirrored, 1 process per host on 2 x ml.p4d.24xlarge",
    "parameter_server": "parameter_server, 1 process per host on 2 x ml.p4d.24xlarge: a worker "
                        "and a parameter server on each, the coordinator on the first",
}


@pytest.mark.parametrize("distribution", ["horovod", "multi_worker_mirrored", "parameter_server"])
def test_each_distribution_sends_its_own_toolkit_hyperparameters_and_no_others(
        fake_aws, deployment, distribution):
    before = len(fake_aws.requests_since(0))
    launch = jobs.training_job(deployment, LaunchOptions(distribution=distribution),
                               shared_boto_session())
    request = submit.send(launch, deployment)
    sent_now = fake_aws.requests_since(before)
    assert sent_now == [request]
    assert_training_request(request, fake_aws.parameters, "fsx", "ml.p4d.24xlarge", 2,
                            ranks_per_host=8, distribution=distribution)
    hps = request["HyperParameters"]
    absent = {"sagemaker_mpi_enabled", "sagemaker_mpi_num_of_processes_per_host",
              "sagemaker_multi_worker_mirrored_strategy_enabled",
              "sagemaker_parameter_server_enabled"} - set(toolkit_hyperparameters(distribution, 8))
    assert not absent & set(hps)
    assert jobs.describe_inputs(request)[4] == f"distribution: {DESCRIBED[distribution]}"


@pytest.mark.parametrize("given", ["multi_worker_mirrored", '"multi_worker_mirrored"'])
def test_a_distribution_given_only_as_a_hyperparameter_is_the_launchs(deployment, given):
    """Plain or JSON-encoded, as some SDK versions send them."""
    hps = sent(deployment, hyperparameters={"distribution": given})["HyperParameters"]
    assert hps["distribution"] == "multi_worker_mirrored"
    assert {k for k in hps if k.startswith("sagemaker_")} == \
        {"sagemaker_multi_worker_mirrored_strategy_enabled"}
    # Given twice with the same value: one strategy, accepted.
    assert sent(deployment, distribution="multi_worker_mirrored",
                hyperparameters={"distribution": given})["HyperParameters"] == hps


def test_one_process_per_host_needs_no_gpu_count(deployment):
    """The tf.distribute strategies start one process per host whatever its GPUs: an instance
    type outside the GPU table needs no --processes-per-host (Horovod's does)."""
    request = sent(deployment, instance_type="ml.x9.24xlarge", distribution="multi_worker_mirrored")
    assert request["ResourceConfig"]["InstanceType"] == "ml.x9.24xlarge"
    with pytest.raises(instances.InstanceTypeError, match="GPU count of 'ml.x9.24xlarge'"):
        sent(deployment, instance_type="ml.x9.24xlarge", distribution="horovod")
    assert sent(deployment, distribution="parameter_server",
                processes_per_host=1)["HyperParameters"]["distribution"] == "parameter_server"


def test_parameter_servers_without_a_pretrained_backbone_normalize_per_rank(deployment, capsys):
    """Frozen statistics need the pretrained ones and parameter servers cannot sync: the batch
    norm the launcher picks is per_rank (sync under the synchronous strategies)."""
    request = sent(deployment, distribution="parameter_server", use_pretrained=False)
    assert request["HyperParameters"]["batch_norm"] == "per_rank"
    assert "batch_norm=per_rank" in capsys.readouterr().out
    assert sent(deployment, distribution="multi_worker_mirrored",
                use_pretrained=False)["HyperParameters"]["batch_norm"] == "sync"


@pytest.mark.parametrize("options, message", [
    (dict(distribution="parameter_server", instance_count=1),
     "distribution=parameter_server on 1 instance: it needs 2 or more"),
    (dict(distribution="parameter_server", hyperparameters={"batch_norm": "sync"}),
     "batch_norm=sync normalizes over the global batch"),
    (dict(distribution="horovod", hyperparameters={"distribution": "parameter_server"}),
     "distribution 'horovod' (--distribution, distribution= or DISTRIBUTION in a notebook) and "
     "the hyperparameter distribution='parameter_server' differ: give the strategy once"),
    (dict(distribution="ring"), "distribution 'ring': expected one of horovod, "
                                "multi_worker_mirrored, parameter_server"),
    (dict(hyperparameters={"distribution": "ring"}), "distribution 'ring': expected one of"),
    (dict(distribution="multi_worker_mirrored", hyperparameters={"sagemaker_mpi_enabled": "true"}),
     "hyperparameter sagemaker_mpi_enabled='true' is for the toolkit's MPI runner"),
    (dict(distribution="parameter_server",
          hyperparameters={"sagemaker_mpi_num_of_processes_per_host": "8"}),
     "hyperparameter sagemaker_mpi_num_of_processes_per_host='8' is for the toolkit's MPI runner"),
    (dict(hyperparameters={"sagemaker_parameter_server_enabled": "true"}),
     "is for the toolkit's TF1 parameter-server cluster"),
    (dict(distribution="parameter_server",
          hyperparameters={"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}),
     "is for the toolkit's TF_CONFIG for MultiWorkerMirroredStrategy"),
    (dict(hyperparameters={"sagemaker_mpi_num_processes": "3"}),
     "sagemaker_mpi_num_processes='3' is not one the launcher sends for distribution=horovod"),
    (dict(distribution="multi_worker_mirrored", hyperparameters={"fp16_allreduce": "true"}),
     "fp16_allreduce=true compresses Horovod's allreduce; distribution=multi_worker_mirrored"),
    (dict(distribution="parameter_server", hyperparameters={"fp16_allreduce": True}),
     "the workers send their gradients to the parameter servers"),
    (dict(distribution="multi_worker_mirrored", processes_per_host=8),
     "processes per host 8 (--processes-per-host) sets Horovod's ranks per instance"),
    (dict(distribution="parameter_server", mpi_options="-x NCCL_DEBUG=INFO"),
     "mpi_options '-x NCCL_DEBUG=INFO' are mpirun's"),
])
def test_a_distribution_that_cannot_work_is_refused_and_nothing_sent(fake_aws, deployment,
                                                                      options, message):
    before = len(fake_aws.requests_since(0))
    with pytest.raises(LaunchRequestError) as refused:
        launch = jobs.training_job(deployment, LaunchOptions(**options), shared_boto_session())
        submit.send(launch, deployment)  # not a dry run: the refusal is all that stops it
    assert message in str(refused.value)
    assert fake_aws.requests_since(before) == []


def test_a_request_whose_toolkit_hyperparameters_do_not_fit_its_distribution_is_refused(
        deployment):
    mwms = copy.deepcopy(sent(deployment, distribution="multi_worker_mirrored"))
    del mwms["HyperParameters"]["sagemaker_multi_worker_mirrored_strategy_enabled"]
    assert "needs sagemaker_multi_worker_mirrored_strategy_enabled=true" in \
        problems_of(mwms, deployment)
    # A Horovod request relabelled: its MPI runner would start parameter-server processes.
    relabelled = copy.deepcopy(sent(deployment))
    relabelled["HyperParameters"]["distribution"] = "parameter_server"
    text = problems_of(relabelled, deployment)
    assert all(f"hyperparameter {key}=" in text for key in toolkit_hyperparameters("horovod", 8))


# Launch options: each refused when the launch is planned, naming the value and what is allowed;
# nothing is sent. The SDK drops a 0 (SageMaker's default replaces it) and sends a negative run
# time as it is.

@pytest.mark.parametrize("options, message", [
    (dict(instance_count=0), "instance count 0 (--instances, instance_count): expected a whole "
                             "number, 1 or more"),
    (dict(instance_count=2.5), "instance count 2.5 (--instances, instance_count)"),
    (dict(instance_count="2"), "instance count '2' (--instances, instance_count)"),
    (dict(max_run_hours=0), "max run hours 0 (--max-run-hours, max_run_hours): expected more "
                            "than 0 (at least 1 second) and at most 672 (28 days: SageMaker's "
                            "longest MaxRuntimeInSeconds)"),
    (dict(max_run_hours=-1), "max run hours -1 (--max-run-hours, max_run_hours)"),
    (dict(max_run_hours=0.0001), "max run hours 0.0001 (--max-run-hours, max_run_hours)"),
    (dict(max_run_hours=float("nan")), "max run hours nan (--max-run-hours, max_run_hours)"),
    (dict(max_run_hours=673), "max run hours 673 (--max-run-hours, max_run_hours)"),
    (dict(volume_size_gb=0), "volume size 0 GB (--volume-gb, volume_size_gb): expected a whole "
                             "number, 1 or more"),
    (dict(volume_size_gb=-5), "volume size -5 GB (--volume-gb, volume_size_gb)"),
    (dict(processes_per_host=0), "processes per host 0 (--processes-per-host, "
                                 "processes_per_host): expected a whole number, 1 or more"),
    (dict(use_spot=True, max_run_hours=10, max_wait_hours=5),
     "max wait hours 5 (max_wait_hours): expected at least max_run_hours (10)"),
    (dict(use_spot=True, max_wait_hours=0), "max wait hours 0 (max_wait_hours)"),
    (dict(max_wait_hours=100), "max wait hours 100 (max_wait_hours) limits a managed spot job"),
    # Hyperparameters that only SageMaker and its toolkit set (the launcher sends the ones it owns).
    (dict(hyperparameters={"sagemaker_submit_directory": "s3://elsewhere/code.tar.gz"}),
     "hyperparameter sagemaker_submit_directory='s3://elsewhere/code.tar.gz': SageMaker's or its "
     "training toolkit's"),
    (dict(hyperparameters={"_tuning_objective_metric": "loss"}),
     "hyperparameter _tuning_objective_metric='loss': SageMaker's or its training toolkit's"),
    (dict(hyperparameters={"sagemaker_program": "x.py"}),
     "hyperparameter sagemaker_program='x.py': the training image's ENV SAGEMAKER_PROGRAM wins"),
    (dict(hyperparameters={"sagemaker_mpi_custom_mpi_options": "-x NCCL_DEBUG=INFO"}),
     "hyperparameter sagemaker_mpi_custom_mpi_options='-x NCCL_DEBUG=INFO' is the launcher's to "
     "send for distribution=horovod (from mpi_options)"),
])
def test_a_launch_option_sagemaker_would_replace_or_refuse_is_refused_when_planned(
        deployment, options, message):
    """Planned: before the SDK builds anything (the CLI's test shows nothing is sent)."""
    with pytest.raises(LaunchRequestError) as refused:
        plan.training_plan(deployment, LaunchOptions(**options), shared_boto_session().client("s3"))
    assert message in str(refused.value)


def test_every_bad_launch_option_is_named_at_once(deployment):
    with pytest.raises(LaunchRequestError) as refused:
        sent(deployment, instance_count=0, max_run_hours=0, volume_size_gb=0)
    text = str(refused.value)
    assert all(f"{what} (--" in text for what in ("instance count 0", "max run hours 0",
                                                  "volume size 0 GB"))


def test_the_longest_run_sagemaker_allows_is_sent_and_a_second_more_is_refused(deployment):
    """StoppingCondition MaxRuntimeInSeconds: at most 28 days."""
    request = sent(deployment, max_run_hours=672, use_spot=True)
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 672 * 3600,
                                            "MaxWaitTimeInSeconds": 2 * 672 * 3600}
    with pytest.raises(LaunchRequestError, match="at most 672 "):
        sent(deployment, max_run_hours=672 + 1 / 3600)


# The request as sent: what the SDK leaves out when it is falsy must be there, and positive.

@pytest.mark.parametrize("mutate, message", [
    (lambda r: r["ResourceConfig"].pop("InstanceCount"),
     "ResourceConfig InstanceCount is missing: expected 1 or more"),
    (lambda r: r["ResourceConfig"].update(InstanceCount=0),
     "ResourceConfig InstanceCount 0: expected 1 or more"),
    (lambda r: r["ResourceConfig"].pop("VolumeSizeInGB"),
     "ResourceConfig VolumeSizeInGB is missing: expected 1 or more"),
    (lambda r: r["StoppingCondition"].pop("MaxRuntimeInSeconds"),
     "StoppingCondition MaxRuntimeInSeconds is missing: expected 1 to 2419200"),
    (lambda r: r["StoppingCondition"].update(MaxRuntimeInSeconds=-3600),
     "StoppingCondition MaxRuntimeInSeconds -3600: expected 1 to 2419200"),
    (lambda r: r.update(EnableManagedSpotTraining=True,
                        StoppingCondition={"MaxRuntimeInSeconds": 7200,
                                           "MaxWaitTimeInSeconds": 3600}),
     "StoppingCondition MaxWaitTimeInSeconds 3600: expected at least MaxRuntimeInSeconds (7200)"),
    (lambda r: r["HyperParameters"].update(sagemaker_submit_directory="s3://x/code.tar.gz"),
     "hyperparameter sagemaker_submit_directory='s3://x/code.tar.gz': SageMaker's or its "
     "training toolkit's"),
    (lambda r: r["HyperParameters"].update(_tuning_objective_metric="loss"),
     "hyperparameter _tuning_objective_metric='loss'"),
])
def test_a_request_without_what_the_sdk_drops_when_falsy_is_refused(deployment, mutate, message):
    bad = valid_copy(deployment, "fsx")
    mutate(bad)
    assert message in problems_of(bad, deployment)


def test_a_staging_request_with_a_toolkit_hyperparameter_is_refused(fake_aws, deployment):
    request = submit.send(jobs.staging_job(deployment, shared_boto_session()), deployment,
                          dry_run=True)
    bad = copy.deepcopy(request)
    bad["HyperParameters"]["sagemaker_mpi_enabled"] = "true"
    assert "hyperparameter sagemaker_mpi_enabled='true'" in \
        problems_of(bad, deployment, validation.STAGING)


# How the job reads its channels (TRN-1), a warm pool (TRN-3), TensorBoard's summaries (TRN-2).

def test_an_s3_launch_streams_its_channels_and_a_file_system_is_mounted(deployment):
    """TRN-1: FastFile for S3 unless File is asked for (no copy before the job starts); File for
    EFS and FSx, which SageMaker mounts. TRN-2: every training request carries
    TensorBoardOutputConfig (assert_training_request)."""
    params = settings_values(deployment)
    streamed = sent(deployment, data_source="s3")
    assert_training_request(streamed, params, "s3", "ml.p4d.24xlarge", 2, 8)
    assert streamed["AlgorithmSpecification"]["TrainingInputMode"] == "FastFile"
    assert "input mode:   FastFile: streamed from S3 as the job reads it, no copy before the " \
           "start" in jobs.describe_inputs(streamed)
    copied = sent(deployment, data_source="s3", input_mode="File")
    assert copied["AlgorithmSpecification"]["TrainingInputMode"] == "File"
    for source in ("efs", "fsx"):
        mounted = sent(deployment, data_source=source)
        assert_training_request(mounted, params, source, "ml.p4d.24xlarge", 2, 8)
        assert sent(deployment, data_source=source, input_mode="File") \
            ["AlgorithmSpecification"]["TrainingInputMode"] == "File"


def settings_values(deployment) -> dict:
    """The published values assert_training_request compares with, from the Deployment."""
    return {"efs-id": deployment.efs_id, "fsx-id": deployment.fsx_id,
            "fsx-mount-name": deployment.fsx_mount_name,
            "subnet-ids": ",".join(deployment.subnet_ids),
            "security-group-ids": ",".join(deployment.security_group_ids),
            "training-image-uri": deployment.training_image_uri,
            "training-role-arn": deployment.training_role_arn}


@pytest.mark.parametrize("options, message", [
    ({"data_source": "fsx", "input_mode": "FastFile"},
     "input mode 'FastFile' (--input-mode, input_mode) streams S3 objects; data source 'fsx' is a "
     "file system SageMaker mounts (File mode)"),
    ({"input_mode": "Pipe"}, "input mode 'Pipe' (--input-mode, input_mode): expected one of "
                             "FastFile, File"),
    # TRN-3: 3600, what SageMaker certainly accepts (botocore's model says 21600).
    ({"keep_alive_seconds": 3601}, "keep-alive 3601 seconds (--keep-alive-seconds, "
                                   "keep_alive_seconds): expected a whole number from 0 (no warm "
                                   "pool) to 3600"),
    ({"keep_alive_seconds": 21600}, "keep-alive 21600 seconds"),
    ({"keep_alive_seconds": -1}, "keep-alive -1 seconds"),
    ({"keep_alive_seconds": 1.5}, "keep-alive 1.5 seconds"),
    ({"keep_alive_seconds": 600, "use_spot": True},
     "SageMaker's managed warm pools cannot be used with spot instances"),
])
def test_an_input_mode_or_warm_pool_that_cannot_work_is_refused_before_building(
        deployment, options, message):
    with pytest.raises(LaunchRequestError) as error:
        sent(deployment, **options)
    assert message in str(error.value)


def test_a_warm_pool_is_sent_as_keep_alive_within_sagemakers_limit(deployment):
    """TRN-3: KeepAlivePeriodInSeconds up to 3600; none unless asked for."""
    assert "KeepAlivePeriodInSeconds" not in sent(deployment)["ResourceConfig"]
    request = sent(deployment, keep_alive_seconds=3600)
    assert request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 3600
    assert jobs.describe_inputs(request)[-1].startswith("warm pool:    instances kept 3600 s")


def _channel(request, name="train"):
    return next(c for c in request["InputDataConfig"] if c["ChannelName"] == name)


@pytest.mark.parametrize("source, mutate, message", [
    ("s3", lambda r: r["AlgorithmSpecification"].update(TrainingInputMode="Pipe"),
     "AlgorithmSpecification TrainingInputMode 'Pipe': expected FastFile or File"),
    ("fsx", lambda r: r["AlgorithmSpecification"].update(TrainingInputMode="FastFile"),
     "channel train: a file-system channel is mounted, and FastFile mode streams S3 objects"),
    ("efs", lambda r: _channel(r).update(InputMode="FastFile"),
     "channel train: a file-system channel is mounted, and FastFile mode"),
    ("s3", lambda r: _channel(r).update(InputMode="Pipe"), "channel train: InputMode 'Pipe'"),
    ("s3", lambda r: r.pop("TensorBoardOutputConfig"),
     "TensorBoardOutputConfig is missing: the job's summaries in /opt/ml/output/tensorboard would "
     "not reach"),
    ("s3", lambda r: r["TensorBoardOutputConfig"].update(LocalPath="/opt/ml/output/data/tb"),
     "TensorBoardOutputConfig LocalPath '/opt/ml/output/data/tb': the job writes its summaries "
     "to /opt/ml/output/tensorboard"),
    ("s3", lambda r: r["TensorBoardOutputConfig"].update(S3OutputPath=f"s3://{BUCKET}/tb/"),
     f"TensorBoardOutputConfig S3OutputPath 's3://{BUCKET}/tb/': expected below s3://{BUCKET}/"
     "jobs/tensorboard/"),
    ("s3", lambda r: r["ResourceConfig"].update(KeepAlivePeriodInSeconds=3600) or r.update(
        EnableManagedSpotTraining=True, CheckpointConfig=r["CheckpointConfig"],
        StoppingCondition=dict(r["StoppingCondition"], MaxWaitTimeInSeconds=10 ** 6)),
     "KeepAlivePeriodInSeconds 3600: managed warm pools cannot be used with spot instances"),
    ("s3", lambda r: r["ResourceConfig"].update(KeepAlivePeriodInSeconds=3601),
     "ResourceConfig KeepAlivePeriodInSeconds 3601: expected 0 to 3600"),
])
def test_the_request_as_sent_is_checked_for_input_mode_warm_pool_and_tensorboard(
        deployment, source, mutate, message):
    bad = valid_copy(deployment, source)
    mutate(bad)
    assert message in problems_of(bad, deployment)
