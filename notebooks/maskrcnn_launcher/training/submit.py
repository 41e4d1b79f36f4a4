"""Sends a launch through the SageMaker SDK, validating the request it actually sends.

The launch's session (`session.sagemaker_session`) carries the check of the outgoing
CreateTrainingJob call; `send` tells it what to expect (the deployment, the job's kind, whether
to stop there) and returns the request as checked.
"""

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.training import session


def send(launch: session.Launch, deployment: Deployment, dry_run: bool = False) -> dict:
    """Starts the job without waiting (or, with `dry_run`, only builds and validates it).
    Returns the CreateTrainingJob request: TrainingJobName is the job's name."""
    check = session.watch(launch.trainer.sagemaker_session.boto_session)
    check.expected, check.request = (deployment, launch.kind, dry_run), None
    try:
        launch.trainer.train(wait=False, logs=False)
    except session.DryRunStop:
        pass
    finally:
        check.expected = None
    if check.request is None:
        raise RuntimeError("the SageMaker SDK did not send CreateTrainingJob through this session")
    return check.request
