"""EFS holding copies of the bucket's input prefixes (the datasets, the pretrained backbones), and
one DataSync task per prefix that refreshes its copy."""

from __future__ import annotations

from typing import Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_datasync as datasync
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.permissions import bucket_prefixes

# Who mounts EFS, and how (EFS user guide, "Using IAM to control file system data access"):
# - SageMaker training channels mount it themselves, without IAM, read-only ("ro"): the policy
#   lets any client that comes through a mount target mount (ClientMount) and nothing more; the
#   EFS security group admits only the training, notebook and DataSync groups.
# - DataSync writes with its role and TLS (DataSync user guide, "Accessing restricted file
#   systems": a file system with a policy needs FileSystemAccessRoleArn).
# - The notebook mounts with TLS and IAM, read-only (its role has ClientMount).
WRITER_ACTIONS = ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite",
                  "elasticfilesystem:ClientRootAccess"]


class EfsMirror(Construct):
    """An encrypted, retained EFS (new, or `existing_id` re-attached with mount targets in this
    VPC) and one DataSync task per (prefix, path) of `mirrors`, each mirroring
    `s3://<bucket>/<prefix>` to `path` over TLS, named `<task_name_prefix>-<path as a name>`.
    The paths must not nest: a task removes what its source lacks below its own path.
    An existing file system keeps its own policy: it must allow the same (docs/settings.md)."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc,
                 subnets: Sequence[ec2.ISubnet], security_group: ec2.ISecurityGroup,
                 datasync_security_group: ec2.ISecurityGroup, bucket: s3.IBucket, key: kms.IKey,
                 mirrors: Sequence[tuple[str, str]], task_name_prefix: str,
                 existing_id: str | None) -> None:
        super().__init__(scope, construct_id)
        self._stack = Stack.of(self)
        self.file_system = self._file_system(vpc, subnets, security_group, key, existing_id)
        self.file_system_arn = self._stack.format_arn(
            service="elasticfilesystem", resource="file-system",
            resource_name=self.file_system.file_system_id)
        # In the order of `mirrors`.
        self.tasks = self._datasync_tasks(subnets[0], datasync_security_group, bucket, key,
                                          mirrors, task_name_prefix)

    def _file_system(self, vpc, subnets, security_group, key, existing_id) -> efs.IFileSystem:
        if existing_id is None:
            return efs.FileSystem(
                self, "FileSystem",
                vpc=vpc,
                vpc_subnets=ec2.SubnetSelection(subnets=list(subnets)),
                security_group=security_group,
                encrypted=True,
                kms_key=key,
                performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
                throughput_mode=efs.ThroughputMode.ELASTIC,
                removal_policy=RemovalPolicy.RETAIN,
                # Not CDK's "deny anonymous access" default: it grants only ClientWrite and
                # ClientRootAccess, and without ClientMount no client without IAM (SageMaker's
                # channels) can mount at all. The policy below says who may do what.
                allow_anonymous_access=True,
                file_system_policy=iam.PolicyDocument(statements=[iam.PolicyStatement(
                    sid="MountReadOnlyThroughMountTargets",
                    principals=[iam.AnyPrincipal()],
                    actions=["elasticfilesystem:ClientMount"],
                    conditions={"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}},
                )]),
            )
        # An existing file system, e.g. one kept by an earlier `cdk destroy` with COCO already
        # copied. Its mount targets went with that deployment's VPC; add ours.
        imported = efs.FileSystem.from_file_system_attributes(
            self, "FileSystem", file_system_id=existing_id, security_group=security_group)
        for index, subnet in enumerate(subnets):
            efs.CfnMountTarget(self, f"MountTarget{index}", file_system_id=imported.file_system_id,
                               subnet_id=subnet.subnet_id,
                               security_groups=[security_group.security_group_id])
        return imported

    def _datasync_tasks(self, subnet, security_group, bucket, key, mirrors,
                        task_name_prefix) -> list[datasync.CfnTask]:
        """What the tasks share (the S3 read role, the EFS write role, the log group), then one
        source, destination and task per mirrored prefix."""
        stack = self._stack
        source_role = iam.Role(
            self, "S3ReadRole",
            assumed_by=iam.ServicePrincipal(
                "datasync.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}}),
            description="DataSync reads the mirrored prefixes of the data bucket",
        )
        source_policy = bucket_prefixes(self, "S3Read", source_role, bucket, key,
                                        read=[prefix for prefix, _ in mirrors])
        writer = iam.Role(
            self, "EfsWriteRole",
            assumed_by=iam.ServicePrincipal(
                "datasync.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}}),
            description="DataSync writes the copies of the bucket's prefixes into EFS (TLS, IAM)",
        )
        writer_policy = iam.Policy(self, "EfsWrite", roles=[writer],
                                   statements=[iam.PolicyStatement(
                                       actions=WRITER_ACTIONS, resources=[self.file_system_arn])])
        if isinstance(self.file_system, efs.FileSystem):
            self.file_system.add_to_resource_policy(iam.PolicyStatement(
                sid="DataSyncWritesWithTls",
                principals=[iam.ArnPrincipal(writer.role_arn)],
                actions=WRITER_ACTIONS,
                conditions={"Bool": {"aws:SecureTransport": "true"}},
            ))
        ec2_config = datasync.CfnLocationEFS.Ec2ConfigProperty(
            subnet_arn=stack.format_arn(service="ec2", resource="subnet",
                                        resource_name=subnet.subnet_id),
            security_group_arns=[stack.format_arn(service="ec2", resource="security-group",
                                                  resource_name=security_group.security_group_id)],
        )
        # DataSync mounts through the mount target in that subnet: it must exist first.
        mount_targets = [c for c in self.node.find_all() if isinstance(c, efs.CfnMountTarget)]
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_YEAR,
                                  encryption_key=key, removal_policy=RemovalPolicy.DESTROY)
        logs.ResourcePolicy(self, "LogsPolicy", policy_statements=[iam.PolicyStatement(
            principals=[iam.ServicePrincipal("datasync.amazonaws.com")],
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[log_group.log_group_arn],
            conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
        )])

        tasks = []
        for prefix, path in mirrors:
            name = path.strip("/").replace("/", "-")  # '/data/set' -> 'data-set'
            scope = Construct(self, name)
            source = datasync.CfnLocationS3(
                scope, "Source",
                s3_bucket_arn=bucket.bucket_arn,
                subdirectory="/" + prefix,
                s3_config=datasync.CfnLocationS3.S3ConfigProperty(bucket_access_role_arn=source_role.role_arn),
            )
            source.node.add_dependency(source_policy)
            destination = datasync.CfnLocationEFS(
                scope, "Destination",
                efs_filesystem_arn=self.file_system_arn,
                ec2_config=ec2_config,
                subdirectory=path,
                in_transit_encryption="TLS1_2",
                file_system_access_role_arn=writer.role_arn,
            )
            destination.node.add_dependency(writer_policy, *mount_targets)
            tasks.append(datasync.CfnTask(
                scope, "Task",
                name=f"{task_name_prefix}-{name}",
                source_location_arn=source.attr_location_arn,
                destination_location_arn=destination.attr_location_arn,
                cloud_watch_log_group_arn=log_group.log_group_arn,
                options=datasync.CfnTask.OptionsProperty(
                    # Copy only what changed since the last run; delete what left the prefix, so
                    # EFS mirrors it after every run.
                    transfer_mode="CHANGED",
                    preserve_deleted_files="REMOVE",
                    verify_mode="ONLY_FILES_TRANSFERRED",
                    overwrite_mode="ALWAYS",
                    log_level="BASIC",
                ),
            ))
        return tasks
