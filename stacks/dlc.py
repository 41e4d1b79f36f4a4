"""The AWS Deep Learning Containers the deployment uses, by region: one place.

The training image starts from the TensorFlow training DLC; trained models are hosted on the
TensorFlow Serving inference DLC. The DLC registries are regional, and most regions share account
763104351884 but some do not; China's registry also has its own domain. Source:
aws/deep-learning-containers, available_images.md, "Region" table and the SageMaker framework
containers tables (docs/aws-rules.md DLC-1, DLC-2).
"""

from __future__ import annotations

from aws_cdk import Aws, CfnCondition, Fn, Stack, Token
from constructs import Construct

REPOSITORY = "tensorflow-training"
# TensorFlow 2.18 SageMaker training image (CUDA 12.5, Python 3.10).
TAG = "2.18.0-gpu-py310-cu125-ubuntu22.04-sagemaker"
INFERENCE_REPOSITORY = "tensorflow-inference"
# TensorFlow 2.18 SageMaker inference images (TensorFlow Serving). Unlike the training image they
# are built on Ubuntu 20.04, and the GPU one on CUDA 12.2: available_images.md, "Prior SageMaker
# Framework Containers", and tensorflow/inference/buildspec-2-18-sm.yml (DLC-2).
INFERENCE_TAGS = {
    "gpu": "2.18.0-gpu-py310-cu122-ubuntu20.04-sagemaker",
    "cpu": "2.18.0-cpu-py310-ubuntu20.04-sagemaker",
}
DEFAULT_ACCOUNT = "763104351884"
ACCOUNTS = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-northeast-3": "364406365360",
    "ap-southeast-3": "907027046896",
    "eu-south-1": "692866216735",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
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
