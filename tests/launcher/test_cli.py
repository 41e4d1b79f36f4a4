"""The CLI against the local AWS, as a pipeline would run it, and its validation errors (commands
forked from a process that imported the CLI's libraries, tests/launcher/cli.py; one in a fresh
interpreter)."""

import json

import pytest

from tests.launcher.cli import cli, cli_process
from tests.launcher.conftest import (INFERENCE_IMAGES, JOB_PREFIX,
                                     completed_training_job)
from tests.launcher.expectations import assert_training_request
from tests.launcher.fake_aws import INVOCATION_ANSWER



def test_launch_sends_the_request_and_follows_the_job(fake_aws):
    """The request as sent, and the log plumbing after it: the metric values are the fake job's
    canned lines (tests/launcher/fake_aws.py TRAINING_LOG) read back through CloudWatch with the
    job's own regexes; what a real job prints is tested in tests/training/test_job.py."""
    before = len(fake_aws.requests_since(0))
    result = cli(fake_aws, "launch", "--data-source", "efs", "--instances", "3",
                 "--instance-type", "ml.g5.12xlarge", "--hp", "max_steps=1000", "--wait")
    assert result.returncode == 0, result.stderr
    sent = fake_aws.requests_since(before)
    assert len(sent) == 1
    assert_training_request(sent[0], fake_aws.parameters, "efs", "ml.g5.12xlarge", 3, 4)
    assert sent[0]["HyperParameters"]["max_steps"] == "1000"
    summary = json.loads(result.stdout[result.stdout.index("{\n"):])
    assert summary["status"] == "Completed"
    assert summary["metrics_from_log"]["eval/segm_AP"] == pytest.approx(0.339)


def test_an_s3_launch_copies_when_asked_and_a_warm_pool_is_an_option(fake_aws):
    """TRN-1: --input-mode File copies the channel before the start (FastFile, the default, is
    tested in test_validation.py); TRN-3: --keep-alive-seconds is ResourceConfig
    KeepAlivePeriodInSeconds; TRN-2: the request carries TensorBoardOutputConfig
    (assert_training_request)."""
    result = cli(fake_aws, "launch", "--data-source", "s3", "--input-mode", "File",
                 "--keep-alive-seconds", "1800", "--dry-run")
    assert result.returncode == 0, result.stderr
    copied = json.loads(result.stdout)
    assert_training_request(copied, fake_aws.parameters, "s3", "ml.p4d.24xlarge", 2, 8,
                            input_mode="File", keep_alive_seconds=1800)
    assert "input mode:   File: copied from S3 onto every instance before the job starts" \
        in result.stderr
    assert "warm pool:    instances kept 1800 s after the job" in result.stderr


def test_dry_run_prints_the_request_as_it_would_be_sent_and_sends_nothing(fake_aws):
    before = len(fake_aws.requests_since(0))
    # A fresh interpreter: the entry point itself, as a pipeline starts it.
    result = cli_process(fake_aws, "launch", "--data-source", "fsx", "--run-name", "trial-2",
                         "--dry-run")
    assert result.returncode == 0, result.stderr
    request = json.loads(result.stdout)
    assert fake_aws.requests_since(before) == []
    assert "batch norm:   frozen" in result.stderr
    assert "distribution: horovod, 8 ranks per host (one per GPU) on 2 x ml.p4d.24xlarge" \
        in result.stderr
    # The same checks as a real launch's request.
    assert_training_request(request, fake_aws.parameters, "fsx", "ml.p4d.24xlarge", 2, 8,
                            run_name="trial-2")


