"""Stack outputs under the plain names users read in `cdk deploy` (no construct-path prefix), and
the AWS console's domain of the partition deployed to, for the links in outputs and messages."""

from __future__ import annotations

from aws_cdk import Aws, CfnMapping, CfnOutput
from constructs import Construct

# The AWS console's domain by partition (links work in aws-cn too).
CONSOLE_DOMAINS = {"aws": "console.aws.amazon.com", "aws-cn": "console.amazonaws.cn",
                   "aws-us-gov": "console.amazonaws-us-gov.com"}


def output(scope: Construct, name: str, value: str, description: str | None = None) -> CfnOutput:
    result = CfnOutput(scope, name, value=value, description=description)
    result.override_logical_id(name)
    return result


def console_domain(scope: Construct, construct_id: str = "ConsoleDomain") -> str:
    """The console's domain in the partition deployed to (a mapping under `scope`)."""
    mapping = CfnMapping(scope, construct_id,
                         mapping={p: {"domain": d} for p, d in CONSOLE_DOMAINS.items()})
    return mapping.find_in_map(Aws.PARTITION, "domain")
