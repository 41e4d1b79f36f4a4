"""Model registry: the deployment's SageMaker model package group, between training and serving.

A finished training job is registered as a version of this group (the launcher's
runs/registry.py: its model.tar.gz, the serving image, its evaluation report as model metrics),
pending approval; only an approved version is deployed. The group's name is the deployment's,
`<deployment name>-models`, published to SSM (`model-package-group`); the notebook role may act on
this group's versions only (stacks/notebook.py, `_grant_registering`).

Retained on `cdk destroy` (docs/operations.md, "What `cdk destroy` keeps, and why"): CloudFormation
deletes a group with DeleteModelPackageGroup alone, which does not delete its versions
(docs/aws-rules.md REG-5), and the versions are the record of which model was approved, by whom,
with what metrics.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from stacks.config import DeploymentConfig

GROUP_SUFFIX = "-models"


def group_name(deployment_name: str) -> str:
    """`<deployment name>-models`: at most 24 + 7 characters, within SageMaker's 63 (REG-1)."""
    return deployment_name + GROUP_SUFFIX


class ModelRegistry(Construct):
    """The model package group, retained."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        self.group_name = group_name(config.deployment_name)
        self.group = sagemaker.CfnModelPackageGroup(
            self, "Group", model_package_group_name=self.group_name,
            model_package_group_description=(
                f"{config.deployment_name}: Mask R-CNN models of this deployment's training "
                "jobs; deploy only an Approved version"))
        self.group.apply_removal_policy(RemovalPolicy.RETAIN)
        stack = Stack.of(self)
        # SageMaker writes the names in its ARNs in lowercase; deployment names are lowercase.
        self.group_arn = stack.format_arn(service="sagemaker", resource="model-package-group",
                                          resource_name=self.group_name)
        # A version's ARN is model-package/<group>/<version> (REG-2).
        self.versions_arn = stack.format_arn(service="sagemaker", resource="model-package",
                                             resource_name=f"{self.group_name}/*")
