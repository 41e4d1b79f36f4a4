"""Pipeline: V2, tests before synth, pinned CLI, rotated artifact key, DLC registry login."""

import json

from aws_cdk import Stack

from stacks.pipeline_stack import CDK_CLI_VERSION
from tests.infra.templates import of_type

REPO_PACKAGE = "package.json"


def test_pipeline_installs_the_cli_package_json_pins(pipeline_app):
    from tests.infra.conftest import REPO
    pinned = json.loads((REPO / REPO_PACKAGE).read_text())["devDependencies"]["aws-cdk"]
    assert CDK_CLI_VERSION == pinned
    # The self-mutation and asset steps install that CLI.
    text = json.dumps(pipeline_app.raw("-pipeline"))
    assert f"aws-cdk@{pinned}" in text


def test_pipeline_is_v2_from_the_connection(pipeline_app):
    raw = pipeline_app.raw("-pipeline")
    (_, pipeline), = of_type(raw, "AWS::CodePipeline::Pipeline").items()
    props = pipeline["Properties"]
    assert props["PipelineType"] == "V2"
    source = props["Stages"][0]["Actions"][0]
    assert source["ActionTypeId"]["Provider"] == "CodeStarSourceConnection"
    assert source["Configuration"]["FullRepositoryId"] == "acme/maskrcnn-sagemaker"
    assert source["Configuration"]["BranchName"] == "main"


def test_synth_step_installs_pinned_cli_and_runs_unit_tests_before_synth(pipeline_app):
    raw = pipeline_app.raw("-pipeline")
    specs = [json.loads(p["Properties"]["Source"]["BuildSpec"])
             for p in of_type(raw, "AWS::CodeBuild::Project").values()
             if isinstance(p["Properties"]["Source"].get("BuildSpec"), str)
             and "cdk synth" in p["Properties"]["Source"]["BuildSpec"]]
    spec, = specs
    assert spec["phases"]["install"]["commands"] == ["npm ci --no-audit --no-fund",
                                                     "pip install -r requirements-infra.txt"]
    build = spec["phases"]["build"]["commands"]
    tests = build.index("python -m pytest -q tests/infra")
    synth = next(i for i, c in enumerate(build) if c.startswith("npx --no-install cdk synth"))
    assert tests < synth
    assert "maskrcnn:pipeline_enabled=true" in build[synth]


def test_artifacts_use_a_rotating_customer_key_and_access_logs(pipeline_app):
    raw = pipeline_app.raw("-pipeline")
    keys = of_type(raw, "AWS::KMS::Key").values()
    assert keys and all(k["Properties"]["EnableKeyRotation"] for k in keys)
    artifacts = next(b for k, b in of_type(raw, "AWS::S3::Bucket").items() if k.startswith("Artifacts"))
    assert "LoggingConfiguration" in artifacts["Properties"]
    encryption = artifacts["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"


def test_asset_publishing_logs_in_to_the_deep_learning_containers_registry(pipeline_app):
    text = json.dumps(pipeline_app.raw("-pipeline"))
    assert "763104351884.dkr.ecr.us-east-1." in text
    assert "cdk-docker-creds.json" in text


def test_the_stage_deploys_the_deployment_stack_in_the_pipelines_region(pipeline_app):
    assert set(pipeline_app.templates) == {"maskrcnn-pipeline", "maskrcnn"}
    stack = next(c for c in pipeline_app.app.node.find_all()
                 if isinstance(c, Stack) and c.stack_name == "maskrcnn")
    assert stack.region == "us-east-1"
