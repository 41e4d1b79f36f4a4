"""Least-privilege policies, one `iam.Policy` per concern.

Each concern that needs a wildcard (object keys under a prefix, job names made at launch, network
interfaces SageMaker creates) gets its own policy construct, and the cdk-nag IAM5 finding is
acknowledged on exactly that construct with the reason. Actions are always spelled out: no
`s3:GetObject*`-style action wildcards that the CDK `grant_*` helpers would add.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import jsii
from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct, IValidation

from stacks.nag import acknowledge

READ_OBJECTS = ["s3:GetObject"]
WRITE_OBJECTS = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                 "s3:ListMultipartUploadParts"]
DECRYPT = ["kms:Decrypt", "kms:DescribeKey"]
ENCRYPT_DECRYPT = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"]


def policy(scope: Construct, construct_id: str, role: iam.IRole,
           statements: Sequence[iam.PolicyStatement], wildcard_reason: str | None = None, *,
           wildcards: Sequence[str] = ("*",)) -> iam.Policy:
    """Attaches one named policy.

    With `wildcard_reason`, the cdk-nag IAM5 findings of this policy whose resource ends with one of
    `wildcards` (e.g. '/jobs/*', or '*' alone) are acknowledged with that reason, one finding at a
    time. Any other wildcard still fails synth.
    """
    attached = iam.Policy(scope, construct_id, statements=list(statements), roles=[role])
    if wildcard_reason is not None:
        attached.node.add_validation(
            _AcknowledgeWildcards(attached, tuple(wildcards), wildcard_reason))
    return attached


@jsii.implements(IValidation)
class _AcknowledgeWildcards:
    """Acknowledges IAM5 findings once cross-stack references are resolved.

    cdk-nag names a finding after the resolved resource (an import's export name, say), which is
    known only at synth. Construct validations run after references are resolved and before
    validation plugins such as cdk-nag, so the acknowledgments are added here.
    """

    def __init__(self, attached: iam.Policy, wildcards: tuple[str, ...], reason: str) -> None:
        self.attached, self.wildcards, self.reason = attached, wildcards, reason

    def validate(self) -> list[str]:
        document = Stack.of(self.attached).resolve(self.attached.document)
        for finding in wildcard_findings(document):
            kind, _, value = finding.partition("::")
            if kind == "Resource" and any(_matches(value, w) for w in self.wildcards):
                acknowledge(self.attached, f"AwsSolutions-IAM5[{finding}]", self.reason)
        return []


@jsii.implements(IValidation)
class _AcknowledgeGeneratedPolicies:
    """Acknowledges the IAM5 findings of policies a library construct generates (CDK Pipelines).

    Each policy below `scope` gets the reason of the first path fragment it contains; a policy no
    fragment names keeps its findings, so a new generated role fails synth until it is reviewed.
    """

    def __init__(self, scope: Construct, reasons: dict[str, str]) -> None:
        self.scope, self.reasons = scope, reasons

    def validate(self) -> list[str]:
        for construct in self.scope.node.find_all():
            if not isinstance(construct, iam.CfnPolicy):
                continue
            reason = next((r for fragment, r in self.reasons.items()
                           if fragment in construct.node.path), None)
            if reason is None:
                continue
            document = Stack.of(construct).resolve(construct.policy_document)
            for finding in wildcard_findings(document):
                acknowledge(construct, f"AwsSolutions-IAM5[{finding}]", reason)
        return []


def acknowledge_generated_policies(scope: Construct, reasons: dict[str, str]) -> None:
    scope.node.add_validation(_AcknowledgeGeneratedPolicies(scope, reasons))


def wildcard_findings(document: dict) -> list[str]:
    """The IAM5 findings cdk-nag reports for a resolved policy document (`Action::x`,
    `Resource::y`)."""
    findings = []
    for statement in document.get("Statement", []):
        if statement.get("Effect") != "Allow":
            continue
        for key in ("Action", "Resource"):
            values = statement.get(key, [])
            for value in values if isinstance(values, list) else [values]:
                flat = flatten_reference(value)
                if "*" in flat and f"{key}::{flat}" not in findings:
                    findings.append(f"{key}::{flat}")
    return findings


def _matches(resource: str, wildcard: str) -> bool:
    """'*' matches only the bare '*'; anything else matches as the resource's ending."""
    return resource == "*" if wildcard == "*" else resource.endswith(wildcard)


def flatten_reference(node: Any) -> str:
    """The string cdk-nag makes of a resource (its utils/flatten-cfn-reference)."""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if "Fn::Join" in node:
        delimiter, items = node["Fn::Join"]
        return delimiter.join(flatten_reference(item) for item in items)
    if "Fn::Sub" in node:
        return flatten_reference(node["Fn::Sub"])
    if "Fn::GetAtt" in node:
        resource, attribute = node["Fn::GetAtt"]
        return f"<{flatten_reference(resource)}.{flatten_reference(attribute)}>"
    if "Fn::ImportValue" in node:
        return flatten_reference(node["Fn::ImportValue"])
    if "Ref" in node:
        return f"<{flatten_reference(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))


def bucket_prefixes(scope: Construct, construct_id: str, role: iam.IRole, bucket: s3.IBucket,
                    key: kms.IKey, *, read: Sequence[str] = (),
                    write: Sequence[str] = ()) -> iam.Policy:
    """Object access limited to key prefixes of one SSE-KMS bucket, plus listing those prefixes."""
    statements = []
    if read:
        statements.append(iam.PolicyStatement(
            actions=READ_OBJECTS, resources=[bucket.arn_for_objects(p + "*") for p in read]))
    if write:
        statements.append(iam.PolicyStatement(
            actions=WRITE_OBJECTS, resources=[bucket.arn_for_objects(p + "*") for p in write]))
    statements.append(iam.PolicyStatement(
        actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
        conditions={"StringLike": {"s3:prefix": [p + "*" for p in (*read, *write)]}}))
    statements.append(iam.PolicyStatement(actions=["s3:GetBucketLocation"],
                                          resources=[bucket.bucket_arn]))
    statements.append(iam.PolicyStatement(actions=ENCRYPT_DECRYPT if write else DECRYPT,
                                          resources=[key.key_arn]))
    prefixes = ", ".join(sorted({*read, *write}))
    return policy(scope, construct_id, role, statements,
                  wildcards=[f"/{p}*" for p in (*read, *write)], wildcard_reason=
                  f"Objects are created at run time under the prefixes {prefixes}; access is "
                  "limited to those prefixes of the one data bucket, with explicit actions.")


def log_group_arn(stack: Stack, group: str) -> str:
    """A log group and all of its streams (`:*`): SageMaker names one stream per job host."""
    return stack.format_arn(service="logs", resource="log-group", resource_name=f"{group}:*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME)
