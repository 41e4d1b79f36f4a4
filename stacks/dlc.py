"""The AWS Deep Learning Container the training image starts from, by region: one place.

The DLC registries are regional, and most regions share account 763104351884 but some do not;
China's registry also has its own domain. Source: aws/deep-learning-containers,
available_images.md, "Region" table (docs/aws-rules.md).
"""

from __future__ import annotations

REPOSITORY = "tensorflow-training"
# TensorFlow 2.18 SageMaker training image (CUDA 12.5, Python 3.10).
TAG = "2.18.0-gpu-py310-cu125-ubuntu22.04-sagemaker"
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
