"""Context validation: bad values fail before synth, naming the key and what is allowed."""

import json

import aws_cdk as cdk
import pytest

from app import build_app
from stacks.config import ConfigError, DeploymentConfig
from tests.paths import REPO



def config(**values):
    return DeploymentConfig.from_mapping(values)


def test_defaults_are_valid_and_deploy_fsx_persistent_2():
    defaults = config()
    assert defaults.fsx_deployment_type == "PERSISTENT_2"
    assert defaults.nat_gateways == 1
    assert defaults.ssm_path == "/maskrcnn"
    assert defaults.max_azs == 2
    assert defaults.fsx_throughput == 250
    assert config(fsx_deployment_type="PERSISTENT_1").fsx_throughput == 200
    assert config(fsx_deployment_type="SCRATCH_2").fsx_throughput is None


@pytest.mark.parametrize("values, key, hint", [
    ({"fsx_storage_capacity_gib": 3600}, "maskrcnn:fsx_storage_capacity_gib", "multiple of 2400"),
    ({"fsx_storage_capacity_gib": 1000}, "maskrcnn:fsx_storage_capacity_gib", "1200, 2400"),
    ({"fsx_deployment_type": "SCRATCH_1"}, "maskrcnn:fsx_deployment_type", "SCRATCH_1 cannot auto-import"),
    ({"fsx_throughput_per_tib": 200}, "maskrcnn:fsx_throughput_per_tib", "[125, 250, 500, 1000]"),
    ({"fsx_deployment_type": "SCRATCH_2", "fsx_throughput_per_tib": 125}, "maskrcnn:fsx_throughput_per_tib",
     "fixed throughput"),
    ({"existing_efs_id": "efs-123"}, "maskrcnn:existing_efs_id", "fs-0123456789abcdef0"),
    ({"existing_efs_id": "fs-XYZ12345"}, "maskrcnn:existing_efs_id", "EFS file system id"),
    ({"pipeline_enabled": True}, "maskrcnn:pipeline_connection_arn", "connection ARN"),
    ({"pipeline_enabled": True, "pipeline_connection_arn": "arn:aws:iam::123456789012:role/x"},
     "maskrcnn:pipeline_connection_arn", "connection ARN"),
    ({"nat_gateways": 3}, "maskrcnn:nat_gateways", "0 (isolated VPC) to 2"),
    ({"availability_zones": ["us-east-1a"]}, "maskrcnn:availability_zones", "2 to 3"),
    ({"availability_zones": ["us-east-1a", "us-east-1a"]}, "maskrcnn:availability_zones", "distinct"),
    ({"availability_zones": ["us-east-1a", "Zone B"]}, "maskrcnn:availability_zones", "'us-east-1a'"),
    ({"vpc_cidr": "10.0.0.0/8"}, "maskrcnn:vpc_cidr", "/16 to /22"),
    ({"vpc_cidr": "10.300.0.0/16"}, "maskrcnn:vpc_cidr", "IPv4 CIDR"),
    ({"deployment_name": "Mask_RCNN"}, "maskrcnn:deployment_name", "lowercase"),
    # Also the isolated VPC's CodeArtifact domain name, which cannot end in '-'.
    ({"deployment_name": "maskrcnn-"}, "maskrcnn:deployment_name", "ending in a letter or a digit"),
    ({"notebook_instance_type": "m5.xlarge"}, "maskrcnn:notebook_instance_type", "ml.t3.large"),
    ({"notebook_volume_gib": 2}, "maskrcnn:notebook_volume_gib", "5 to 16384"),
    ({"datasets_prefix": "datasets"}, "maskrcnn:datasets_prefix", "ending in '/'"),
    ({"git_username": "bot"}, "maskrcnn:git_username", "unless maskrcnn:git_repository_url"),
    ({"git_repository_url": "git@github.com:a/b.git"}, "maskrcnn:git_repository_url", "https://"),
    ({"git_repository_url": "https://github.com/a/b.git", "nat_gateways": 0},
     "maskrcnn:git_repository_url", "an isolated VPC reaches no Git host"),
    ({"flow_log_retention_days": 400}, "maskrcnn:flow_log_retention_days", "one of"),
    ({"git_repository_url": "https://github.com/a/b.git", "git_secret_arn": "arn:aws:s3:::bucket"},
     "maskrcnn:git_secret_arn", "a Secrets Manager secret ARN"),
    ({"git_repository_url": "https://github.com/a/b.git", "git_username": "bot",
      "git_secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:git-AbCdEf"},
     "maskrcnn:git_username", "unset when maskrcnn:git_secret_arn names an existing secret"),
    ({"region": "us-east-1x"}, "maskrcnn:region", "a region name such as 'us-east-1'"),
    ({"notification_email": "ml-team"}, "maskrcnn:notification_email",
     "expected an email address such as 'ml-team@example.com'"),
    ({"notification_email": "ML Team <ml@example.com>"}, "maskrcnn:notification_email",
     "an email address"),
    ({"notification_topic_arn": "arn:aws:sqs:eu-west-1:123456789012:alerts"},
     "maskrcnn:notification_topic_arn", "the ARN of an existing standard SNS topic"),
    ({"notification_topic_arn": "arn:aws:sns:eu-west-1:123456789012:alerts.fifo"},
     "maskrcnn:notification_topic_arn", "not a .fifo topic"),
    # EventBridge delivers to a topic of its own region (docs/aws-rules.md SNS-1).
    ({"region": "eu-west-2", "notification_topic_arn": "arn:aws:sns:eu-west-1:123456789012:alerts"},
     "maskrcnn:notification_topic_arn", "a topic in eu-west-2, the region deployed to"),
])
def test_bad_value_names_key_and_what_is_allowed(values, key, hint):
    with pytest.raises(ConfigError) as error:
        config(**values)
    message = str(error.value)
    assert message.startswith(key + ":"), message
    assert hint in message


