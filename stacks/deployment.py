"""The deployment: one stack composing the deployment's customer managed `Key` and the `Network`,
`Storage`, `Monitoring`, `ModelRegistry`, `ExperimentTracking` (MLflow, when enabled), `Training`
and `Notebook` constructs, in an App or in a pipeline's Stage.

One stack rather than one per concern: values such as file-system ids, subnets and security
groups then pass as plain references, not as CloudFormation exports, which another stack's import
would freeze (CloudFormation refuses to change or delete an export in use). Settings that replace
the VPC, the file systems or the subnets (docs/operations.md, "What a settings change replaces")
therefore deploy like any other change.
"""

from __future__ import annotations

from aws_cdk import Stack, Stage, Tags
from constructs import Construct

from stacks.config import DeploymentConfig
from stacks.experiments import ExperimentTracking
from stacks.key import deployment_key
from stacks.monitoring import Monitoring
from stacks.network import Network
from stacks.notebook import Notebook
from stacks.registry import ModelRegistry
from stacks.storage.storage import Storage
from stacks.training import Training


class DeploymentStack(Stack):
    """Network -> storage -> monitoring -> registry -> (experiment tracking) -> training ->
    notebook, sharing one customer managed key (the notification topic has its own,
    stacks/monitoring.py)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        key = deployment_key(self, "Key", config.deployment_name)
        self.network = Network(self, "Network", config=config, key=key)
        self.storage = Storage(self, "Storage", config=config, network=self.network, key=key)
        self.monitoring = Monitoring(self, "Monitoring", config=config)
        self.registry = ModelRegistry(self, "Registry", config=config)
        self.experiments = (ExperimentTracking(self, "Experiments", config=config,
                                               network=self.network, storage=self.storage)
                            if config.mlflow_enabled else None)
        self.training = Training(self, "Training", config=config, network=self.network,
                                 storage=self.storage, monitoring=self.monitoring,
                                 registry=self.registry, experiments=self.experiments)
        self.notebook = Notebook(self, "Notebook", config=config, network=self.network,
                                 storage=self.storage, training=self.training,
                                 monitoring=self.monitoring, registry=self.registry,
                                 experiments=self.experiments)
        Tags.of(self).add("project", "maskrcnn-sagemaker")
        Tags.of(self).add("deployment", config.deployment_name)


def add_deployment(scope: Construct, config: DeploymentConfig, **kwargs) -> DeploymentStack:
    name = config.deployment_name
    return DeploymentStack(scope, name, stack_name=name, config=config,
                           description=f"{name}: Mask R-CNN training on SageMaker (VPC, data "
                                       "stores, training image and roles, notebook)", **kwargs)


class DeploymentStage(Stage):
    """The deployment as a CDK Pipelines stage."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.deployment = add_deployment(self, config)
