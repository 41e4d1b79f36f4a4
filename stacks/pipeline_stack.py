"""Pipeline: CDK Pipelines from a CodeStar connection, deploying the deployment as one Stage.

The synth step installs the pinned CDK CLI (package-lock.json), runs the infrastructure unit
tests, then synthesizes; a red test stops the release. The asset stage logs in to the Deep
Learning Containers registry so the training image, FROM a DLC, can build.
"""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import Duration, Environment, RemovalPolicy, Stack, pipelines
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_codepipeline as codepipeline
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks import dlc
from stacks.config import DeploymentConfig
from stacks.deployment import DeploymentStage
from stacks.permissions import acknowledge_generated_policies

# Why the wildcards in the roles CDK Pipelines generates are accepted, by role (path fragment).
GENERATED_ROLE_REASONS = {
    "/Pipeline/Assets/": (
        "CDK Pipelines' asset publishing roles: read this pipeline's artifacts (object keys are "
        "made per execution), write the logs and reports of their CodeBuild projects (named per "
        "build), and assume only the CDK bootstrap publishing roles."),
    "/UpdatePipeline/SelfMutation/": (
        "CDK Pipelines' self-mutation project: reads this pipeline's artifacts (keys made per "
        "execution), writes its own CodeBuild logs and reports, and assumes only roles tagged as "
        "CDK bootstrap roles (the tag condition limits 'role/*')."),
    "/Build/Synth/": (
        "CDK Pipelines' synth project: reads and writes this pipeline's artifacts (keys made per "
        "execution) with its KMS key, and writes its own CodeBuild logs and reports (named per "
        "build)."),
    "/Pipeline/Source/": (
        "CDK Pipelines' source action: writes the checked-out source into this pipeline's artifact "
        "bucket (keys made per execution) with its KMS key."),
    "/Pipeline/Pipeline/Role/": (
        "The CodePipeline service role: reads and writes this pipeline's artifacts (keys made per "
        "execution) with its KMS key."),
}

# The CLI the synth step runs is the one package.json pins (npm ci): the pipeline's own CLI too.
CDK_CLI_VERSION = json.loads(
    (Path(__file__).resolve().parent.parent / "package.json").read_text()
)["devDependencies"]["aws-cdk"]


class PipelineStack(Stack):
    """A self-mutating CodePipeline (V2) that deploys `DeploymentStage`."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 **kwargs) -> None:
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
                "pip install -r requirements-infra.txt",
            ],
            commands=[
                "python -m pytest -q tests/infra",
                f"npx --no-install cdk synth {context_args}".strip(),
            ],
        )
        dlc_repository = ecr.Repository.from_repository_attributes(
            self, "DeepLearningContainers",
            repository_arn=(f"arn:{self.partition}:ecr:{self.region}:{dlc.account(self.region)}:"
                            f"repository/{dlc.REPOSITORY}"),
            repository_name=dlc.REPOSITORY,
        )
        self.pipeline = pipelines.CodePipeline(
            self, "Pipeline",
            pipeline_name=f"{config.deployment_name}-pipeline",
            pipeline_type=codepipeline.PipelineType.V2,
            synth=synth,
            cli_version=CDK_CLI_VERSION,
            artifact_bucket=self._artifact_bucket(),
            docker_credentials=[pipelines.DockerCredential.ecr(
                [dlc_repository], usages=[pipelines.DockerCredentialUsage.ASSET_PUBLISHING])],
            # The training image pulls a ~10 GB GPU base and compiles Horovod: CodeBuild's default
            # SMALL (3 GB memory, 64 GB disk) is too small; LARGE has 15 GB and 128 GB (CodeBuild
            # user guide, "Build environment compute types"). Not verified by a real build.
            asset_publishing_code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(compute_type=codebuild.ComputeType.LARGE),
                timeout=Duration.hours(2)),
        )
        self.stage = DeploymentStage(self, config.deployment_name, config=config,
                                     env=Environment(region=config.pipeline_region))
        self.pipeline.add_stage(self.stage)
        self.pipeline.build_pipeline()
        acknowledge_generated_policies(self.pipeline, GENERATED_ROLE_REASONS)

    def _artifact_bucket(self) -> s3.Bucket:
        """Artifacts under a customer managed key with rotation, TLS only, access-logged."""
        key = kms.Key(self, "ArtifactKey", enable_key_rotation=True,
                      removal_policy=RemovalPolicy.RETAIN, description="CDK Pipelines artifacts")
        access_logs = s3.Bucket(
            self, "ArtifactAccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        return s3.Bucket(
            self, "Artifacts",
            encryption=s3.BucketEncryption.KMS, encryption_key=key, bucket_key_enabled=True,
            enforce_ssl=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=access_logs, server_access_logs_prefix="artifacts/",
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
            removal_policy=RemovalPolicy.RETAIN,
        )

