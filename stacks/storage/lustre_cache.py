"""FSx for Lustre as a cache of the bucket's input prefixes, the datasets and the pretrained
backbones (one data repository association each)."""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

DEPLOYMENT_TYPES = {
    "PERSISTENT_2": fsx.LustreDeploymentType.PERSISTENT_2,
    "PERSISTENT_1": fsx.LustreDeploymentType.PERSISTENT_1,
    "SCRATCH_2": fsx.LustreDeploymentType.SCRATCH_2,
}
# The service-linked role FSx uses to read and write the linked bucket; one per file system,
# named after its id, so the key policy matches the role path.
FSX_S3_ROLE_PATH = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*"
# The file system's construct id. Earlier deployments linked one dataset, `/datasets/coco2017`, on
# the file system "FileSystem"; an association at `/datasets` overlaps it, which FSx refuses while
# the old one exists, and CloudFormation creates a replacement before it deletes what it replaces
# (docs/aws-rules.md FSX-5, FSX-6). So the associations of every dataset live on a file system of
# another id: an existing deployment gets a new file system, associations and all, in one update,
# and the old one goes with its association afterwards (a cache of S3: nothing is lost).
FILE_SYSTEM_ID = "DatasetsFileSystem"


class LustreCache(Construct):
    """A Lustre 2.15 file system that imports `s3://<bucket>/<datasets_prefix>` (every dataset) at
    `datasets_path` and `s3://<bucket>/<pretrained_prefix>` at `pretrained_path` (two data
    repository associations; the paths must not nest) and keeps importing new, changed and deleted
    objects. Destroyed with the stack: S3 holds the data."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, subnet: ec2.ISubnet,
                 security_group: ec2.ISecurityGroup, bucket: s3.IBucket, key: kms.IKey,
                 datasets_prefix: str, datasets_path: str, pretrained_prefix: str,
                 pretrained_path: str, deployment_type: str, capacity_gib: int,
                 throughput_per_tib: int | None) -> None:
        super().__init__(scope, construct_id)
        self.file_system = fsx.LustreFileSystem(
            self, FILE_SYSTEM_ID,
            vpc=vpc,
            # A Lustre file system lives in one subnet; jobs in the other AZ reach it across AZs.
            vpc_subnet=subnet,
            security_group=security_group,
            storage_capacity_gib=capacity_gib,
            file_system_type_version=fsx.FileSystemTypeVersion.V_2_15,
            # KmsKeyId applies to PERSISTENT_1 and PERSISTENT_2 only; scratch file systems are
            # encrypted with an FSx-managed key (CreateFileSystemLustreConfiguration).
            kms_key=key if deployment_type.startswith("PERSISTENT") else None,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=DEPLOYMENT_TYPES[deployment_type],
                per_unit_storage_throughput=throughput_per_tib,
                data_compression_type=fsx.LustreDataCompressionType.LZ4,
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )
        datasets = self._link("DatasetsRepositoryAssociation", bucket, datasets_prefix,
                              datasets_path)
        pretrained = self._link("PretrainedRepositoryAssociation", bucket, pretrained_prefix,
                                pretrained_path)
        # FSx works on one association request at a time (Rule FSX-5): one after the other.
        pretrained.node.add_dependency(datasets)
        # SageMaker wants an FSx channel's directory path to start with the mount name; a
        # dataset's channel is <datasets_path>/<name>.
        self.datasets_path = f"/{self.file_system.mount_name}{datasets_path}"
        self.pretrained_path = f"/{self.file_system.mount_name}{pretrained_path}"
        # FSx reads the bucket through a service-linked role whose policy lacks our key.
        stack = Stack.of(self)
        key.add_to_resource_policy(iam.PolicyStatement(
            sid="FsxLinkedBucketRead",
            principals=[iam.AnyPrincipal()],
            actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
            resources=["*"],
            conditions={
                "StringEquals": {"aws:PrincipalAccount": stack.account,
                                 # S3's endpoint domain: amazonaws.com, amazonaws.com.cn in China.
                                 "kms:ViaService": f"s3.{stack.region}.{Aws.URL_SUFFIX}"},
                "ArnLike": {"aws:PrincipalArn":
                            f"arn:{stack.partition}:iam::{stack.account}:{FSX_S3_ROLE_PATH}"},
            },
        ))

    def _link(self, construct_id: str, bucket: s3.IBucket, prefix: str,
              path: str) -> fsx.CfnDataRepositoryAssociation:
        """Links `s3://<bucket>/<prefix>` to `path`, importing new, changed and deleted objects."""
        return fsx.CfnDataRepositoryAssociation(
            self, construct_id,
            file_system_id=self.file_system.file_system_id,
            file_system_path=path,
            data_repository_path=bucket.s3_url_for_object(prefix),
            batch_import_meta_data_on_create=True,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                    events=["NEW", "CHANGED", "DELETED"]),
            ),
        )
