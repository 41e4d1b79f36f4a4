"""Storage: the S3 data bucket, EFS, FSx for Lustre linked to the bucket, and the S3 -> EFS copy.

One dataset, three ways to read it. COCO lands once in `s3://<bucket>/<data_prefix>`; FSx sees it
through a data repository association (auto import), EFS gets a DataSync copy. All three use the
same path below their root, `/<data_prefix>`, so a job's channel differs only in its root.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_datasync as datasync
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.config import DeploymentConfig
from stacks.network_stack import NetworkStack
from stacks.permissions import bucket_prefixes

FSX_DEPLOYMENT_TYPE = {
    "PERSISTENT_2": fsx.LustreDeploymentType.PERSISTENT_2,
    "PERSISTENT_1": fsx.LustreDeploymentType.PERSISTENT_1,
    "SCRATCH_2": fsx.LustreDeploymentType.SCRATCH_2,
}
# The service-linked role FSx uses to read and write the linked bucket; one per file system,
# named after its id, so the key policy matches the role path.
FSX_S3_ROLE_PATH = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*"


class StorageStack(Stack):
    """Data bucket + access-log bucket, the KMS key they share, EFS, FSx and the DataSync task."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 network: NetworkStack, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.data_path = "/" + config.data_prefix.rstrip("/")

        self.data_key = kms.Key(
            self, "DataKey",
            description=f"{config.deployment_name}: data bucket, EFS, FSx, notebook and job volumes",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.access_log_bucket = s3.Bucket(
            self, "AccessLogBucket",
            # S3 server access logs can only be delivered to SSE-S3 buckets.
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365),
                                              noncurrent_version_expiration=Duration.days(30))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.data_bucket = s3.Bucket(
            self, "DataBucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.data_key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_log_bucket,
            server_access_logs_prefix="data-bucket/",
            # Re-staging COCO or rewriting checkpoints leaves old versions behind: keep a month.
            lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=Duration.days(30),
                                              abort_incomplete_multipart_upload_after=Duration.days(7))],
            removal_policy=RemovalPolicy.RETAIN,
        )

        CfnOutput(self, "DataBucketName", value=self.data_bucket.bucket_name,
                  description=f"COCO goes to s3://<bucket>/{config.data_prefix}")
        self.file_system = self._efs(config, network)
        self.fsx = self._fsx(config, network) if config.fsx_enabled else None
        self.datasync_task = self._datasync_s3_to_efs(network)

    # EFS ---------------------------------------------------------------------------------------
    def _efs(self, config: DeploymentConfig, network: NetworkStack) -> efs.IFileSystem:
        if config.existing_efs_id is None:
            return efs.FileSystem(
                self, "Efs",
                vpc=network.vpc,
                vpc_subnets=network.private_subnets,
                security_group=network.efs_sg,
                encrypted=True,
                kms_key=self.data_key,
                performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
                throughput_mode=efs.ThroughputMode.ELASTIC,
                removal_policy=RemovalPolicy.RETAIN,
            )
        # An existing file system, e.g. one kept by an earlier `cdk destroy` with COCO already
        # copied. Its mount targets went with that deployment's VPC; add ours.
        imported = efs.FileSystem.from_file_system_attributes(
            self, "Efs", file_system_id=config.existing_efs_id, security_group=network.efs_sg)
        for index, subnet in enumerate(network.private.subnets):
            efs.CfnMountTarget(self, f"EfsMountTarget{index}", file_system_id=imported.file_system_id,
                               subnet_id=subnet.subnet_id,
                               security_groups=[network.efs_sg.security_group_id])
        return imported

    # FSx ---------------------------------------------------------------------------------------
    def _fsx(self, config: DeploymentConfig, network: NetworkStack) -> fsx.LustreFileSystem:
        lustre = fsx.LustreFileSystem(
            self, "Fsx",
            vpc=network.vpc,
            # A Lustre file system lives in one subnet; jobs in the other AZ reach it across AZs.
            vpc_subnet=network.private.subnets[0],
            security_group=network.fsx_sg,
            storage_capacity_gib=config.fsx_storage_capacity_gib,
            file_system_type_version=fsx.FileSystemTypeVersion.V_2_15,
            kms_key=self.data_key,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=FSX_DEPLOYMENT_TYPE[config.fsx_deployment_type],
                per_unit_storage_throughput=config.fsx_throughput,
                data_compression_type=fsx.LustreDataCompressionType.LZ4,
            ),
            # FSx is a cache of the bucket: destroying it loses nothing that S3 does not hold.
            removal_policy=RemovalPolicy.DESTROY,
        )
        association = fsx.CfnDataRepositoryAssociation(
            self, "FsxDataRepositoryAssociation",
            file_system_id=lustre.file_system_id,
            file_system_path=self.data_path,
            data_repository_path=self.data_bucket.s3_url_for_object(config.data_prefix),
            batch_import_meta_data_on_create=True,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                    events=["NEW", "CHANGED", "DELETED"]),
            ),
        )
        # FSx reads the bucket through a service-linked role whose policy lacks our key.
        self.data_key.add_to_resource_policy(iam.PolicyStatement(
            sid="FsxLinkedBucketRead",
            principals=[iam.AnyPrincipal()],
            actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
            resources=["*"],
            conditions={
                "StringEquals": {"aws:PrincipalAccount": self.account,
                                 "kms:ViaService": f"s3.{self.region}.amazonaws.com"},
                "ArnLike": {"aws:PrincipalArn": f"arn:{self.partition}:iam::{self.account}:{FSX_S3_ROLE_PATH}"},
            },
        ))
        return lustre

    # DataSync S3 -> EFS --------------------------------------------------------------------------
    def _datasync_s3_to_efs(self, network: NetworkStack) -> datasync.CfnTask:
        source_role = iam.Role(
            self, "DataSyncS3ReadRole",
            assumed_by=iam.ServicePrincipal("datasync.amazonaws.com",
                                            conditions={"StringEquals": {"aws:SourceAccount": self.account}}),
            description="DataSync reads the COCO prefix of the data bucket",
        )
        source_policy = bucket_prefixes(self, "DataSyncS3Read", source_role, self.data_bucket,
                                        self.data_key, read=[self.config.data_prefix])
        source = datasync.CfnLocationS3(
            self, "DataSyncSource",
            s3_bucket_arn=self.data_bucket.bucket_arn,
            subdirectory=self.data_path + "/",
            s3_config=datasync.CfnLocationS3.S3ConfigProperty(bucket_access_role_arn=source_role.role_arn),
        )
        source.node.add_dependency(source_policy)

        subnet = network.private.subnets[0]
        destination = datasync.CfnLocationEFS(
            self, "DataSyncDestination",
            efs_filesystem_arn=self.efs_file_system_arn,
            ec2_config=datasync.CfnLocationEFS.Ec2ConfigProperty(
                subnet_arn=self.format_arn(service="ec2", resource="subnet", resource_name=subnet.subnet_id),
                security_group_arns=[self.format_arn(service="ec2", resource="security-group",
                                                     resource_name=network.datasync_sg.security_group_id)],
            ),
            subdirectory=self.data_path,
            in_transit_encryption="TLS1_2",
        )
        # DataSync mounts through the mount target in that subnet: it must exist first.
        for child in self.node.find_all():
            if isinstance(child, efs.CfnMountTarget):
                destination.node.add_dependency(child)

        log_group = logs.LogGroup(self, "DataSyncLogs", retention=logs.RetentionDays.ONE_YEAR,
                                  removal_policy=RemovalPolicy.DESTROY)
        logs.ResourcePolicy(self, "DataSyncLogsPolicy", policy_statements=[iam.PolicyStatement(
            principals=[iam.ServicePrincipal("datasync.amazonaws.com")],
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[log_group.log_group_arn],
            conditions={"StringEquals": {"aws:SourceAccount": self.account}},
        )])
        return datasync.CfnTask(
            self, "DataSyncS3ToEfs",
            name=f"{self.config.deployment_name}-s3-to-efs",
            source_location_arn=source.attr_location_arn,
            destination_location_arn=destination.attr_location_arn,
            cloud_watch_log_group_arn=log_group.log_group_arn,
            options=datasync.CfnTask.OptionsProperty(
                # Copy only what changed since the last run; delete what left the bucket, so EFS
                # mirrors the prefix after every run.
                transfer_mode="CHANGED",
                preserve_deleted_files="REMOVE",
                verify_mode="ONLY_FILES_TRANSFERRED",
                overwrite_mode="ALWAYS",
                log_level="BASIC",
            ),
        )

    @property
    def efs_file_system_arn(self) -> str:
        return self.format_arn(service="elasticfilesystem", resource="file-system",
                               resource_name=self.file_system.file_system_id)
