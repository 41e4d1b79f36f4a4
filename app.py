#!/usr/bin/env python3
"""The CDK app: the deployment's stacks, or the pipeline that deploys them.

Settings come from cdk.json context (`maskrcnn:*` keys, see stacks/config.py); nothing here needs
AWS credentials to synthesize.
"""

import os

import aws_cdk as cdk

from stacks.config import DeploymentConfig
from stacks.deployment import add_deployment
from stacks.nag import apply_checks
from stacks.pipeline_stack import PipelineStack


def build_app(app: cdk.App) -> cdk.App:
    # The whole context (cdk.json, then -c): every maskrcnn:* key must be a setting.
    config = DeploymentConfig.from_context(app.node.get_all_context())
    if config.pipeline_enabled:
        PipelineStack(app, f"{config.deployment_name}-pipeline", config=config,
                      env=cdk.Environment(account=config.pipeline_account,
                                          region=config.pipeline_region))
    else:
        # Region only, no account: a region-only environment stays free of synth-time lookups
        # (availability zones), and the training image needs the region (stacks/dlc.py).
        region = config.region or os.environ.get("CDK_DEFAULT_REGION")
        add_deployment(app, config, env=cdk.Environment(region=region) if region else None)
    apply_checks(app)
    return app


if __name__ == "__main__":
    build_app(cdk.App()).synth()