def test_pipeline_needs_account_and_region_too():
    base = {"pipeline_enabled": True,
            "pipeline_connection_arn":
                "arn:aws:codestar-connections:eu-west-1:123456789012:connection/12345678-1234-1234-1234-123456789012",
            "pipeline_repository": "acme/repo"}
    with pytest.raises(ConfigError, match="maskrcnn:pipeline_account"):
        config(**base)
    with pytest.raises(ConfigError, match="maskrcnn:pipeline_region"):
        config(**base, pipeline_account="123456789012")
    assert config(**base, pipeline_account="123456789012", pipeline_region="eu-west-1").pipeline_enabled


def test_unknown_key_is_named_with_the_nearest_known_one_and_every_known_one():
    with pytest.raises(ConfigError) as error:
        config(fsx_capacity=1200)
    assert str(error.value).startswith(
        "maskrcnn:fsx_capacity: unknown setting; did you mean maskrcnn:fsx_storage_capacity_gib?\n"
        "known settings: maskrcnn:availability_zones, maskrcnn:datasets_prefix, ")


@pytest.mark.parametrize("context, message", [
    ({"maskrcnn:fsx_capacity": 1200},
     "maskrcnn:fsx_capacity: unknown setting; did you mean maskrcnn:fsx_storage_capacity_gib?"),
    ({"maskrcnn:nat_gateway": "0"}, "maskrcnn:nat_gateway: unknown setting; did you mean maskrcnn:nat_gateways?"),
    ({"maskrcnn:pipeline_repo": "acme/repo"}, "did you mean maskrcnn:pipeline_repository?"),
    # The prefix forgotten or misspelled: as unknown as a misspelled name.
    ({"nat_gateways": "0"}, "nat_gateways: unknown setting; did you mean maskrcnn:nat_gateways?"),
    ({"maskrcnn_fsx_enabled": "false"},
     "maskrcnn_fsx_enabled: unknown setting; did you mean maskrcnn:fsx_enabled?"),
])
def test_a_misspelled_key_fails_the_app_naming_the_nearest_known_one(tmp_path, context, message):
    """`-c maskrcnn:fsx_capacity=1200` as cdk.json or the command line gives it to the app."""
    app = cdk.App(context=context, outdir=str(tmp_path))
    with pytest.raises(ConfigError) as error:
        build_app(app)
    assert message in str(error.value)
    assert app.node.children == []


def test_cdk_jsons_own_context_keys_are_not_settings():
    """cdk.json carries CDK's feature flags (`@aws-cdk/...`) beside the settings."""
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    assert any(key.startswith("@aws-cdk/") for key in context)
    assert DeploymentConfig.from_context(context).fsx_storage_capacity_gib == 1200


URL = {"git_repository_url": "https://github.com/acme/notebooks.git"}
PIPELINE = {"pipeline_enabled": True, "pipeline_repository": "acme/repo",
            "pipeline_connection_arn": "arn:aws:codestar-connections:eu-west-1:123456789012:"
                                       "connection/12345678-1234-1234-1234-123456789012",
            "pipeline_account": "123456789012", "pipeline_region": "eu-west-1"}


