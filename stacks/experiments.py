"""Experiment tracking (maskrcnn:mlflow=tracking-server): a SageMaker managed MLflow tracking
server that the training jobs log to, reached from the private VPC through its interface
endpoint.

A tracking server rather than an MLflow App: only the tracking server has a documented PrivateLink
endpoint service (aws.sagemaker.<region>.experiments), and this VPC may have no internet
(docs/experiments.md, "Why a tracking server, not an MLflow App"; docs/aws-rules.md MLF-2). The
server runs in a VPC of SageMaker's; IAM decides who may call it:
- the server's own role reads and writes its artifact store, <bucket>/mlflow/, and nothing else
  of the bucket (the deployment key's policy lets the account's IAM policies use the key);
- the training role may call the MLflow actions the job makes (maskrcnn_job/training/tracking.py)
  and upload artifacts below the store: the MLflow client writes them to S3 itself (MLF-3);
- the notebook role may read experiments and open the UI (a presigned URL), and stop or start the
  server to save its hours (stacks/notebook.py);
- the interface endpoint passes MLflow calls of this account's principals to this server only.
The server's ARN is published to SSM (`mlflow-tracking-server-arn`), the default of every launch.
`cdk destroy`, or setting maskrcnn:mlflow back to off, deletes the server and the runs it holds;
the artifacts stay in the (retained) bucket.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from maskrcnn_contract import tracking

from stacks.config import DeploymentConfig
from stacks.network import Network
from stacks.permissions import bucket_prefixes, policy
from stacks.storage.storage import Storage

# The server's MLflow: the newest 3.x tracking servers offer (the SageMaker developer guide,
# "Integrate MLflow with your environment": 2.13.x, 2.16.x, 3.0.x). The training image's client
# is 3.15.1 (training_code/dlc-constraints.txt): the same major version, which MLflow supports
# against a server (MLflow docs, self-hosting troubleshooting). A server cannot be upgraded in
# place: another version replaces it, and its runs with it.
MLFLOW_VERSION = "3.0.0"
# Weekly maintenance, when jobs are least likely to log (UTC).
MAINTENANCE_WINDOW = "Sun:02:00"

# The MLflow API actions each caller makes (Service Authorization Reference, "Amazon SageMaker
# with MLflow": resource type mlflow-tracking-server). The job's, from the calls of
# maskrcnn_job/training/tracking.py (held to what its run on a real MLflow server called:
# tests/training/test_evaluation_job.py).
JOB_ACTIONS = ("GetExperimentByName", "CreateExperiment", "CreateRun", "LogBatch", "GetRun",
               "UpdateRun")
# The notebook's: read only, as the UI browses experiments, runs, metrics, artifacts, logged
# models and traces (the deployment's model registry is SageMaker's, not MLflow's).
VIEWER_ACTIONS = ("GetExperiment", "GetExperimentByName", "SearchExperiments", "GetRun",
                  "SearchRuns", "GetMetricHistory", "ListArtifacts", "GetLoggedModel",
                  "SearchLoggedModels", "ListLoggedModelArtifacts", "GetTraceInfo", "SearchTraces")
# Opening the UI at all: an action that takes no resource (docs/aws-rules.md IAM-1), so '*'.
UI_ACTION = "AccessUI"
# The server's control plane the notebook uses: the UI's presigned URL, its state, and Stop/Start
# (a stopped server bills no server hours: docs/experiments.md).
CONTROL_ACTIONS = ("CreatePresignedMlflowTrackingServerUrl", "DescribeMlflowTrackingServer",
                   "StartMlflowTrackingServer", "StopMlflowTrackingServer")


def mlflow_actions(names) -> list[str]:
    return [f"sagemaker-mlflow:{name}" for name in names]


class ExperimentTracking(Construct):
    """The tracking server, its role and its interface endpoint."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 network: Network, storage: Storage) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        bucket, key, layout = storage.data_bucket, storage.data_key, config.bucket
        self.name = tracking.tracking_server_name(config.deployment_name)
        # Its name is in its ARN (MLF-1): the ARN is known before the server exists.
        self.server_arn = stack.format_arn(service="sagemaker", resource="mlflow-tracking-server",
                                           resource_name=self.name)
        self.artifact_prefix = layout.mlflow
        self.role = iam.Role(
            self, "ServerRole",
            # No aws:SourceAccount/aws:SourceArn condition: SageMaker's MLflow guide documents
            # the trust of sagemaker.amazonaws.com alone for a tracking server's role, and a
            # condition the service does not send would fail the server's creation.
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"{config.deployment_name}: the MLflow tracking server's artifact store")
        artifacts = bucket_prefixes(self, "ServerRoleArtifacts", self.role, bucket, key,
                                    write=[layout.mlflow])
        self.server = sagemaker.CfnMlflowTrackingServer(
            self, "Server", tracking_server_name=self.name,
            artifact_store_uri=f"s3://{bucket.bucket_name}/{layout.mlflow}",
            role_arn=self.role.role_arn, tracking_server_size=config.mlflow_size,
            mlflow_version=MLFLOW_VERSION, automatic_model_registration=False,
            weekly_maintenance_window_start=MAINTENANCE_WINDOW)
        # SageMaker checks the role's access to the artifact store when it creates the server.
        self.server.node.add_dependency(artifacts)
        self.endpoint = network.vpc.add_interface_endpoint(
            "SageMakerExperiments",
            service=ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_EXPERIMENTS,
            subnets=network.private_subnets, security_groups=[network.endpoint_sg],
            private_dns_enabled=True, open=False)
        # AWS's example endpoint policy (SageMaker developer guide, "Create a VPC endpoint
        # policy"), narrowed to this server and this account's principals.
        self.endpoint.add_to_policy(iam.PolicyStatement(
            principals=[iam.AnyPrincipal()], actions=["sagemaker-mlflow:*"],
            resources=[self.server_arn],
            conditions={"StringEquals": {"aws:PrincipalAccount": stack.account}}))
        self._bucket, self._key = bucket, key

    def grant_logging(self, scope: Construct, role: iam.IRole) -> iam.Policy:
        """What a training job's chief does (maskrcnn_job/training/tracking.py): its MLflow calls
        on this server, and its artifacts' upload below the store (SSE-KMS: the data key's
        GenerateDataKey, and Decrypt to complete a multipart upload)."""
        prefix = self.artifact_prefix
        return policy(scope, "JobRoleExperimentTracking", role, [
            iam.PolicyStatement(sid="LogRunsToTheTrackingServer",
                                actions=mlflow_actions(JOB_ACTIONS), resources=[self.server_arn]),
            iam.PolicyStatement(sid="UploadRunArtifacts",
                                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                                resources=[self._bucket.arn_for_objects(prefix + "*")]),
            iam.PolicyStatement(sid="EncryptRunArtifacts",
                                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                                resources=[self._key.key_arn]),
        ], wildcards=(f"/{prefix}*",), wildcard_reason=
           f"MLflow names each run's artifacts at run time under {prefix} "
           "(<experiment id>/<run id>/artifacts/), the tracking server's artifact store; the "
           "role may only upload there.")

    def grant_viewing(self, scope: Construct, role: iam.IRole) -> iam.Policy:
        """The notebook's: read this server's experiments, open its UI, stop and start it."""
        return policy(scope, "ViewExperiments", role, [
            iam.PolicyStatement(sid="OpenStopAndStartTheTrackingServer",
                                actions=[f"sagemaker:{a}" for a in CONTROL_ACTIONS],
                                resources=[self.server_arn]),
            iam.PolicyStatement(sid="ReadExperiments", actions=mlflow_actions(VIEWER_ACTIONS),
                                resources=[self.server_arn]),
            iam.PolicyStatement(sid="OpenTheMlflowUi", actions=mlflow_actions([UI_ACTION]),
                                resources=["*"]),
        ], wildcard_reason="sagemaker-mlflow:AccessUI supports no resource but '*' (Service "
           "Authorization Reference); what the UI shows is this server's, read only.")
