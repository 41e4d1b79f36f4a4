"""Notebook: a SageMaker notebook instance in a private subnet, its lifecycle config and role.

The role launches training jobs into this deployment's VPC with the job roles (a warm pool kept
at most the contract's keep-alive, and ended early on request), hosts their models
on auto-scaling endpoints in the same VPC with the model role, puts their idle alarms (which may
notify the deployment's topic only), and reads what a launcher reads; it cannot create other
roles, touch other buckets, or start jobs or endpoints elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import ArnFormat, Fn, Stack
from aws_cdk import aws_codeartifact as codeartifact
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from maskrcnn_contract import job_io, model_registry

from stacks.config import DeploymentConfig
from stacks.experiments import ExperimentTracking
from stacks.monitoring import Monitoring
from stacks.nag import acknowledge
from stacks.network import Network
from stacks.notebooks_asset import notebooks_asset
from stacks.outputs import console_domain, output
from stacks.permissions import bucket_prefixes, log_group_arn, policy
from stacks.registry import ModelRegistry
from stacks.storage.storage import Storage
from stacks.training import Training

LIFECYCLE_DIR = Path(__file__).resolve().parent / "notebook_lifecycle"
PLATFORM = "notebook-al2023-v1"
# Application Auto Scaling's service principal for SageMaker endpoint variants (its service-linked
# role AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint trusts this principal).
AUTOSCALING_PRINCIPAL = "sagemaker.application-autoscaling.amazonaws.com"


def _in_training_vpc(network: Network) -> dict:
    """Conditions of a Create call that must name the training subnets and security group (SM-6):
    ForAllValues alone passes when the key is absent, so the keys are required too."""
    return {
        "Null": {"sagemaker:VpcSubnets": "false", "sagemaker:VpcSecurityGroupIds": "false"},
        "ForAllValues:StringEquals": {
            "sagemaker:VpcSubnets": network.private.subnet_ids,
            "sagemaker:VpcSecurityGroupIds": [network.training_sg.security_group_id],
        },
    }


class Notebook(Construct):
    """Notebook instance, lifecycle config, optional Git repository, and the notebook role."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 network: Network, storage: Storage, training: Training,
                 monitoring: Monitoring, registry: ModelRegistry,
                 experiments: ExperimentTracking | None = None) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self._stack = Stack.of(self)
        self.notebooks = notebooks_asset(self, "Notebooks")
        self.role = iam.Role(
            self, "Role",
            # No aws:SourceAccount/aws:SourceArn condition: SageMaker's confused-deputy guidance
            # documents those keys for jobs, not for notebook instances, and a condition the
            # service does not send would stop the instance from starting.
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"{config.deployment_name}: notebook instance that launches training jobs",
        )
        self._grant_launching(network, training)
        self._grant_deploying(network, training, storage)
        self._grant_idle_alarms(training, monitoring)
        self._grant_registering(registry)
        if experiments is not None:  # the MLflow UI, read only, and Stop/Start of the server
            experiments.grant_viewing(self, self.role)
        self._grant_data_access(storage)
        mirror = None if config.nat_gateways else self._pypi_mirror(config, storage.data_key)
        own_resources = [iam.PolicyStatement(
            sid="ReadNotebooksAsset",
            actions=["s3:GetObject"],
            resources=[self.notebooks.bucket.arn_for_objects(self.notebooks.s3_object_key)],
        )]

        lifecycle = sagemaker.CfnNotebookInstanceLifecycleConfig(
            self, "Lifecycle",
            # No physical names here or on the instance: CloudFormation names them, so that a
            # change that replaces either can create the new one before deleting the old.
            on_create=[sagemaker.CfnNotebookInstanceLifecycleConfig.NotebookInstanceLifecycleHookProperty(
                content=Fn.base64(self._script("on_create.sh", REGION=self._stack.region,
                                                NOTEBOOKS_S3_URL=self.notebooks.s3_object_url)))],
            on_start=[sagemaker.CfnNotebookInstanceLifecycleConfig.NotebookInstanceLifecycleHookProperty(
                content=Fn.base64(self._script(
                    "on_start.sh",
                    REGION=self._stack.region,
                    EFS_ID=storage.efs.file_system.file_system_id,
                    FSX_DNS=storage.fsx.file_system.dns_name if storage.fsx else "",
                    FSX_MOUNT_NAME=storage.fsx.file_system.mount_name if storage.fsx else "",
                    SSM_PATH=config.ssm_path,
                    CODEARTIFACT_DOMAIN=mirror.domain_name if mirror else "",
                    CODEARTIFACT_OWNER=self._stack.account if mirror else "",
                    CODEARTIFACT_REPOSITORY=mirror.repository_name if mirror else "",
                )))],
        )
        repository = self._code_repository(config, own_resources)
        policy(self, "OwnResources", self.role, own_resources)
        self.notebook = sagemaker.CfnNotebookInstance(
            self, "Instance",
            instance_type=config.notebook_instance_type,
            role_arn=self.role.role_arn,
            subnet_id=network.private.subnet_ids[0],
            security_group_ids=[network.notebook_sg.security_group_id],
            direct_internet_access="Disabled",
            root_access="Disabled",
            kms_key_id=storage.data_key.key_id,
            volume_size_in_gb=config.notebook_volume_gib,
            platform_identifier=PLATFORM,
            instance_metadata_service_configuration=sagemaker.CfnNotebookInstance.InstanceMetadataServiceConfigurationProperty(
                minimum_instance_metadata_service_version="2"),
            lifecycle_config_name=lifecycle.attr_notebook_instance_lifecycle_config_name,
            default_code_repository=repository.attr_code_repository_name if repository else None,
        )
        output(self, "NotebookInstanceName", self.notebook.attr_notebook_instance_name)
        output(self, "NotebookUrl", (
            f"https://{console_domain(self)}/sagemaker/home"
            f"?region={self._stack.region}"
            f"#/notebook-instances/openNotebook/{self.notebook.attr_notebook_instance_name}?view=lab"))
        # The role's policies must exist before the instance starts and runs its lifecycle scripts.
        for child in self.node.find_all():
            if isinstance(child, iam.Policy):
                self.notebook.node.add_dependency(child)

    def _script(self, name: str, **values: str) -> str:
        script = (LIFECYCLE_DIR / name).read_text()
        for key, value in values.items():
            script = script.replace(f"@@{key}@@", value)
        if "@@" in script:
            raise ValueError(f"{name}: placeholder left unfilled")
        return script

    def _pypi_mirror(self, config: DeploymentConfig, key) -> codeartifact.CfnRepository:
        """Without NAT the notebook cannot reach PyPI: a CodeArtifact repository with PyPI as its
        external connection fetches packages on the service side, and the notebook reaches it
        through the VPC endpoints (stacks/network.py). The start script points pip at it."""
        domain = codeartifact.CfnDomain(self, "PackageDomain", domain_name=config.deployment_name,
                                        encryption_key=key.key_arn)
        repository = codeartifact.CfnRepository(
            self, "PypiMirror", domain_name=domain.attr_name, repository_name="pypi",
            external_connections=["public:pypi"],
            description=f"{config.deployment_name}: PyPI for the notebook instance (no NAT)")
        policy(self, "ReadPypiMirror", self.role, [
            iam.PolicyStatement(actions=["codeartifact:GetAuthorizationToken"],
                                resources=[domain.attr_arn]),
            iam.PolicyStatement(actions=["codeartifact:GetRepositoryEndpoint",
                                         "codeartifact:ReadFromRepository"],
                                resources=[repository.attr_arn]),
            # CodeArtifact user guide, "Using service bearer tokens": the token CodeArtifact
            # needs is issued by STS, for this service only.
            iam.PolicyStatement(actions=["sts:GetServiceBearerToken"], resources=["*"],
                                conditions={"StringEquals": {
                                    "sts:AWSServiceName": "codeartifact.amazonaws.com"}}),
        ], wildcard_reason="sts:GetServiceBearerToken supports no resource but '*'; the condition "
           "limits it to CodeArtifact's tokens.")
        return repository

    def _code_repository(self, config: DeploymentConfig, statements: list[iam.PolicyStatement]
                         ) -> sagemaker.CfnCodeRepository | None:
        if config.git_repository_url is None:
            return None
        secret_arn = config.git_secret_arn
        if secret_arn is None and config.git_username is not None:
            # A correctly formed secret: JSON with the keys SageMaker reads. The password is a
            # placeholder for the user's token (docs/settings.md, "Private Git repository").
            secret = secretsmanager.Secret(
                self, "GitCredentials",
                description=f"{config.deployment_name}: Git credentials for the notebook instance",
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    secret_string_template=json.dumps({"username": config.git_username}),
                    generate_string_key="password",
                ),
            )
            acknowledge(secret, "AwsSolutions-SMG4",
                        "A Git host's personal access token cannot be rotated by a Secrets Manager "
                        "rotation Lambda; the user rotates it at the Git host and updates the "
                        "secret.")
            secret_arn = secret.secret_arn
        if secret_arn is not None:
            statements.append(iam.PolicyStatement(
                sid="ReadGitCredentials",
                actions=["secretsmanager:GetSecretValue"],
                resources=[secret_arn],
            ))
        return sagemaker.CfnCodeRepository(
            self, "GitRepository",
            git_config=sagemaker.CfnCodeRepository.GitConfigProperty(
                repository_url=config.git_repository_url, branch=config.git_branch,
                secret_arn=secret_arn),
        )

    def _grant_launching(self, network: Network, training: Training) -> None:
        """Training jobs named '<prefix>-*' in the training VPC, with a warm pool of at most the
        contract's keep-alive (docs/aws-rules.md TRN-5: a launch without a warm pool carries no
        sagemaker:KeepAlivePeriod, hence IfExists); UpdateTrainingJob of those jobs only to end
        a warm pool (keep-alive 0, the key required: no profiler or remote-debug updates)."""
        jobs = self._stack.format_arn(service="sagemaker", resource="training-job",
                               resource_name=f"{training.job_name_prefix}-*")
        # Hyperparameter tuning jobs of the same names, their training definition in the training
        # VPC (docs/aws-rules.md TUN-5); their candidates are training jobs '<name>-NNN-xxxxxxxx'.
        tuning_jobs = self._stack.format_arn(service="sagemaker",
                                             resource="hyper-parameter-tuning-job",
                                             resource_name=f"{training.job_name_prefix}-*")
        policy(self, "LaunchJobs", self.role, [
            iam.PolicyStatement(
                sid="CreateTrainingJobsInTheTrainingVpcOnly",
                actions=["sagemaker:CreateTrainingJob"],
                resources=[jobs],
                conditions={**_in_training_vpc(network), "NumericLessThanEqualsIfExists": {
                    "sagemaker:KeepAlivePeriod": str(job_io.MAX_KEEP_ALIVE_SECONDS)}}),
            iam.PolicyStatement(
                sid="EndOwnWarmPoolsOnly",
                actions=["sagemaker:UpdateTrainingJob"],
                resources=[jobs],
                conditions={"NumericLessThanEquals": {"sagemaker:KeepAlivePeriod": "0"}}),
            iam.PolicyStatement(
                sid="ManageOwnTrainingJobs",
                actions=["sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob",
                         "sagemaker:AddTags", "sagemaker:ListTags"],
                resources=[jobs]),
            iam.PolicyStatement(sid="ListTrainingJobs", actions=["sagemaker:ListTrainingJobs"],
                                resources=["*"]),
            iam.PolicyStatement(
                sid="CreateTuningJobsInTheTrainingVpcOnly",
                actions=["sagemaker:CreateHyperParameterTuningJob"],
                resources=[tuning_jobs],
                conditions=_in_training_vpc(network)),
            iam.PolicyStatement(
                sid="FollowOwnTuningJobs",
                actions=["sagemaker:DescribeHyperParameterTuningJob",
                         "sagemaker:ListTrainingJobsForHyperParameterTuningJob",
                         "sagemaker:StopHyperParameterTuningJob"],
                resources=[tuning_jobs]),
            iam.PolicyStatement(
                sid="PassJobRolesToSageMakerOnly",
                actions=["iam:PassRole"],
                resources=[training.training_role.role_arn, training.staging_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}),
        ], wildcards=("*", f":training-job/{training.job_name_prefix}-*",
                      f":hyper-parameter-tuning-job/{training.job_name_prefix}-*"), wildcard_reason=
           f"Job and tuning job names are made at launch, all starting "
           f"'{training.job_name_prefix}-', and jobs "
           "must run in the training subnets and security group; sagemaker:ListTrainingJobs "
           "supports no resource but '*'.")
        policy(self, "ReadParameters", self.role, [iam.PolicyStatement(
            actions=["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath"],
            resources=[
                self._stack.format_arn(service="ssm", resource="parameter",
                                       resource_name=self.config.deployment_name),
                self._stack.format_arn(service="ssm", resource="parameter",
                                resource_name=f"{self.config.deployment_name}/*"),
            ])],
            wildcards=(f":parameter/{self.config.deployment_name}/*",), wildcard_reason=
            f"Reads every parameter below this deployment's path {self.config.ssm_path}, "
            "which the training stack publishes for launchers.")
        policy(self, "LogsAndMetrics", self.role, [
            iam.PolicyStatement(
                sid="FollowJobLogs",
                actions=["logs:DescribeLogStreams", "logs:GetLogEvents", "logs:FilterLogEvents"],
                resources=[log_group_arn(self._stack, "/aws/sagemaker/TrainingJobs")]),
            iam.PolicyStatement(
                sid="NotebookInstanceLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                         "logs:DescribeLogStreams"],
                resources=[log_group_arn(self._stack, "/aws/sagemaker/NotebookInstances")]),
            iam.PolicyStatement(
                sid="ReadJobMetrics",
                actions=["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"],
                resources=["*"]),
        ], wildcards=("*", "/aws/sagemaker/TrainingJobs:*", "/aws/sagemaker/NotebookInstances:*"),
           wildcard_reason="Log streams are one per job host or per lifecycle script (':*' is the "
           "streams of the two named groups); CloudWatch metric reads support no resource but '*'.")

    def _grant_deploying(self, network: Network, training: Training, storage: Storage) -> None:
        """The launcher's deploy path (notebooks/maskrcnn_launcher/serving/endpoint_plan.py): a
        model in the training VPC with the model role, an endpoint configuration and an endpoint,
        Application Auto Scaling of the endpoint's variant (target tracking), invocations, and the
        reverse; and predict-batch's transform jobs of such a model (docs/aws-rules.md BT-1).
        Every SageMaker resource is named '<prefix>-...' like the training jobs
        (docs/aws-rules.md IAM-3, IAM-4, IAM-5)."""
        prefix = training.job_name_prefix

        def arn(resource: str) -> str:
            return self._stack.format_arn(service="sagemaker", resource=resource,
                                          resource_name=f"{prefix}-*")

        models, configs, endpoints = arn("model"), arn("endpoint-config"), arn("endpoint")
        transforms, key_arn = arn("transform-job"), storage.data_key.key_arn
        policy(self, "DeployModels", self.role, [
            iam.PolicyStatement(
                sid="CreateModelsInTheTrainingVpcOnly",
                actions=["sagemaker:CreateModel"],
                resources=[models],
                conditions=_in_training_vpc(network)),
            iam.PolicyStatement(
                sid="ManageOwnModels",
                actions=["sagemaker:DescribeModel", "sagemaker:DeleteModel"],
                resources=[models]),
            iam.PolicyStatement(
                sid="ManageOwnEndpointConfigs",
                actions=["sagemaker:CreateEndpointConfig", "sagemaker:DescribeEndpointConfig",
                         "sagemaker:DeleteEndpointConfig"],
                resources=[configs]),
            iam.PolicyStatement(
                sid="CreateOwnEndpoints",
                # CreateEndpoint names the endpoint and its configuration.
                actions=["sagemaker:CreateEndpoint"],
                resources=[endpoints, configs]),
            iam.PolicyStatement(
                sid="ManageOwnEndpoints",
                # DescribeEndpoint(Config) and UpdateEndpointWeightsAndCapacities are what
                # Application Auto Scaling requires of its caller for SageMaker (IAM-5).
                actions=["sagemaker:DescribeEndpoint", "sagemaker:DeleteEndpoint",
                         "sagemaker:UpdateEndpointWeightsAndCapacities",
                         "sagemaker:InvokeEndpoint"],
                resources=[endpoints]),
            iam.PolicyStatement(
                # The CLI's `endpoints` and inference.ipynb list the deployment's endpoints; a
                # List action is authorized on '*' only (docs/aws-rules.md IAM-1).
                sid="ListEndpoints",
                actions=["sagemaker:ListEndpoints"],
                resources=["*"]),
            iam.PolicyStatement(
                sid="TagOwnHostingResources",
                # Create* calls that carry Tags also need sagemaker:AddTags on what they create.
                actions=["sagemaker:AddTags", "sagemaker:ListTags"],
                resources=[models, configs, endpoints]),
            iam.PolicyStatement(
                # predict-batch (BT-1): the deployment's own model, its answers encrypted with
                # the deployment's key, an EBS volume (where the type has one) with it too.
                sid="BatchTransformsOfOwnModelsWithTheDeploymentsKey",
                actions=["sagemaker:CreateTransformJob"],
                resources=[transforms],
                conditions={"ArnLike": {"sagemaker:ModelArn": models},
                            "StringEquals": {"sagemaker:OutputKmsKeyArn": key_arn},
                            "StringEqualsIfExists": {"sagemaker:VolumeKmsKeyArn": key_arn}}),
            iam.PolicyStatement(
                sid="FollowOwnBatchTransforms",
                actions=["sagemaker:DescribeTransformJob", "sagemaker:StopTransformJob"],
                resources=[transforms]),
            iam.PolicyStatement(
                sid="PassTheModelRoleToSageMakerOnly",
                actions=["iam:PassRole"],
                resources=[training.model_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}),
        ], wildcards=("*", f":model/{prefix}-*", f":endpoint-config/{prefix}-*",
                      f":endpoint/{prefix}-*", f":transform-job/{prefix}-*"),
           wildcard_reason=f"Models, endpoint configurations, endpoints and transform jobs are "
           f"named at deploy or predict time, all starting '{prefix}-'; models must attach to the "
           "training subnets and security group; sagemaker:ListEndpoints supports no resource but "
           "'*'.")

        service_linked_role = (
            f"arn:{self._stack.partition}:iam::{self._stack.account}:role/aws-service-role/"
            f"{AUTOSCALING_PRINCIPAL}/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")
        alarms = self._stack.format_arn(service="cloudwatch", resource="alarm",
                                        resource_name=f"TargetTracking-endpoint/{prefix}-*",
                                        arn_format=ArnFormat.COLON_RESOURCE_NAME)
        sagemaker_variants = {
            "application-autoscaling:service-namespace": "sagemaker",
            "application-autoscaling:scalable-dimension": "sagemaker:variant:DesiredInstanceCount",
        }
        policy(self, "ScaleEndpoints", self.role, [
            iam.PolicyStatement(
                sid="ScaleSageMakerVariantsOnly",
                actions=["application-autoscaling:RegisterScalableTarget",
                         "application-autoscaling:DeregisterScalableTarget",
                         "application-autoscaling:PutScalingPolicy",
                         "application-autoscaling:DeleteScalingPolicy"],
                resources=["*"],
                conditions={"StringEquals": sagemaker_variants}),
            iam.PolicyStatement(
                sid="DescribeScaling",
                actions=["application-autoscaling:DescribeScalableTargets",
                         "application-autoscaling:DescribeScalingPolicies",
                         "application-autoscaling:DescribeScalingActivities"],
                resources=["*"]),
            iam.PolicyStatement(
                sid="TargetTrackingAlarmsOfOwnEndpoints",
                actions=["cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"],
                resources=[alarms]),
            iam.PolicyStatement(
                # A List action: authorized on '*' only, as AWS's own example policies for
                # Application Auto Scaling grant it (docs/aws-rules.md IAM-1, IAM-5).
                sid="DescribeAlarms",
                actions=["cloudwatch:DescribeAlarms"],
                resources=["*"]),
            iam.PolicyStatement(
                sid="CreateTheSageMakerScalingServiceLinkedRole",
                actions=["iam:CreateServiceLinkedRole"],
                resources=[service_linked_role],
                conditions={"StringLike": {"iam:AWSServiceName": AUTOSCALING_PRINCIPAL}}),
        ], wildcards=("*", f":alarm:TargetTracking-endpoint/{prefix}-*"), wildcard_reason=
           "Scalable targets are identified by generated ids, so Application Auto Scaling's "
           "write actions are limited by condition to SageMaker variants' instance counts; its "
           "Describe* actions and cloudwatch:DescribeAlarms support no resource but '*'; target "
           "tracking names its alarms "
           f"TargetTracking-endpoint/<endpoint>/..., and endpoints start '{prefix}-'.")

    def _grant_idle_alarms(self, training: Training, monitoring: Monitoring) -> None:
        """The launcher's deploy creates a CloudWatch alarm `<endpoint>-idle` that notifies the
        deployment's topic when the endpoint has had no invocations for some hours, and
        delete-endpoint deletes it (docs/aws-rules.md CW-3): alarms named `<prefix>-*` only,
        whose actions are the deployment's topic and nothing else (cloudwatch:AlarmActions,
        CloudWatch user guide, "Using condition keys to limit alarm actions"; the Null guard:
        ForAllValues alone would pass an alarm without actions, as for SM-6).
        cloudwatch:DescribeAlarms, which delete and the endpoint listing read, is granted on '*'
        already (ScaleEndpoints)."""
        prefix = training.job_name_prefix
        alarms = self._stack.format_arn(service="cloudwatch", resource="alarm",
                                        resource_name=f"{prefix}-*",
                                        arn_format=ArnFormat.COLON_RESOURCE_NAME)
        policy(self, "IdleEndpointAlarms", self.role, [
            iam.PolicyStatement(
                sid="IdleAlarmsNotifyTheDeploymentsTopicOnly",
                actions=["cloudwatch:PutMetricAlarm"],
                resources=[alarms],
                conditions={"Null": {"cloudwatch:AlarmActions": "false"},
                            "ForAllValues:StringEquals": {
                                "cloudwatch:AlarmActions": [monitoring.topic_arn]}}),
            iam.PolicyStatement(sid="DeleteIdleAlarms", actions=["cloudwatch:DeleteAlarms"],
                                resources=[alarms]),
        ], wildcards=(f":alarm:{prefix}-*",), wildcard_reason=
           f"Idle alarms are named after the endpoints, made at deploy time and all starting "
           f"'{prefix}-'; their only action is the deployment's notification topic.")

    def _grant_registering(self, registry: ModelRegistry) -> None:
        """The launcher's model registry (notebooks/maskrcnn_launcher/runs/registry.py): versions
        of this deployment's group only, registered pending approval (a registration cannot
        approve itself), then approved or rejected; the group described, its versions listed
        (docs/aws-rules.md REG-2, REG-3, REG-4). Deploying a version is CreateModel, granted
        with the other hosting resources (_grant_deploying); the evaluation report the version
        cites lies under the output prefix, which the role writes already."""
        policy(self, "RegisterModels", self.role, [
            iam.PolicyStatement(
                sid="RegisterVersionsPendingApprovalOnly",
                actions=["sagemaker:CreateModelPackage"],
                resources=[registry.versions_arn],
                conditions={"StringEquals": {
                    "sagemaker:ModelApprovalStatus": model_registry.PENDING}}),
            iam.PolicyStatement(
                sid="ApproveOrRejectVersions",
                actions=["sagemaker:UpdateModelPackage"],
                resources=[registry.versions_arn],
                conditions={"StringEquals": {
                    "sagemaker:ModelApprovalStatus": list(model_registry.DECISIONS)}}),
            iam.PolicyStatement(
                sid="DescribeVersions",
                actions=["sagemaker:DescribeModelPackage"],
                resources=[registry.versions_arn]),
            iam.PolicyStatement(
                sid="DescribeTheGroup",
                actions=["sagemaker:DescribeModelPackageGroup"],
                resources=[registry.group_arn]),
            iam.PolicyStatement(
                # Which resource SageMaker authorizes a list against is not documented (REG-3);
                # AWS's own model-registry policy grants it on '*'. The launcher always filters
                # by this deployment's group.
                sid="ListVersions",
                actions=["sagemaker:ListModelPackages"],
                resources=["*"]),
        ], wildcards=("*", f":model-package/{registry.group_name}/*"), wildcard_reason=
           f"Versions of the group {registry.group_name} are numbered by SageMaker "
           f"(model-package/{registry.group_name}/<version>); sagemaker:ListModelPackages is "
           "read-only and authorized on '*' as AWS's own model registry policy grants it.")

    def _grant_data_access(self, storage: Storage) -> None:
        layout = self.config.bucket
        bucket_prefixes(self, "Data", self.role, storage.data_bucket, storage.data_key,
                        read=[layout.datasets, layout.pretrained, layout.checkpoints],
                        # The SDK uploads job inputs under the output prefix and reads results
                        # back; users upload the images inference.ipynb sends under samples/, and
                        # their labeling tools' exports under imports/ (prepare-data.ipynb).
                        write=[layout.output, layout.samples, layout.imports])
        tasks = [task.attr_task_arn for task in storage.efs.tasks]
        policy(self, "StorageServices", self.role, [
            # Jobs' volumes use the data key: SageMaker creates the grant as the caller.
            iam.PolicyStatement(
                sid="GrantDataKeyToSageMakerJobs",
                actions=["kms:CreateGrant"],
                resources=[storage.data_key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}}),
            iam.PolicyStatement(
                sid="RunS3ToEfsCopy",
                actions=["datasync:StartTaskExecution", "datasync:DescribeTask",
                         "datasync:ListTaskExecutions"],
                resources=tasks),
            iam.PolicyStatement(sid="FollowS3ToEfsCopy", actions=["datasync:DescribeTaskExecution"],
                                resources=[f"{task}/execution/*" for task in tasks]),
            iam.PolicyStatement(
                sid="DescribeAndMountEfsReadOnly",
                # The lifecycle script mounts EFS with TLS and IAM (`-o tls,iam`): ClientMount
                # alone is a read-only mount (EFS user guide, IAM for NFS clients).
                actions=["elasticfilesystem:DescribeFileSystems",
                         "elasticfilesystem:DescribeMountTargets", "elasticfilesystem:ClientMount"],
                resources=[storage.efs.file_system_arn]),
            iam.PolicyStatement(
                sid="DescribeFsxAndItsImports",
                actions=["fsx:DescribeFileSystems", "fsx:DescribeDataRepositoryAssociations",
                         "fsx:DescribeDataRepositoryTasks"],
                resources=["*"]),
        ], wildcards=("*", "/execution/*"), wildcard_reason=
           "Executions of the deployment's DataSync tasks get their ids when started "
           "('execution/*' of each task); the FSx Describe calls that list file systems, "
           "associations and import tasks are authorized on '*' and return metadata only.")