@pytest.mark.parametrize("values, key, hint", [
    ({**URL, "git_branch": "feature..x"}, "maskrcnn:git_branch", "a Git branch name"),
    ({**URL, "git_branch": "-main"}, "maskrcnn:git_branch", "a leading '-'"),
    ({**URL, "git_branch": "my branch"}, "maskrcnn:git_branch", "no spaces"),
    ({**URL, "git_branch": "release.lock"}, "maskrcnn:git_branch", "a Git branch name"),
    ({**URL, "git_branch": "topic/"}, "maskrcnn:git_branch", "a Git branch name"),
    # Without a repository it would be ignored.
    ({"git_branch": "dev"}, "maskrcnn:git_branch", "unset unless maskrcnn:git_repository_url is set"),
    # Checked whether or not the pipeline is enabled, so that enabling it meets no bad value.
    ({"pipeline_repository": "not a repo"}, "maskrcnn:pipeline_repository", "'owner/name'"),
    ({"pipeline_repository": "acme/.."}, "maskrcnn:pipeline_repository", "'owner/name'"),
    ({"pipeline_branch": "release 1"}, "maskrcnn:pipeline_branch", "a Git branch name"),
    ({**PIPELINE, "pipeline_branch": "x..y"}, "maskrcnn:pipeline_branch", "a Git branch name"),
    ({"pipeline_account": "12345"}, "maskrcnn:pipeline_account", "12-digit"),
    # With the pipeline, the stage deploys to pipeline_region: another region would be ignored.
    ({**PIPELINE, "region": "us-east-1"}, "maskrcnn:region",
     "unset, or maskrcnn:pipeline_region (eu-west-1)"),
    ({"region": "eu-west-1", "availability_zones": ["us-east-1a", "us-east-1b"]},
     "maskrcnn:availability_zones", "zones of eu-west-1"),
    ({**PIPELINE, "availability_zones": ["us-east-1a", "us-east-1b"]},
     "maskrcnn:availability_zones", "zones of eu-west-1"),
    # Checked with FSx off too, so that turning it on meets no bad value.
    ({"fsx_enabled": False, "fsx_storage_capacity_gib": 1300}, "maskrcnn:fsx_storage_capacity_gib",
     "multiple of 2400"),
])
def test_a_setting_that_would_be_ignored_or_misread_names_key_and_what_is_allowed(values, key, hint):
    with pytest.raises(ConfigError) as error:
        config(**values)
    message = str(error.value)
    assert message.startswith(f"{key}: {values[key.split(':')[1]]!r} is not allowed; expected "), message
    assert hint in message


def test_every_bad_setting_is_named_at_once():
    with pytest.raises(ConfigError) as error:
        config(deployment_name="Mask_RCNN", vpc_cidr="10.0.0.0/8", nat_gateways="one", typo=1)
    lines = str(error.value).splitlines()
    assert [line.split(":")[1] for line in lines[:-1]] == ["deployment_name", "vpc_cidr",
                                                           "nat_gateways", "typo"]
    assert lines[-1].startswith("known settings: maskrcnn:availability_zones, ")


def test_branch_names_git_allows_are_accepted_and_one_it_refuses_is_not():
    assert config(**URL, git_branch="feature/mask-rcnn_2.1").git_branch == "feature/mask-rcnn_2.1"
    assert config(**PIPELINE, region="eu-west-1", pipeline_branch="release/2026.1",
                  availability_zones=["eu-west-1a", "eu-west-1b"]).pipeline_branch == "release/2026.1"
    with pytest.raises(ConfigError, match="maskrcnn:pipeline_branch: 'release/.1' is not allowed"):
        config(**PIPELINE, pipeline_branch="release/.1")


def test_command_line_strings_are_coerced_like_cdk_json_values():
    parsed = config(nat_gateways="0", fsx_enabled="false", availability_zones="us-east-1a,us-east-1b",
                    existing_efs_id="")
    assert parsed.nat_gateways == 0 and parsed.fsx_enabled is False and parsed.existing_efs_id is None
    assert parsed.availability_zones == ("us-east-1a", "us-east-1b")
    with pytest.raises(ConfigError, match="maskrcnn:fsx_enabled: 'yes' is not allowed; use true or false"):
        config(fsx_enabled="yes")
    with pytest.raises(ConfigError, match="maskrcnn:nat_gateways: 'one' is not allowed; use a whole number"):
        config(nat_gateways="one")


def test_context_arguments_rebuild_the_same_config():
    original = config(nat_gateways=2, availability_zones=["us-east-1a", "us-east-1b", "us-east-1c"],
                      fsx_enabled=False, git_repository_url="https://example.com/r.git")
    arguments = original.context_arguments()
    pairs = dict(arg.strip("'").split("=", 1) for arg in arguments[1::2])
    assert set(pairs) == {"maskrcnn:nat_gateways", "maskrcnn:availability_zones", "maskrcnn:fsx_enabled",
                          "maskrcnn:git_repository_url"}
    rebuilt = DeploymentConfig.from_mapping({k.split(":", 1)[1]: v for k, v in pairs.items()})
    assert rebuilt == original


def test_bad_context_fails_the_app_before_any_stack_exists(tmp_path):
    app = cdk.App(context={"maskrcnn:fsx_storage_capacity_gib": 1300}, outdir=str(tmp_path))
    with pytest.raises(ConfigError, match="maskrcnn:fsx_storage_capacity_gib: 1300 is not allowed"):
        build_app(app)
    assert app.node.children == []
