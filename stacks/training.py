"""Training: the training-image asset, the job and model roles, and the SSM parameters launchers
read.

Three roles, each with only what its job does:
- the training role reads the datasets and pretrained prefixes and writes outputs and checkpoints
  (whose write includes reading them back: resume, and an earlier run's checkpoints it fine-tunes
  from), and with maskrcnn:mlflow logs its runs to the tracking server (stacks/experiments.py);
- the staging role (the job that downloads COCO 2017 or converts an uploaded export) reads the
  imports prefix and writes the datasets and pretrained prefixes.
Both pull the training image, write their job's logs and metrics, and attach to the VPC.
- the model role hosts a trained model on an endpoint: it reads the output prefix (model.tar.gz),
  writes endpoint data capture only below it, pulls the TensorFlow Serving inference DLC, writes
  its endpoints' logs and metrics, and attaches to the VPC like the jobs.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Annotations, Stack, Token, aws_ssm
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from maskrcnn_contract import ssm

from stacks import dlc
from stacks.config import DeploymentConfig
from stacks.experiments import ExperimentTracking
from stacks.monitoring import Monitoring
from stacks.network import Network
from stacks.outputs import output
from stacks.permissions import bucket_prefixes, log_group_arn, policy
from stacks.registry import ModelRegistry
from stacks.storage.storage import Storage

# The image's build context is the repository root (the image installs contract/ too); the root
# .dockerignore admits only contract/ and training_code/.
REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = "training_code/Dockerfile"
SAGEMAKER = "sagemaker.amazonaws.com"


class Training(Construct):
    """Docker image asset of `training_code/`, job roles, and the deployment's SSM parameters."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 network: Network, storage: Storage, monitoring: Monitoring,
                 registry: ModelRegistry, experiments: ExperimentTracking | None = None) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self._stack = Stack.of(self)
        self.image = ecr_assets.DockerImageAsset(
            self, "TrainingImage",
            directory=str(REPO_ROOT),
            file=DOCKERFILE,
            platform=ecr_assets.Platform.LINUX_AMD64,
            build_args=self._base_image_argument(),
        )
        bucket, key, layout = storage.data_bucket, storage.data_key, config.bucket
        self.job_name_prefix = config.deployment_name

        self.training_role = self._job_role("JobRole", "SageMaker training jobs", network)
        bucket_prefixes(self, "JobRoleData", self.training_role, bucket, key,
                        read=[layout.datasets, layout.pretrained],
                        write=[layout.output, layout.checkpoints])
        self._allow_file_systems(self.training_role, storage)
        if experiments is not None:
            experiments.grant_logging(self, self.training_role)

        self.staging_role = self._job_role("StagingRole", "the dataset staging job", network)
        # The staging job reads the users' exports, writes every dataset, and also uploads the
        # backbone checkpoint to the pretrained prefix.
        bucket_prefixes(self, "StagingRoleData", self.staging_role, bucket, key,
                        read=[layout.imports],
                        write=[layout.datasets, layout.pretrained, layout.output])

        self.dlc = dlc.RegionalRegistry(self, "DlcRegistry")
        self.model_role = self._model_role(network, storage)

        self.parameters = self._publish_parameters(network, storage, monitoring, registry,
                                                   experiments)
        output(self, "ParameterPath", config.ssm_path,
                  description="SSM path holding every value a training-job launcher needs")
        output(self, "TrainingImageUri", self.image.image_uri)

    def _base_image_argument(self) -> dict[str, str]:
        """The region's DLC as BASE_IMAGE. Build arguments cannot be tokens: an app synthesized
        without a region (no CDK_DEFAULT_REGION, no maskrcnn:region) gets none, and the image
        build stops at its FROM line rather than pull another region's image."""
        region = self._stack.region
        if Token.is_unresolved(region):
            Annotations.of(self).add_warning_v2(
                "maskrcnn:training-image-region",
                "The region is unknown at synth, so the training image has no base image: deploy "
                "with the CLI's region (CDK_DEFAULT_REGION) or set maskrcnn:region.")
            return {}
        return {"BASE_IMAGE": dlc.base_image(region)}

    def _job_role(self, construct_id: str, purpose: str, network: Network) -> iam.Role:
        role = iam.Role(
            self, construct_id,
            # Confused-deputy guard: only SageMaker acting for this account and region. (A
            # narrower source ARN such as training-job/<prefix>-* is not documented to hold
            # for SageMaker's own checks of the role at job creation, so it is not used.)
            assumed_by=iam.ServicePrincipal(SAGEMAKER, conditions={
                "StringEquals": {"aws:SourceAccount": self._stack.account},
                "ArnLike": {"aws:SourceArn": f"arn:{self._stack.partition}:sagemaker:"
                                             f"{self._stack.region}:{self._stack.account}:*"},
            }),
            description=f"{self.config.deployment_name}: execution role of {purpose}",
        )
        policy(self, f"{construct_id}ImagePull", role, [
            iam.PolicyStatement(actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                                         "ecr:BatchCheckLayerAvailability"],
                                resources=[self.image.repository.repository_arn]),
            iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]),
        ], "ecr:GetAuthorizationToken supports no resource but '*'; pulls are limited to the "
           "asset repository.")
        policy(self, f"{construct_id}LogsAndMetrics", role, [
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                         "logs:DescribeLogStreams"],
                resources=[log_group_arn(self._stack, "/aws/sagemaker/TrainingJobs")]),
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"], resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}),
        ], wildcards=("*", "/aws/sagemaker/TrainingJobs:*"), wildcard_reason=
           "SageMaker writes one log stream per job host into /aws/sagemaker/TrainingJobs (':*' "
           "is the streams of that one group); cloudwatch:PutMetricData supports no resource but "
           "'*' and is limited to SageMaker's namespaces by condition.")
        self._allow_network_interfaces(f"{construct_id}NetworkInterfaces", role, network)
        return role

    def _allow_network_interfaces(self, construct_id: str, role: iam.Role, network: Network,
                                  extra_describe: tuple[str, ...] = ()) -> None:
        """What SageMaker does as the role to attach a job's or a model's hosts to the VPC: create
        network interfaces in the private subnets with the training group, delete them in this
        VPC, and describe the network (SageMaker developer guide, "CreateTrainingJob API" and
        "CreateModel API: Execution Role Permissions", "If you specify a private VPC")."""
        subnet_arns = [self._stack.format_arn(service="ec2", resource="subnet",
                                              resource_name=s.subnet_id)
                       for s in network.private.subnets]
        sg_arn = self._stack.format_arn(service="ec2", resource="security-group",
                                 resource_name=network.training_sg.security_group_id)
        eni_arns = self._stack.format_arn(service="ec2", resource="network-interface",
                                          resource_name="*")
        vpc_arn = self._stack.format_arn(service="ec2", resource="vpc",
                                         resource_name=network.vpc.vpc_id)
        policy(self, construct_id, role, [
            iam.PolicyStatement(actions=["ec2:CreateNetworkInterface"],
                                resources=[*subnet_arns, sg_arn, eni_arns]),
            iam.PolicyStatement(
                actions=["ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
                         "ec2:DeleteNetworkInterfacePermission"],
                resources=[eni_arns], conditions={"ArnEquals": {"ec2:Vpc": vpc_arn}}),
            iam.PolicyStatement(
                actions=["ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs",
                         "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets",
                         "ec2:DescribeSecurityGroups", *extra_describe],
                resources=["*"]),
        ], wildcards=("*", ":network-interface/*"), wildcard_reason=
           "Network interfaces get their ids when SageMaker creates them: creation is "
           "limited to the training subnets and security group, deletion to this VPC; "
           "ec2:Describe* actions support no resource but '*'.")

    def _model_role(self, network: Network, storage: Storage) -> iam.Role:
        """The execution role of models made from this deployment's training jobs (CreateModel).

        Trust: SageMaker of this account and region, with the aws:SourceArn form the SageMaker
        developer guide gives for inference ("Cross-service confused deputy prevention", SageMaker
        Inference: arn:<partition>:sagemaker:<region>:<account>:*, not narrowed to a model or
        endpoint, and no aws:SourceAccount), docs/aws-rules.md IAM-2."""
        stack, layout, prefix = self._stack, self.config.bucket, self.job_name_prefix
        role = iam.Role(
            self, "ModelRole",
            assumed_by=iam.ServicePrincipal(SAGEMAKER, conditions={
                "ArnLike": {"aws:SourceArn":
                            f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}:*"},
            }),
            description=f"{self.config.deployment_name}: execution role of models hosted on "
                        "endpoints",
        )
        bucket, key = storage.data_bucket, storage.data_key
        # model.tar.gz lies under the output prefix, where the training jobs wrote it; a batch
        # transform reads its images below the samples prefix as this role (BT-1).
        bucket_prefixes(self, "ModelRoleData", role, bucket, key,
                        read=[layout.output, layout.samples])
        capture = layout.output + ssm.DATA_CAPTURE_PREFIX
        policy(self, "ModelRoleDataCapture", role, [
            iam.PolicyStatement(actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                                resources=[bucket.arn_for_objects(capture + "*")]),
            iam.PolicyStatement(actions=["kms:Encrypt", "kms:GenerateDataKey"],
                                resources=[key.key_arn]),
        ], wildcards=(f"/{capture}*",), wildcard_reason=
           f"Endpoint data capture writes objects named at run time under {capture} of the data "
           "bucket, and nowhere else.")
        predictions = layout.output + ssm.PREDICTIONS_PREFIX
        policy(self, "ModelRoleBatchPredictions", role, [
            iam.PolicyStatement(actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                                resources=[bucket.arn_for_objects(predictions + "*")]),
            iam.PolicyStatement(actions=["kms:Encrypt", "kms:GenerateDataKey"],
                                resources=[key.key_arn]),
        ], wildcards=(f"/{predictions}*",), wildcard_reason=
           f"A batch transform writes one answer per image, named at run time, under {predictions} "
           "of the data bucket, and nowhere else (BT-1).")
        policy(self, "ModelRoleImagePull", role, [
            iam.PolicyStatement(actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                                         "ecr:BatchCheckLayerAvailability"],
                                resources=[self.dlc.repository_arn(stack,
                                                                   dlc.INFERENCE_REPOSITORY)]),
            iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]),
        ], "ecr:GetAuthorizationToken supports no resource but '*'; pulls are limited to the "
           "region's TensorFlow inference Deep Learning Container repository.")
        endpoint_logs = log_group_arn(stack, f"/aws/sagemaker/Endpoints/{prefix}-*")
        # Every transform job's streams go to this one group, <job>/<instance>... (BT-1).
        transform_logs = log_group_arn(stack, "/aws/sagemaker/TransformJobs")
        policy(self, "ModelRoleLogsAndMetrics", role, [
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                         "logs:DescribeLogStreams"],
                resources=[endpoint_logs, transform_logs]),
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"], resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}),
        ], wildcards=("*", f"/aws/sagemaker/Endpoints/{prefix}-*:*",
                      "/aws/sagemaker/TransformJobs:*"), wildcard_reason=
           f"SageMaker writes one log group per endpoint, /aws/sagemaker/Endpoints/<endpoint>, "
           f"and endpoint names start with '{prefix}-'; every batch transform's log streams go "
           "to the one group /aws/sagemaker/TransformJobs; cloudwatch:PutMetricData supports no "
           "resource but '*' and is limited to SageMaker's namespaces by condition.")
        # Hosted models in a VPC also describe its endpoints (SageMaker developer guide, "Give
        # SageMaker Hosted Endpoints Access to Resources in Your Amazon VPC").
        self._allow_network_interfaces("ModelRoleNetworkInterfaces", role, network,
                                       extra_describe=("ec2:DescribeVpcEndpoints",))
        return role

    def _allow_file_systems(self, role: iam.Role, storage: Storage) -> None:
        """SageMaker looks up the mount targets of a job's file-system channel as the job role."""
        statements = [iam.PolicyStatement(
            actions=["elasticfilesystem:DescribeMountTargets",
                     "elasticfilesystem:DescribeFileSystems"],
            resources=[storage.efs.file_system_arn])]
        if storage.fsx is not None:
            statements.append(iam.PolicyStatement(
                actions=["fsx:DescribeFileSystems"],
                resources=[self._stack.format_arn(service="fsx", resource="file-system",
                                           resource_name=storage.fsx.file_system.file_system_id)]))
        policy(self, "JobRoleFileSystems", role, statements)

    def _publish_parameters(self, network: Network, storage: Storage,
                            monitoring: Monitoring, registry: ModelRegistry,
                            experiments: ExperimentTracking | None
                            ) -> dict[str, aws_ssm.StringParameter]:
        """Everything a launcher needs, under one path: no stack outputs to copy by hand. The
        names are the contract's (maskrcnn_contract.ssm), which the launcher reads."""
        subnets = network.private.subnet_ids
        layout = self.config.bucket
        values = {
            "region": self._stack.region,
            "job-name-prefix": self.job_name_prefix,
            "data-bucket": storage.data_bucket.bucket_name,
            "datasets-prefix": layout.datasets,
            "imports-prefix": layout.imports,
            "pretrained-prefix": layout.pretrained,
            "output-prefix": layout.output,
            "checkpoint-prefix": layout.checkpoints,
            "samples-prefix": layout.samples,
            "internet-egress": "true" if self.config.nat_gateways else "false",
            "kms-key-arn": storage.data_key.key_arn,
            "efs-id": storage.efs.file_system.file_system_id,
            "efs-datasets-path": self.config.datasets_path,
            "efs-pretrained-path": self.config.pretrained_path,
            "datasync-task-arns": ",".join(task.attr_task_arn for task in storage.efs.tasks),
            "subnet-ids": ",".join(subnets),
            "security-group-ids": network.training_sg.security_group_id,
            "training-role-arn": self.training_role.role_arn,
            "staging-role-arn": self.staging_role.role_arn,
            "training-image-uri": self.image.image_uri,
            "model-role-arn": self.model_role.role_arn,
            "inference-image-gpu-uri": self.dlc.inference_image("gpu"),
            "inference-image-cpu-uri": self.dlc.inference_image("cpu"),
            "notification-topic-arn": monitoring.topic_arn,
            "model-package-group": registry.group_name,
        }
        names: tuple[str, ...] = ssm.REQUIRED
        if storage.fsx is not None:
            names += ssm.FSX
            values.update({
                "fsx-id": storage.fsx.file_system.file_system_id,
                "fsx-mount-name": storage.fsx.file_system.mount_name,
                "fsx-datasets-path": storage.fsx.datasets_path,
                "fsx-pretrained-path": storage.fsx.pretrained_path,
            })
        if experiments is not None:
            names += ssm.MLFLOW
            values["mlflow-tracking-server-arn"] = experiments.server_arn
        extra = set(values) - set(names)
        if extra:
            raise ValueError(f"SSM parameters {sorted(extra)} are not in maskrcnn_contract.ssm")
        parameters = {
            name: aws_ssm.StringParameter(
                self, f"Parameter-{name}",
                parameter_name=ssm.parameter_name(self.config.ssm_path, name),
                string_value=values[name],  # a contract name without a value fails synth here
                description=f"{self.config.deployment_name}: {name} for training-job launchers",
            )
            for name in names
        }
        # The name is a plain string: the parameter is published once the group exists.
        parameters["model-package-group"].node.add_dependency(registry.group)
        if experiments is not None:  # likewise the tracking server's ARN
            parameters["mlflow-tracking-server-arn"].node.add_dependency(experiments.server)
        return parameters

