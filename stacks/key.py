"""The deployment's customer managed key: bucket, EFS, FSx, notebook volume, job volumes, logs."""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


def deployment_key(scope: Construct, construct_id: str, deployment_name: str) -> kms.Key:
    """A rotating key, retained (it must outlive what it encrypted), that CloudWatch Logs of this
    account and region may use for this account's log groups only."""
    stack = Stack.of(scope)
    key = kms.Key(
        scope, construct_id,
        description=f"{deployment_name}: data bucket, EFS, FSx, notebook and job volumes, logs",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,
    )
    # CloudWatch Logs user guide, "Encrypt log data in CloudWatch Logs using AWS KMS": the
    # regional service principal, scoped by the log group ARN in the encryption context.
    key.add_to_resource_policy(iam.PolicyStatement(
        sid="CloudWatchLogsOfThisAccount",
        principals=[iam.ServicePrincipal(f"logs.{stack.region}.{Aws.URL_SUFFIX}")],
        actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo",
                 "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:DescribeKey"],
        resources=["*"],
        conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn":
                                f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:*"}},
    ))
    return key
