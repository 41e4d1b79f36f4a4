"""Hands a validated request to the SageMaker Python SDK 3 (`ModelTrainer`) and sends it.

`request.py` builds the CreateTrainingJob request in the API's shape; here it becomes
`ModelTrainer` configs. The SDK names the job `<base>-<timestamp>` only when it sends it, so one
botocore hook on the outgoing CreateTrainingJob puts that name into the checkpoint path and
validates the exact request on the wire again: what SageMaker receives has passed the same checks.
"""

import copy
import os
from typing import Optional

import boto3

from maskrcnn_launcher import request as job_request
from maskrcnn_launcher.settings import Deployment

# The launcher checks the role itself (it must be the deployment's training or staging role).
# The SDK's own check needs iam:SimulatePrincipalPolicy and iam:GetRole, which the notebook role
# does not have (least privilege), so it could only print warnings.
os.environ.setdefault("SAGEMAKER_VALIDATE_ROLE", "false")

# Imported after the line above; the SDK is large (~2 s to import).
from sagemaker.core.helper.session_helper import Session  # noqa: E402
from sagemaker.core.training.configs import (  # noqa: E402
    CheckpointConfig, Compute, FileSystemDataSource, InputData, MetricDefinition, Networking,
    OutputDataConfig, S3DataSource, StoppingCondition)
from sagemaker.train import ModelTrainer  # noqa: E402

_EVENT = "provide-client-params.sagemaker.CreateTrainingJob"


def sagemaker_session(boto_session: boto3.session.Session, deployment: Deployment) -> Session:
    """A session whose default bucket is the deployment's: the notebook role may not create the
    SDK's `sagemaker-<region>-<account>` bucket, and nothing should land outside the prefixes."""
    return Session(boto_session=boto_session, default_bucket=deployment.data_bucket,
                   default_bucket_prefix=deployment.output_prefix.rstrip("/"))


def _input_data(channel: dict) -> InputData:
    source = channel["DataSource"]
    if "FileSystemDataSource" in source:
        fs = source["FileSystemDataSource"]
        data_source = FileSystemDataSource(
            file_system_id=fs["FileSystemId"], file_system_type=fs["FileSystemType"],
            file_system_access_mode=fs["FileSystemAccessMode"], directory_path=fs["DirectoryPath"])
    else:
        s3 = source["S3DataSource"]
        data_source = S3DataSource(s3_data_type=s3["S3DataType"], s3_uri=s3["S3Uri"],
                                   s3_data_distribution_type=s3["S3DataDistributionType"])
    return InputData(channel_name=channel["ChannelName"], data_source=data_source)


def base_job_name(request: dict) -> str:
    """The SDK appends `-<YYYYmmddHHMMSS>` to this; request.py's default names end the same way."""
    name = request["TrainingJobName"]
    head, _, stamp = name.rpartition("-")
    return head if stamp.isdigit() and len(stamp) == 14 else name


def model_trainer(request: dict, session: Session) -> ModelTrainer:
    spec = request["AlgorithmSpecification"]
    resources = request["ResourceConfig"]
    stopping = request["StoppingCondition"]
    trainer = ModelTrainer(
        sagemaker_session=session,
        role=request["RoleArn"],
        base_job_name=base_job_name(request),
        training_image=spec["TrainingImage"],
        training_input_mode=spec["TrainingInputMode"],
        compute=Compute(
            instance_type=resources["InstanceType"], instance_count=resources["InstanceCount"],
            volume_size_in_gb=resources["VolumeSizeInGB"],
            volume_kms_key_id=resources.get("VolumeKmsKeyId"),
            enable_managed_spot_training=request["EnableManagedSpotTraining"]),
        networking=Networking(subnets=request["VpcConfig"]["Subnets"],
                              security_group_ids=request["VpcConfig"]["SecurityGroupIds"]),
        stopping_condition=StoppingCondition(
            max_runtime_in_seconds=stopping["MaxRuntimeInSeconds"],
            max_wait_time_in_seconds=stopping.get("MaxWaitTimeInSeconds")),
        output_data_config=OutputDataConfig(
            s3_output_path=request["OutputDataConfig"]["S3OutputPath"],
            kms_key_id=request["OutputDataConfig"].get("KmsKeyId")),
        checkpoint_config=(CheckpointConfig(s3_uri=request["CheckpointConfig"]["S3Uri"],
                                            local_path=request["CheckpointConfig"]["LocalPath"])
                           if "CheckpointConfig" in request else None),
        hyperparameters=dict(request["HyperParameters"]),
        environment=dict(request["Environment"]),
        input_data_config=[_input_data(c) for c in request["InputDataConfig"]] or None,
    )
    if spec["MetricDefinitions"]:
        trainer = trainer.with_metric_definitions(
            [MetricDefinition(name=d["Name"], regex=d["Regex"]) for d in spec["MetricDefinitions"]])
    return trainer


class _WireCheck:
    """Fills the SDK-chosen job name into the checkpoint path and validates what is sent."""

    def __init__(self, deployment: Deployment, job_channels: bool):
        self.deployment = deployment
        self.job_channels = job_channels
        self.sent: Optional[dict] = None

    def __call__(self, params, **_):
        if "CheckpointConfig" in params:
            params["CheckpointConfig"]["S3Uri"] = self.deployment.checkpoint_s3_uri(
                params["TrainingJobName"])
        wire = copy.deepcopy(params)
        wire.setdefault("InputDataConfig", [])
        wire.setdefault("Environment", {})
        wire.setdefault("HyperParameters", {})
        wire.setdefault("EnableManagedSpotTraining", False)
        wire["AlgorithmSpecification"].setdefault("MetricDefinitions", [])
        job_request.validate(wire, self.deployment, job_channels=self.job_channels)
        self.sent = copy.deepcopy(params)


def submit(request: dict, deployment: Deployment, boto_session: boto3.session.Session,
           job_channels: bool = True) -> str:
    """Starts the job without waiting; returns the job name SageMaker knows it by."""
    job_request.validate(request, deployment, job_channels=job_channels)
    session = sagemaker_session(boto_session, deployment)
    trainer = model_trainer(request, session)
    check = _WireCheck(deployment, job_channels)
    events = boto_session.events
    handler_id = f"maskrcnn-launcher-{id(check)}"
    events.register(_EVENT, check, unique_id=handler_id)
    try:
        trainer.train(wait=False, logs=False)
    finally:
        events.unregister(_EVENT, unique_id=handler_id)
    if check.sent is None:
        raise RuntimeError("the SageMaker SDK did not send CreateTrainingJob through this session")
    return check.sent["TrainingJobName"]
