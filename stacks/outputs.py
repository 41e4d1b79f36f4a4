"""Stack outputs under the plain names users read in `cdk deploy` (no construct-path prefix)."""

from __future__ import annotations

from aws_cdk import CfnOutput
from constructs import Construct


def output(scope: Construct, name: str, value: str, description: str | None = None) -> CfnOutput:
    result = CfnOutput(scope, name, value=value, description=description)
    result.override_logical_id(name)
    return result
