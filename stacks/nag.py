"""cdk-nag (3.x) wiring: the AwsSolutions pack and scoped acknowledgments.

Every acknowledgment names one construct, one rule (or one finding of it) and the reason the
finding is accepted. Nothing is acknowledged app-wide.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stage, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def apply_checks(scope: Stage) -> None:
    """Runs the AwsSolutions rules on every stack below `scope` at synth."""
    Validations.of(scope).add_plugins(AwsSolutionsChecks(scope))


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))
