"""cdk-nag gates synth, acknowledgments are scoped and explained, cfn-lint finds no errors."""

import io
import subprocess
import sys

import aws_cdk as cdk
import pytest
from aws_cdk import Stack, Validations
from aws_cdk import aws_iam as iam

from app import build_app
from scripts.summarize_cloud_assembly import summarize
from stacks.config import DeploymentConfig
from stacks.deployment import DeploymentStage
from stacks.nag import apply_checks
from tests.infra.conftest import CDK_JSON_CONTEXT


def add_wildcard_role(stack: Stack) -> None:
    role = iam.Role(stack, "ReviewMe", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    iam.Policy(stack, "ReviewMePolicy", roles=[role],
               statements=[iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"])])


def test_an_unacknowledged_wildcard_fails_synth(tmp_path):
    app = cdk.App(context=CDK_JSON_CONTEXT, outdir=str(tmp_path))
    build_app(app)
    training = next(c for c in app.node.find_all()
                    if isinstance(c, Stack) and c.stack_name == "maskrcnn")
    add_wildcard_role(training)
    with pytest.raises(Exception, match=r"AwsSolutions-IAM5\[Resource::\*\]"):
        app.synth()


def test_checks_registered_on_the_app_cover_a_nested_stage_as_in_the_pipeline(tmp_path):
    app = cdk.App(context=CDK_JSON_CONTEXT, outdir=str(tmp_path))
    stage = DeploymentStage(app, "deploy", config=DeploymentConfig.from_context(app.node.try_get_context))
    apply_checks(app)
    add_wildcard_role(stage.deployment)
    with pytest.raises(Exception, match=r"AwsSolutions-IAM5\[Resource::\*\]"):
        app.synth()


def acknowledgments(app: cdk.App):
    """This project's cdk-nag acknowledgments (CDK records its own template checks there too)."""
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule, reason in entry.data.items():
                    if "AwsSolutions-" in rule:
                        yield construct, rule, reason


@pytest.mark.parametrize("name", ["default_app", "variant_app", "pipeline_app"])
def test_every_acknowledgment_is_on_one_construct_with_a_rule_and_a_reason(request, name):
    app = request.getfixturevalue(name).app
    found = list(acknowledgments(app))
    assert found, "expected the wildcard acknowledgments of the IAM policies"
    for construct, rule, reason in found:
        assert not isinstance(construct, (cdk.App, cdk.Stage, Stack)), (construct.node.path, rule)
        assert "AwsSolutions-" in rule
        assert len(reason) > 40, (construct.node.path, rule, reason)


def test_only_reviewed_rules_are_acknowledged(default_app, variant_app, no_fsx_app):
    rules = {rule.split("::", 1)[-1].split("[")[0] for app in (default_app, variant_app, no_fsx_app)
             for _, rule, _ in acknowledgments(app.app)}
    assert rules == {"AwsSolutions-IAM5", "AwsSolutions-SMG4"}


@pytest.mark.parametrize("name", ["default_app", "variant_app", "pipeline_app"])
def test_cfn_lint_reports_no_errors(request, name):
    outdir = request.getfixturevalue(name).outdir
    templates = sorted(str(p) for p in outdir.rglob("*.template.json"))
    assert len(templates) >= 1
    result = subprocess.run([sys.executable, "-m", "cfnlint", *templates], capture_output=True, text=True)
    # cfn-lint's exit code is a bit field: 2 = errors, 4 = warnings, 8 = informational.
    assert result.returncode & 2 == 0, result.stdout + result.stderr
    assert " E" not in result.stdout


def test_summary_lists_stacks_resources_outputs_and_parameters(default_app):
    out = io.StringIO()
    summarize(default_app.outdir, out=out)
    text = out.getvalue()
    for expected in ("1 stack", "== maskrcnn", "AWS::FSx::FileSystem", "AWS::SageMaker::NotebookInstance",
                     "/maskrcnn/training-role-arn = ", "/maskrcnn/datasets-prefix = datasets/",
                     "ParameterPath = /maskrcnn", "NotebookUrl = "):
        assert expected in text, expected
