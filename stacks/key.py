"""The deployment's customer managed keys: the data key (bucket, EFS, FSx, notebook volume, job
volumes, logs) and the notification topic's own key."""

from __future__ import annotations

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
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


def notification_key(scope: Construct, construct_id: str, deployment_name: str) -> kms.Key:
    """The notification topic's own key, rotating; deleted with the stack (after KMS's shortest
    waiting period, 7 days), since it protects no stored data and a kept key bills monthly. Its
    policy is the account's (CDK's default) until the topic's publishers are added to it
    (stacks/monitoring.py, SNS-1 and SNS-2): EventBridge's use of a key cannot be conditioned, so
    it gets a key that encrypts nothing but the topic's messages, and the data key's policy names
    neither EventBridge nor CloudWatch."""
    return kms.Key(
        scope, construct_id,
        description=f"{deployment_name}: the notification topic (job and endpoint messages only)",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.DESTROY,
        pending_window=Duration.days(7),
    )