@pytest.mark.parametrize("args, message", [
    (["--instance-type", "ml.x9.24xlarge"], "GPU count of 'ml.x9.24xlarge' is unknown"),
    (["--instance-type", "p4d.24xlarge"], "instance type 'p4d.24xlarge' is not"),
    (["--hp", "image_size=big"], "image_size='big': expected an integer"),
    (["--hp", "warmup=5"], "unknown hyperparameter(s): warmup"),
    (["--run-name", "My_Run"], "run name 'My_Run'"),
    (["--distribution", "parameter_server", "--instances", "1"],
     "distribution=parameter_server on 1 instance: it needs 2 or more"),
    (["--distribution", "multi_worker_mirrored", "--hp", "distribution=horovod"],
     "and the hyperparameter distribution='horovod' differ: give the strategy once"),
])
def test_invalid_launch_exits_2_naming_the_value(fake_aws, args, message):
    before = len(fake_aws.requests_since(0))
    result = cli(fake_aws, "launch", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert fake_aws.requests_since(before) == []


@pytest.mark.parametrize("distribution, toolkit", [
    ("multi_worker_mirrored", {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}),
    ("parameter_server", {}),
])
def test_launch_with_a_tf_distribute_strategy(fake_aws, distribution, toolkit):
    before = len(fake_aws.requests_since(0))
    result = cli(fake_aws, "launch", "--data-source", "s3", "--distribution", distribution)
    assert result.returncode == 0, result.stderr
    sent = fake_aws.requests_since(before)
    assert len(sent) == 1
    assert_training_request(sent[0], fake_aws.parameters, "s3", "ml.p4d.24xlarge", 2,
                            distribution=distribution)
    hps = sent[0]["HyperParameters"]
    assert {k: v for k, v in hps.items() if k.startswith("sagemaker_")} == toolkit
    assert f"distribution: {distribution}, 1 process per host on 2 x ml.p4d.24xlarge" \
        in result.stdout


def test_unknown_gpu_type_runs_with_explicit_processes_per_host(fake_aws):
    result = cli(fake_aws, "launch", "--instance-type", "ml.x9.24xlarge",
                 "--processes-per-host", "4", "--dry-run")
    assert result.returncode == 0, result.stderr
    hps = json.loads(result.stdout)["HyperParameters"]
    assert hps["sagemaker_mpi_num_of_processes_per_host"] == "4"


ANOTHER_PATH_IS_DENIED = pytest.mark.iam_expect_denied(
    "ssm:GetParametersByPath", "the notebook role reads its own deployment's parameters only: AWS "
    "answers another path with AccessDeniedException, where moto answers an empty list")


@ANOTHER_PATH_IS_DENIED
def test_wrong_ssm_path_is_named(fake_aws):
    result = cli(fake_aws, "--ssm-path", "/nothing-here", "fsx-status")
    assert result.returncode == 2
    assert "no SSM parameters under /nothing-here/" in result.stderr


@ANOTHER_PATH_IS_DENIED
def test_a_path_the_role_may_not_read_is_named_with_what_to_do():
    """What AWS answers the notebook role for another deployment's path (moto does not)."""
    import boto3
    from botocore.stub import Stubber

    from maskrcnn_launcher.deployment import settings

    client = boto3.client("ssm", region_name="eu-west-2", aws_access_key_id="x",
                          aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_client_error("get_parameters_by_path", "AccessDeniedException",
                              "not authorized to perform: ssm:GetParametersByPath")
        with pytest.raises(settings.SettingsError) as error:
            settings.load(client, "/nothing-here")
    assert str(error.value).startswith(
        "may not read the SSM parameters under /nothing-here/ (AccessDeniedException)")
    assert "MASKRCNN_SSM_PATH" in str(error.value)


def test_fsx_status_filters_by_the_file_system(fake_aws):
    result = cli(fake_aws, "fsx-status")
    assert result.returncode == 0, result.stderr
    dataset, pretrained = json.loads(result.stdout)  # one association per prefix
    assert dataset["lifecycle"] == pretrained["lifecycle"] == "AVAILABLE"
    # One association for every dataset below the datasets prefix.
    assert dataset["s3"].endswith("/datasets/") and dataset["fsx_path"] == "/datasets"
    assert pretrained["s3"].endswith("/pretrained/") and pretrained["fsx_path"] == "/pretrained"


def _endpoint_names(fake_aws, name):
    sm = fake_aws.client("sagemaker")
    return ([e["EndpointName"] for e in sm.list_endpoints(NameContains=name)["Endpoints"]],
            [c["EndpointConfigName"] for c in sm.list_endpoint_configs(
                NameContains=name)["EndpointConfigs"]],
            [m["ModelName"] for m in sm.list_models()["Models"] if m["ModelName"] == name])


def test_deploy_invoke_and_delete_from_the_command_line(fake_aws, tmp_path):
    """From a finished job to an auto-scaling endpoint and back to nothing (EP-2, EP-4, EP-5,
    AAS-1)."""
    from PIL import Image

    job = completed_training_job(fake_aws)
    name = f"{JOB_PREFIX}-endpoint-cli"
    before = len(fake_aws.serving_requests_since(0))
    result = cli(fake_aws, "deploy", "--job", job, "--endpoint-name", name,
                 "--instance-type", "ml.m5.xlarge", "--allow-cpu", "--instance-count", "2",
                 "--min", "1", "--max", "4", "--target-invocations", "30", "--data-capture", "10")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["image"] == INFERENCE_IMAGES["cpu"]
    assert summary["volume_kms_key"] is True  # m5: an EBS volume, encrypted with the key
    sent = dict(fake_aws.serving_requests_since(before))
    params = fake_aws.parameters
    assert sent["CreateModel"]["PrimaryContainer"]["Image"] == INFERENCE_IMAGES["cpu"]
    assert sent["CreateEndpointConfig"]["KmsKeyId"] == params["kms-key-arn"]
    assert sent["CreateEndpointConfig"]["ProductionVariants"][0]["InitialInstanceCount"] == 2
    assert sent["CreateEndpointConfig"]["DataCaptureConfig"]["InitialSamplingPercentage"] == 10
    assert sent["RegisterScalableTarget"]["MinCapacity"] == 1
    assert sent["RegisterScalableTarget"]["MaxCapacity"] == 4
    assert sent["PutScalingPolicy"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] \
        == 30.0
    assert f"delete-endpoint {name}" in result.stderr

    image = tmp_path / "street.jpg"
    Image.new("RGB", (64, 48), (10, 200, 90)).save(image)
    result = cli(fake_aws, "invoke", name, str(image))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {str(image): INVOCATION_ANSWER}
    assert fake_aws.invocations[-1]["ContentType"] == "image/jpeg"

    result = cli(fake_aws, "endpoints")
    listed = json.loads(result.stdout)
    entry = next(e for e in listed if e["name"] == name)
    assert {"name": name, "status": "InService", "instance_type": "ml.m5.xlarge",
            "instance_count": 2, "price_class": "$"}.items() <= entry.items()
    assert entry["idle_alarm"] in ("INSUFFICIENT_DATA", "OK", "ALARM")  # moto's, not AWS's
    assert f"{name}: InService, 2 x ml.m5.xlarge ($ per instance-hour), up 0 h 0 min, idle " \
           f"alarm {entry['idle_alarm']}" in result.stderr
    assert "price classes per instance-hour: $ CPU only; $$ 1 GPU" in result.stderr
    result = cli(fake_aws, "delete-endpoint", name)
    assert result.returncode == 0, result.stderr
    assert f"deleted endpoint {name}" in result.stdout
    assert _endpoint_names(fake_aws, name) == ([], [], [])
    assert cli(fake_aws, "delete-endpoint", name).returncode == 0  # again: nothing to do


def test_deploy_dry_run_prints_the_requests_and_creates_nothing(fake_aws):
    job = completed_training_job(fake_aws)
    before = len(fake_aws.serving_requests_since(0))
    result = cli(fake_aws, "deploy", "--job", job, "--dry-run")
    assert result.returncode == 0, result.stderr
    requests = json.loads(result.stdout)
    assert list(requests) == ["CreateModel", "CreateEndpointConfig", "CreateEndpoint",
                              "PutMetricAlarm", "RegisterScalableTarget", "PutScalingPolicy"]
    # The idle alarm by default: 8 hours without an invocation notify the deployment's topic.
    alarm = requests["PutMetricAlarm"]
    assert alarm["EvaluationPeriods"] == 8 and alarm["Period"] == 3600
    assert alarm["AlarmActions"] == [fake_aws.parameters["notification-topic-arn"]]
    assert f"idle alarm:    {alarm['AlarmName']} notifies" in result.stderr
    assert "price class:   $$ per instance-hour (1 GPU)" in result.stderr
    assert requests["CreateModel"]["PrimaryContainer"]["Image"] == INFERENCE_IMAGES["gpu"]
    # The default instance type is checked here, without a create call: moto's
    # CreateEndpointConfig refuses ml.g5.* (its list of instance types predates g5), AWS does not.
    variant, = requests["CreateEndpointConfig"]["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g5.xlarge"
    assert "KmsKeyId" not in requests["CreateEndpointConfig"]  # ml.g5.xlarge: local NVMe
    assert f"training job:  {job}" in result.stderr
    assert fake_aws.serving_requests_since(before) == []
    hours = json.loads(cli(fake_aws, "deploy", "--job", job, "--dry-run", "--idle-hours", "36")
                       .stdout)["PutMetricAlarm"]
    assert hours["EvaluationPeriods"] == hours["DatapointsToAlarm"] == 36
    assert "PutMetricAlarm" not in json.loads(
        cli(fake_aws, "deploy", "--job", job, "--dry-run", "--no-idle-alarm").stdout)


@pytest.mark.parametrize("args, message", [
    (["deploy", "--idle-hours", "0"], "idle hours 0 (--idle-hours, idle_hours): expected a whole "
                                      "number of hours from 1 to 168"),
    (["deploy", "--instance-type", "ml.m5.xlarge"], "instance type 'ml.m5.xlarge' has no GPU"),
    (["deploy", "--instance-type", "ml.g5"], "instance type 'ml.g5' is not a SageMaker hosting"),
    (["deploy", "--job", f"{JOB_PREFIX}-nothing-20260101000000"], "does not exist in eu-west-2"),
    (["deploy", "--endpoint-name", "mine"], "endpoint name 'mine' must start with maskrcnn-test-"),
    (["delete-endpoint", "mine"], "endpoint name 'mine' must start with maskrcnn-test-"),
])
def test_invalid_serving_request_exits_2_and_creates_nothing(fake_aws, args, message):
    """EP-1 (names of the deployment only), EP-2 (a GPU image unless --allow-cpu)."""
    completed_training_job(fake_aws)
    before = len(fake_aws.serving_requests_since(0))
    result = cli(fake_aws, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert fake_aws.serving_requests_since(before) == []


def test_a_failed_endpoint_exits_1_with_its_reason_and_leaves_nothing(fake_aws):
    job = completed_training_job(fake_aws)
    name = f"{JOB_PREFIX}-endpoint-cli-fails"
    fake_aws.fail_endpoints[name] = "Failed to download model data"
    # A GPU type moto's CreateEndpointConfig knows (its list predates the default, ml.g5.*).
    result = cli(fake_aws, "deploy", "--job", job, "--endpoint-name", name,
                 "--instance-type", "ml.g4dn.xlarge")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"endpoint {name} Failed: Failed to download model data" in result.stderr
    assert "rolled back" in result.stderr
    assert _endpoint_names(fake_aws, name) == ([], [], [])


# Values the SDK would drop (0 is falsy: SageMaker's default replaces it) or SageMaker would
# take as given (a negative run time), and hyperparameters only SageMaker and its toolkit may
# set: refused when the launch is planned, exit status 2, nothing sent, dry run or not.
@pytest.mark.parametrize("args, message", [
    (["--instances", "0"], "instance count 0 (--instances, instance_count): expected a whole "
                           "number, 1 or more"),
    (["--instances", "0", "--dry-run"], "instance count 0 (--instances, instance_count)"),
    (["--max-run-hours", "0"], "max run hours 0.0 (--max-run-hours, max_run_hours): expected "
                               "more than 0 (at least 1 second) and at most 672"),
    (["--max-run-hours", "-1", "--dry-run"], "max run hours -1.0 (--max-run-hours"),
    (["--volume-gb", "0"], "volume size 0 GB (--volume-gb, volume_size_gb): expected a whole "
                           "number, 1 or more"),
    # TRN-3: no warm pool with spot (the other input-mode and warm-pool refusals:
    # test_validation.py).
    (["--keep-alive-seconds", "600", "--spot", "--dry-run"],
     "managed warm pools cannot be used with spot instances"),
    (["--hp", "sagemaker_submit_directory=s3://elsewhere/code.tar.gz"],
     "hyperparameter sagemaker_submit_directory='s3://elsewhere/code.tar.gz': SageMaker's or its "
     "training toolkit's"),
])
def test_a_launch_option_sagemaker_would_replace_or_refuse_exits_2_and_sends_nothing(
        fake_aws, args, message):
    before = len(fake_aws.requests_since(0))
    result = cli(fake_aws, "launch", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert result.stdout == ""
    assert fake_aws.requests_since(before) == []


def test_invoke_with_a_score_threshold_outside_0_to_1_exits_2_and_sends_nothing(fake_aws,
                                                                              tmp_path):
    from PIL import Image

    image = tmp_path / "street.jpg"
    Image.new("RGB", (64, 48), (10, 200, 90)).save(image)
    before = len(fake_aws.invocations)
    result = cli(fake_aws, "invoke", f"{JOB_PREFIX}-endpoint-any", str(image),
                 "--score-threshold", "7")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "score threshold 7.0 (--score-threshold, score_threshold): expected a number from 0 " \
           "to 1" in result.stderr
    assert len(fake_aws.invocations) == before
