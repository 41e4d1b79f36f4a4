"""Notebook: a SageMaker notebook instance in a private subnet, its lifecycle config and role.

The role launches training jobs into this deployment's VPC with the job roles and reads what a
launcher reads; it cannot create other roles, touch other buckets or start jobs elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from stacks.config import DeploymentConfig
from stacks.nag import acknowledge
from stacks.permissions import bucket_prefixes, log_group_arn, policy
from stacks.network_stack import NetworkStack
from stacks.notebooks_asset import notebooks_asset
from stacks.storage_stack import StorageStack
from stacks.training_stack import TrainingStack

LIFECYCLE_DIR = Path(__file__).resolve().parent / "notebook_lifecycle"
PLATFORM = "notebook-al2023-v1"


class NotebookStack(Stack):
    """Notebook instance, lifecycle config, optional Git repository, and the notebook role."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 network: NetworkStack, storage: StorageStack, training: TrainingStack, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.notebooks = notebooks_asset(self, "Notebooks")
        self.role = iam.Role(
            self, "NotebookRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com",
                                            conditions={"StringEquals": {"aws:SourceAccount": self.account}}),
            description=f"{config.deployment_name}: notebook instance that launches training jobs",
        )
        self._grant_launching(network, training)
        self._grant_data_access(storage)
        own_resources = [iam.PolicyStatement(
            sid="ReadNotebooksAsset",
            actions=["s3:GetObject"],
            resources=[self.notebooks.bucket.arn_for_objects(self.notebooks.s3_object_key)],
        )]

        lifecycle = sagemaker.CfnNotebookInstanceLifecycleConfig(
            self, "Lifecycle",
            notebook_instance_lifecycle_config_name=f"{config.deployment_name}-notebook",
            on_create=[sagemaker.CfnNotebookInstanceLifecycleConfig.NotebookInstanceLifecycleHookProperty(
                content=Fn.base64(self._script("on_create.sh", NOTEBOOKS_S3_URL=self.notebooks.s3_object_url)))],
            on_start=[sagemaker.CfnNotebookInstanceLifecycleConfig.NotebookInstanceLifecycleHookProperty(
                content=Fn.base64(self._script(
                    "on_start.sh",
                    EFS_ID=storage.efs.file_system.file_system_id,
                    FSX_DNS=storage.fsx.file_system.dns_name if storage.fsx else "",
                    FSX_MOUNT_NAME=storage.fsx.file_system.mount_name if storage.fsx else "",
                    SSM_PATH=config.ssm_path,
                )))],
        )
        repository = self._code_repository(config, own_resources)
        policy(self, "NotebookOwnResources", self.role, own_resources)
        self.notebook = sagemaker.CfnNotebookInstance(
            self, "Notebook",
            notebook_instance_name=f"{config.deployment_name}-notebook",
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
        CfnOutput(self, "NotebookInstanceName", value=self.notebook.attr_notebook_instance_name)
        CfnOutput(self, "NotebookUrl", value=(
            f"https://{self.region}.console.aws.amazon.com/sagemaker/home?region={self.region}"
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

    def _code_repository(self, config: DeploymentConfig,
                         statements: list[iam.PolicyStatement]) -> sagemaker.CfnCodeRepository | None:
        if config.git_repository_url is None:
            return None
        secret_arn = config.git_secret_arn
        if secret_arn is None and config.git_username is not None:
            # A correctly formed secret: JSON with the keys SageMaker reads. The password is a
            # placeholder the user replaces with a token (README: "Private Git repository").
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
                        "rotation Lambda; the user rotates it at the Git host and updates the secret.")
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
                repository_url=config.git_repository_url, branch=config.git_branch, secret_arn=secret_arn),
        )

    def _grant_launching(self, network: NetworkStack, training: TrainingStack) -> None:
        jobs = self.format_arn(service="sagemaker", resource="training-job",
                               resource_name=f"{training.job_name_prefix}-*")
        subnets = network.private.subnet_ids
        policy(self, "NotebookLaunchJobs", self.role, [
            iam.PolicyStatement(
                sid="CreateTrainingJobsInTheTrainingVpcOnly",
                actions=["sagemaker:CreateTrainingJob"],
                resources=[jobs],
                conditions={
                    # ForAllValues alone passes when the key is absent: require it too.
                    "Null": {"sagemaker:VpcSubnets": "false", "sagemaker:VpcSecurityGroupIds": "false"},
                    "ForAllValues:StringEquals": {
                        "sagemaker:VpcSubnets": subnets,
                        "sagemaker:VpcSecurityGroupIds": [network.training_sg.security_group_id],
                    },
                }),
            iam.PolicyStatement(
                sid="ManageOwnTrainingJobs",
                actions=["sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob", "sagemaker:AddTags",
                         "sagemaker:ListTags"],
                resources=[jobs]),
            iam.PolicyStatement(sid="ListTrainingJobs", actions=["sagemaker:ListTrainingJobs"], resources=["*"]),
            iam.PolicyStatement(
                sid="PassJobRolesToSageMakerOnly",
                actions=["iam:PassRole"],
                resources=[training.training_role.role_arn, training.staging_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}),
        ], wildcards=("*", f":training-job/{training.job_name_prefix}-*"), wildcard_reason=
           f"Job names are made at launch, all starting '{training.job_name_prefix}-', and jobs "
           "must run in the training subnets and security group; sagemaker:ListTrainingJobs "
           "supports no resource but '*'.")
        policy(self, "NotebookReadParameters", self.role, [iam.PolicyStatement(
            actions=["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath"],
            resources=[
                self.format_arn(service="ssm", resource="parameter", resource_name=self.config.deployment_name),
                self.format_arn(service="ssm", resource="parameter",
                                resource_name=f"{self.config.deployment_name}/*"),
            ])],
            wildcards=(f":parameter/{self.config.deployment_name}/*",), wildcard_reason=
            f"Reads every parameter below this deployment's path {self.config.ssm_path}, "
            "which the training stack publishes for launchers.")
        policy(self, "NotebookLogsAndMetrics", self.role, [
            iam.PolicyStatement(
                sid="FollowJobLogs",
                actions=["logs:DescribeLogStreams", "logs:GetLogEvents", "logs:FilterLogEvents"],
                resources=[log_group_arn(self, "/aws/sagemaker/TrainingJobs")]),
            iam.PolicyStatement(
                sid="NotebookInstanceLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                         "logs:DescribeLogStreams"],
                resources=[log_group_arn(self, "/aws/sagemaker/NotebookInstances")]),
            iam.PolicyStatement(
                sid="ReadJobMetrics",
                actions=["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"],
                resources=["*"]),
        ], wildcards=("*", "/aws/sagemaker/TrainingJobs:*", "/aws/sagemaker/NotebookInstances:*"),
           wildcard_reason="Log streams are one per job host or per lifecycle script (':*' is the streams of "
           "the two named groups); CloudWatch metric reads support no resource but '*'.")

    def _grant_data_access(self, storage: StorageStack) -> None:
        layout = self.config.bucket
        bucket_prefixes(self, "NotebookData", self.role, storage.data_bucket, storage.data_key,
                        read=[layout.data, layout.pretrained, layout.checkpoints],
                        # The SDK uploads job inputs under the output prefix and reads results back.
                        write=[layout.output])
        task = storage.efs.task.attr_task_arn
        policy(self, "NotebookStorageServices", self.role, [
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
                resources=[task]),
            iam.PolicyStatement(sid="FollowS3ToEfsCopy", actions=["datasync:DescribeTaskExecution"],
                                resources=[f"{task}/execution/*"]),
            iam.PolicyStatement(
                sid="DescribeEfs",
                actions=["elasticfilesystem:DescribeFileSystems", "elasticfilesystem:DescribeMountTargets"],
                resources=[storage.efs.file_system_arn]),
            iam.PolicyStatement(
                sid="DescribeFsxAndItsImports",
                actions=["fsx:DescribeFileSystems", "fsx:DescribeDataRepositoryAssociations",
                         "fsx:DescribeDataRepositoryTasks"],
                resources=["*"]),
        ], wildcards=("*", "/execution/*"), wildcard_reason=
           "Executions of the one DataSync task get their ids when started ('execution/*' of "
           "that task); the FSx Describe calls that list file systems, associations and import "
           "tasks are authorized on '*' and return metadata only.")
