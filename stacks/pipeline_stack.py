"""Pipeline: CDK Pipelines from a CodeStar connection, deploying the deployment as one Stage.

The synth step installs the pinned CDK CLI (package-lock.json), runs the infrastructure unit
tests, then synthesizes; a red test stops the release. The asset stage logs in to the Deep
Learning Containers registry so the training image, FROM a DLC, can build.
"""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_codepipeline as codepipeline
from aws_cdk import aws_ecr as ecr
from aws_cdk import pipelines
from constructs import Construct

from stacks.acknowledgments import acknowledge_pipeline_findings
from stacks.config import DeploymentConfig
from stacks.deployment import DeploymentStage

CDK_CLI_VERSION = "2.1148.1"  # keep equal to package.json
DLC_ACCOUNT = "763104351884"  # AWS Deep Learning Containers registry
DLC_REPOSITORY = "tensorflow-training"


class PipelineStack(Stack):
    """A self-mutating CodePipeline (V2) that deploys `DeploymentStage`."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        source = pipelines.CodePipelineSource.connection(
            config.pipeline_repository, config.pipeline_branch,
            connection_arn=config.pipeline_connection_arn,
        )
        # The pipeline's own synth must rebuild this very pipeline and stage: same settings.
        context_args = " ".join(config.context_arguments())
        synth = pipelines.ShellStep(
            "Synth",
            input=source,
            install_commands=[
                "npm ci --no-audit --no-fund",
                "pip install -r requirements.txt pytest==9.2.0",
            ],
            commands=[
                "python -m pytest -q tests/infra",
                f"npx --no-install cdk synth {context_args}".strip(),
            ],
        )
        dlc = ecr.Repository.from_repository_attributes(
            self, "DeepLearningContainers",
            repository_arn=f"arn:{Aws.PARTITION}:ecr:{Aws.REGION}:{DLC_ACCOUNT}:repository/{DLC_REPOSITORY}",
            repository_name=DLC_REPOSITORY,
        )
        self.pipeline = pipelines.CodePipeline(
            self, "Pipeline",
            pipeline_name=f"{config.deployment_name}-pipeline",
            pipeline_type=codepipeline.PipelineType.V2,
            synth=synth,
            cli_version=CDK_CLI_VERSION,
            # A customer managed key for the artifact bucket, rotated yearly.
            cross_account_keys=True,
            enable_key_rotation=True,
            docker_credentials=[pipelines.DockerCredential.ecr([dlc])],
            publish_assets_in_parallel=False,
        )
        self.stage = DeploymentStage(self, config.deployment_name, config=config)
        self.pipeline.add_stage(self.stage)
        self.pipeline.build_pipeline()
        acknowledge_pipeline_findings(self.pipeline)

