"""Storage: the S3 data bucket, FSx for Lustre linked to the bucket, EFS with its S3 -> EFS copy.

Every dataset, three ways to read it. Each lands once in `s3://<bucket>/<datasets_prefix><name>/`
(COCO 2017 as `coco2017`) and the backbone checkpoints in `s3://<bucket>/pretrained/`; FSx sees
each of the two prefixes through its own data repository association (auto import), EFS gets a
DataSync copy of each (one task per prefix), so a dataset staged later needs no change here. All
three use the same path below their root, `/<prefix>` without its trailing '/' (`/datasets/<name>`,
`/pretrained`), so a job's channel differs only in its root.
"""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from constructs import Construct

from stacks.config import DeploymentConfig
from stacks.network import Network
from stacks.outputs import output
from stacks.storage.data_bucket import DataBucket
from stacks.storage.efs_mirror import EfsMirror
from stacks.storage.lustre_cache import LustreCache


class Storage(Construct):
    """Composes the data bucket, the Lustre cache (unless disabled) and the EFS mirror."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 network: Network, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.data_key = key
        self.data_bucket = DataBucket(self, "Data", key=key).bucket
        output(self, "DataBucketName", self.data_bucket.bucket_name,
                  description=f"Datasets go to s3://<bucket>/{config.datasets_prefix}<name>/")
        subnets = network.private.subnets
        self.fsx = None
        if config.fsx_enabled:
            self.fsx = LustreCache(
                self, "Fsx", vpc=network.vpc, subnet=subnets[0], security_group=network.fsx_sg,
                bucket=self.data_bucket, key=key, datasets_prefix=config.datasets_prefix,
                datasets_path=config.datasets_path, pretrained_prefix=config.bucket.pretrained,
                pretrained_path=config.pretrained_path, deployment_type=config.fsx_deployment_type,
                capacity_gib=config.fsx_storage_capacity_gib,
                throughput_per_tib=config.fsx_throughput)
        self.efs = EfsMirror(
            self, "Efs", vpc=network.vpc, subnets=subnets, security_group=network.efs_sg,
            datasync_security_group=network.datasync_sg, bucket=self.data_bucket,
            key=key, mirrors=config.mirrored_prefixes,
            task_name_prefix=f"{config.deployment_name}-s3-to-efs",
            existing_id=config.existing_efs_id)
