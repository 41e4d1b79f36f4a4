"""The deployment: the four stacks wired together, in an App or in a pipeline's Stage."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Stage, Tags
from constructs import Construct

from stacks.config import DeploymentConfig
from stacks.network_stack import NetworkStack
from stacks.notebook_stack import NotebookStack
from stacks.storage_stack import StorageStack
from stacks.training_stack import TrainingStack


@dataclass(frozen=True)
class Deployment:
    network: NetworkStack
    storage: StorageStack
    training: TrainingStack
    notebook: NotebookStack

    @property
    def stacks(self):
        return (self.network, self.storage, self.training, self.notebook)


def add_deployment(scope: Construct, config: DeploymentConfig) -> Deployment:
    """Adds the network, storage, training and notebook stacks of one deployment to `scope`."""
    name = config.deployment_name
    network = NetworkStack(scope, f"{name}-network", stack_name=f"{name}-network", config=config,
                           description=f"{name}: private VPC, endpoints, security groups")
    storage = StorageStack(scope, f"{name}-storage", stack_name=f"{name}-storage", config=config, network=network,
                           description=f"{name}: data bucket, EFS, FSx for Lustre, DataSync")
    training = TrainingStack(scope, f"{name}-training", stack_name=f"{name}-training", config=config,
                             network=network, storage=storage,
                             description=f"{name}: training image, job roles, SSM parameters")
    notebook = NotebookStack(scope, f"{name}-notebook", stack_name=f"{name}-notebook", config=config,
                             network=network, storage=storage,
                             training=training, description=f"{name}: SageMaker notebook instance")
    deployment = Deployment(network, storage, training, notebook)
    for stack in deployment.stacks:
        Tags.of(stack).add("project", "maskrcnn-sagemaker")
        Tags.of(stack).add("deployment", name)
    return deployment


class DeploymentStage(Stage):
    """The deployment as a CDK Pipelines stage."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.deployment = add_deployment(self, config)
