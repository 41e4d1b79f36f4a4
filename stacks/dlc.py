"""The AWS Deep Learning Containers the deployment uses, by region: one place.

The training image starts from the TensorFlow training DLC; trained models are hosted on the
TensorFlow Serving inference DLC. The DLC registries are regional, and most regions share account
763104351884 but some do not; China's registry also has its own domain. Sources:
aws/deep-learning-containers, docs/reference/region_availability.md (accounts by region), the
image configurations under .github/config/image/tensorflow/ and docs/src/legacy/legacy_support.yml
(tags and support windows): docs/aws-rules.md DLC-1, DLC-2, DLC-3.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnCondition, Fn, Stack, Token
from constructs import Construct

REPOSITORY = "tensorflow-training"
# TensorFlow 2.21 SageMaker training image: Amazon Linux 2023, Python 3.12, CUDA 12.9; supported
# (patched) from 2026-07-10 to 2027-07-10 (docs/image.md; aws-rules.md DLC-3).
TAG = "2.21.0-gpu-py312-cu129-amzn2023-sagemaker"
INFERENCE_REPOSITORY = "tensorflow-inference"
# TensorFlow Serving 2.20.0 SageMaker inference images: Amazon Linux 2023, Python 3.12, the GPU
# one on CUDA 12.9; supported from 2026-08-20 to 2027-08-20. The newest supported TensorFlow
# inference DLC (there is none of 2.21): it serves the SavedModel the TF 2.21 job exports, which
# tests/training/test_job.py checks on TensorFlow 2.20 (docs/serving.md,
# "The serving image"; aws-rules.md DLC-2).
INFERENCE_TAGS = {
    "gpu": "2.20.0-gpu-py312-cu129-amzn2023-sagemaker",
    "cpu": "2.20.0-cpu-py312-amzn2023-sagemaker",
}
DEFAULT_ACCOUNT = "763104351884"
# Every region whose DLC registry is not in DEFAULT_ACCOUNT (aws/deep-learning-containers,
# docs/reference/region_availability.md, "Deep Learning Containers").
ACCOUNTS = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-east-2": "975050140332",
    "ap-northeast-3": "364406365360",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-6": "633930458069",
    "ap-southeast-7": "590183813437",
    "ca-west-1": "204538143572",
    "eu-central-2": "380420809688",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "il-central-1": "780543022126",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "mx-central-1": "637423239942",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
}


def account(region: str) -> str:
    return ACCOUNTS.get(region, DEFAULT_ACCOUNT)


def registry(region: str) -> str:
    """<account>.dkr.ecr.<region>.amazonaws.com, or .amazonaws.com.cn in China."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account(region)}.dkr.ecr.{region}.{suffix}"


def base_image(region: str) -> str:
    return f"{registry(region)}/{REPOSITORY}:{TAG}"


def inference_image(region: str, device: str) -> str:
    """The TensorFlow Serving inference DLC for `device` ('gpu' or 'cpu') in `region`."""
    return f"{registry(region)}/{INFERENCE_REPOSITORY}:{INFERENCE_TAGS[device]}"


class RegionalRegistry:
    """The DLC registry account and host for the stack's region, as plain strings when the region
    is known at synth, otherwise as CloudFormation expressions of AWS::Region (one condition per
    account other than the default; AWS::URLSuffix is amazonaws.com.cn in China), so an app
    synthesized without a region still deploys the right values in any region."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        stack = Stack.of(scope)
        region = stack.region
        if not Token.is_unresolved(region):
            self.account, self.registry = account(region), registry(region)
            return
        by_account: dict[str, list[str]] = {}
        for name, owner in ACCOUNTS.items():
            by_account.setdefault(owner, []).append(name)
        expression: str = DEFAULT_ACCOUNT
        for owner, regions in reversed(list(by_account.items())):
            equals = [Fn.condition_equals(Aws.REGION, r) for r in regions]
            condition = CfnCondition(
                scope, f"{construct_id}{owner}",
                expression=equals[0] if len(equals) == 1 else Fn.condition_or(*equals))
            expression = Token.as_string(Fn.condition_if(condition.logical_id, owner, expression))
        self.account = expression
        self.registry = f"{expression}.dkr.ecr.{Aws.REGION}.{Aws.URL_SUFFIX}"

    def inference_image(self, device: str) -> str:
        return f"{self.registry}/{INFERENCE_REPOSITORY}:{INFERENCE_TAGS[device]}"

    def repository_arn(self, stack: Stack, repository: str) -> str:
        """The ECR repository ARN of a DLC repository in the region's registry account."""
        return f"arn:{stack.partition}:ecr:{stack.region}:{self.account}:repository/{repository}"
