"""One local AWS per session (moto on 127.0.0.1), seeded with what a deployment publishes."""

import contextlib
import copy
import functools
import os
from pathlib import Path
from typing import List

import boto3
import pytest
from maskrcnn_contract import job_io, ssm
from stacks import dlc

from tests.launcher.fake_aws import FakeAws, model_archive

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"

# Deliberately not us-east-1: nothing in the launcher or notebooks may assume a region.
REGION = "eu-west-2"
SSM_PATH = "/maskrcnn-test"
JOB_PREFIX = "maskrcnn-test"
BUCKET = "maskrcnn-test-data-123456789012"
FSX_MOUNT_NAME = "abcd1234"  # moto returns no MountName
# The region's TensorFlow Serving inference images (Deep Learning Containers), as the stack
# publishes them.
INFERENCE_IMAGES = {processor: dlc.inference_image(REGION, processor) for processor in ("gpu", "cpu")}
# The bucket prefixes a deployment copies to EFS and links to FSx: every dataset, the backbones.
INPUT_PREFIXES = ("datasets/", "pretrained/")


def _environment(endpoint: str) -> dict:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "SAGEMAKER_VALIDATE_ROLE": "false",
        "MASKRCNN_SSM_PATH": SSM_PATH,
        "MASKRCNN_POLL_SECONDS": "0",
        # Anything that tries the internet fails at once instead of leaving this machine.
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def seed(aws: FakeAws) -> dict:
    """Makes in `aws` what a deployment makes (network, bucket, file systems, roles, DataSync
    tasks, key, model package group, topic), publishes it in SSM as the stack does, and returns
    the published values; the launcher tests' session and tests/training/fake_deployment.py
    seed with it."""
    ec2 = aws.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.40.{i}.0/24",
                                 AvailabilityZone=f"{REGION}{az}")["Subnet"]["SubnetId"]
               for i, az in ((0, "a"), (1, "b"))]
    sg = ec2.create_security_group(GroupName="training", Description="training",
                                   VpcId=vpc)["GroupId"]
    aws.client("s3").create_bucket(Bucket=BUCKET,
                                   CreateBucketConfiguration={"LocationConstraint": REGION})
    efs_id = aws.client("efs").create_file_system(CreationToken="coco")["FileSystemId"]
    fsx_id = aws.client("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnets[0]],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2",
                             "PerUnitStorageThroughput": 250})["FileSystem"]["FileSystemId"]
    iam = aws.client("iam")
    trust = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"sagemaker.amazonaws.com"},"Action":"sts:AssumeRole"}]}'
    training_role = iam.create_role(RoleName="training", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    staging_role = iam.create_role(RoleName="staging", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    model_role = iam.create_role(RoleName="model", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    datasync = aws.client("datasync")
    tasks = []
    for prefix in INPUT_PREFIXES:  # one task per prefix, as deployed
        source = datasync.create_location_s3(
            S3BucketArn=f"arn:aws:s3:::{BUCKET}", Subdirectory="/" + prefix,
            S3Config={"BucketAccessRoleArn": staging_role})["LocationArn"]
        target = datasync.create_location_smb(  # moto has no EFS location; only the task ARN matters
            ServerHostname="efs", Subdirectory="/" + prefix.rstrip("/"), User="u", Password="p",
            AgentArns=["arn:aws:datasync:eu-west-2:123456789012:agent/agent-1"])["LocationArn"]
        tasks.append(datasync.create_task(SourceLocationArn=source, DestinationLocationArn=target,
                                          Name=f"s3-to-efs-{prefix.rstrip('/').replace('/', '-')}")["TaskArn"])
    key = aws.client("kms").create_key()["KeyMetadata"]["Arn"]
    # The stack's model package group (stacks/registry.py).
    aws.client("sagemaker").create_model_package_group(ModelPackageGroupName=f"{JOB_PREFIX}-models")
    topic = aws.client("sns").create_topic(Name=f"{JOB_PREFIX}-notifications")["TopicArn"]
    published = {
        "region": REGION,
        "job-name-prefix": JOB_PREFIX,
        "data-bucket": BUCKET,
        "datasets-prefix": "datasets/",
        "imports-prefix": "imports/",
        "pretrained-prefix": "pretrained/",
        "output-prefix": "jobs/",
        "checkpoint-prefix": "checkpoints/",
        "samples-prefix": "samples/",
        "internet-egress": "true",
        "kms-key-arn": key,
        "efs-id": efs_id,
        "efs-datasets-path": "/datasets",
        "efs-pretrained-path": "/pretrained",
        "fsx-id": fsx_id,
        "fsx-mount-name": FSX_MOUNT_NAME,
        "fsx-datasets-path": f"/{FSX_MOUNT_NAME}/datasets",
        "fsx-pretrained-path": f"/{FSX_MOUNT_NAME}/pretrained",
        "datasync-task-arns": ",".join(tasks),
        "subnet-ids": ",".join(subnets),
        "security-group-ids": sg,
        "training-role-arn": training_role,
        "staging-role-arn": staging_role,
        # The CDK bootstrap's asset repository, cdk-hnb659fds-container-assets-<account>-<region>.
        "training-image-uri": (f"123456789012.dkr.ecr.{REGION}.amazonaws.com/"
                               f"cdk-hnb659fds-container-assets-123456789012-{REGION}:0123abcd"),
        "model-role-arn": model_role,
        "inference-image-gpu-uri": INFERENCE_IMAGES["gpu"],
        "inference-image-cpu-uri": INFERENCE_IMAGES["cpu"],
        "notification-topic-arn": topic,
        "model-package-group": f"{JOB_PREFIX}-models",
        # The fake deployment has the MLflow tracking server (moto has no MLflow API): launches
        # log to it unless told not to (notebooks/maskrcnn_launcher/training/tracking.py).
        "mlflow-tracking-server-arn": (f"arn:aws:sagemaker:{REGION}:123456789012:"
                                       f"mlflow-tracking-server/{JOB_PREFIX}-mlflow"),
    }
    # Seeded from the contract's list: a parameter added there without a value here fails here.
    values = {name: published[name] for name in ssm.ALL}
    client = aws.client("ssm")
    for name, value in values.items():
        client.put_parameter(Name=ssm.parameter_name(SSM_PATH, name), Value=value, Type="String")
    for number, prefix in enumerate(INPUT_PREFIXES):  # one association per prefix, as deployed
        aws.associations.append({
            "AssociationId": f"dra-0123456789abcdef{number}", "FileSystemId": fsx_id,
            "Lifecycle": "AVAILABLE", "FileSystemPath": "/" + prefix.rstrip("/"),
            "DataRepositoryPath": f"s3://{BUCKET}/{prefix}",
            "S3": {"AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}})
    return values


@pytest.fixture(scope="session")
def fake_aws(tmp_path_factory):
    aws = FakeAws(REGION).start()
    saved = dict(os.environ)
    # The launcher copies TensorBoard's summaries and fetches reports below these folders, not
    # the user's home.
    environment = dict(_environment(aws.endpoint),
                       MASKRCNN_TENSORBOARD_DIR=str(tmp_path_factory.mktemp("tensorboard")),
                       MASKRCNN_REPORTS_DIR=str(tmp_path_factory.mktemp("reports")),
                       MASKRCNN_PREDICTIONS_DIR=str(tmp_path_factory.mktemp("predictions")))
    os.environ.update(environment)
    aws.parameters = seed(aws)
    aws.vpc_id = aws.client("ec2").describe_subnets(
        SubnetIds=aws.parameters["subnet-ids"].split(","))["Subnets"][0]["VpcId"]
    aws.environment = environment
    yield aws
    os.environ.clear()
    os.environ.update(saved)
    aws.stop()


def pytest_collection_modifyitems(items):
    """Every launcher test's AWS calls are the notebook role's (tests/iam/plugin.py): the
    launcher, the notebooks and the CLI run as the notebook instance's role."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.iam_role("notebook"))


@pytest.fixture
def iam_published(fake_aws):
    """What the fake deployment publishes, and its VPC: the IAM evaluation resolves the template's
    references to these (tests/iam/template.py)."""
    return dict(fake_aws.parameters), fake_aws.vpc_id


@functools.lru_cache(maxsize=None)
def shared_boto_session():
    """The boto3 session the launcher under test gets, one for the whole run: each new session
    loads the services' models from JSON again. First called inside a test that uses fake_aws,
    so that its clients read the endpoint and credentials that fixture puts in the environment."""
    return boto3.session.Session()


# What the staging job writes (the fake job writes the same): the dataset's completeness marker and
# the backbone checkpoint, its manifest last.
STAGED_OBJECTS = (
    "datasets/coco2017/tfrecords/train-00000-of-00001.tfrecord",
    f"datasets/coco2017/{job_io.DATASET_COMPLETE_MARKER}",
    *(f"pretrained/{backbone}/{name}" for backbone in job_io.STAGED_BACKBONES
      for name in ("ckpt-28080.data-00000-of-00001", "ckpt-28080.index",
                   job_io.PRETRAINED_COMPLETE_MARKER)),
)


def stage_inputs(fake_aws, staged: bool) -> None:
    """Puts the staged dataset and backbone into the bucket, or removes them: only what differs
    from that, read from moto's own store (every test starts so: eight requests for each test
    were ~4 s of CPU a run)."""
    s3 = fake_aws.client("s3")
    for key in STAGED_OBJECTS:
        stored = fake_aws.stored_object(BUCKET, key)
        if staged and stored != b"{}":
            s3.put_object(Bucket=BUCKET, Key=key, Body=b"{}")
        elif not staged and stored is not None:
            s3.delete_object(Bucket=BUCKET, Key=key)


@pytest.fixture(autouse=True)
def inputs_staged(request):
    """Every launcher test starts with the dataset and the backbone staged, as after
    prepare-data.ipynb; a test marked `unstaged` starts without them."""
    if "fake_aws" not in request.fixturenames:
        yield
        return
    fake_aws = request.getfixturevalue("fake_aws")
    stage_inputs(fake_aws, staged=request.node.get_closest_marker("unstaged") is None)
    yield


@pytest.fixture(scope="session")
def deployment(fake_aws):
    """The deployment as the launcher reads it from SSM, read once: no test changes the
    parameters, and a Deployment is immutable."""
    from maskrcnn_launcher.deployment import settings

    return settings.load(fake_aws.client("ssm"), SSM_PATH)


def completed_training_job(fake_aws, run: str = "serve", with_model: bool = True,
                           hyperparameters: dict = None, environment: dict = None,
                           with_report: bool = True, checkpoint_s3_uri: str = None,
                           keep_alive_seconds: int = 0, instance_count: int = 1) -> str:
    """A training job of the deployment that moto reports Completed at once, with its
    model.tar.gz in the bucket (unless `with_model` is False; the evaluation report beside the
    model unless `with_report` is False: fake_aws.model_archive) and, given `checkpoint_s3_uri`,
    the CheckpointConfig a launch sends; with `keep_alive_seconds`, a warm pool kept from its end
    (fake_aws.py). Returns its name."""
    import uuid

    name = f"{JOB_PREFIX}-{run}-{uuid.uuid4().hex[:6]}-20260101120000"
    params = fake_aws.parameters
    extra = {"CheckpointConfig": {"S3Uri": checkpoint_s3_uri,
                                  "LocalPath": job_io.CHECKPOINT_LOCAL_PATH}} \
        if checkpoint_s3_uri else {}
    fake_aws.client("sagemaker").create_training_job(**extra,
        TrainingJobName=name, RoleArn=params["training-role-arn"],
        AlgorithmSpecification={"TrainingImage": params["training-image-uri"],
                                "TrainingInputMode": "File"},
        HyperParameters=hyperparameters or {"max_steps": "10"},
        Environment=environment or {},
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/jobs/"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": instance_count,
                        "VolumeSizeInGB": 200,
                        **({"KeepAlivePeriodInSeconds": keep_alive_seconds}
                           if keep_alive_seconds else {})},
        StoppingCondition={"MaxRuntimeInSeconds": 3600})
    # The fake job has written its model.tar.gz (fake_aws.py): replaced, or removed.
    if with_model:
        fake_aws.client("s3").put_object(Bucket=BUCKET, Key=model_key(name),
                                         Body=model_archive(report=with_report))
    else:
        fake_aws.client("s3").delete_object(Bucket=BUCKET, Key=model_key(name))
    return name


def model_key(job_name: str) -> str:
    """Where SageMaker puts a job's model.tar.gz: <output path><job>/output/model.tar.gz."""
    return f"jobs/{job_name}/output/model.tar.gz"


@contextlib.contextmanager
def captured(boto_session, service: str, operation: str):
    """The parameters of every `service`.`operation` call made through clients of `boto_session`
    created inside the block, as the caller sent them (botocore's provide-client-params). For
    services whose wire format FakeAws does not read (CloudWatch's CBOR)."""
    calls: List[dict] = []

    def keep(params, **_):
        calls.append(copy.deepcopy(params))

    event = f"provide-client-params.{service}.{operation}"
    boto_session.events.register(event, keep, unique_id=f"captured-{id(calls)}")
    try:
        yield calls
    finally:
        boto_session.events.unregister(event, unique_id=f"captured-{id(calls)}")
