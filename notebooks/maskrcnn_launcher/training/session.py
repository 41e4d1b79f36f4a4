"""The SageMaker SDK session a launch goes out through, and the check of what it sends.

One botocore hook on the outgoing CreateTrainingJob call runs `validation.validate` on the exact
request (after the SDK has named the job and filled its defaults): an invalid request raises
there and is never sent. A dry run goes through the same SDK path and stops at the same point,
so what it prints is what a real launch would send. `jobs` builds launches on these sessions,
`submit` sends them: both use this module, neither the other.
"""

import copy
import dataclasses
import os
import weakref
from typing import Optional, Tuple

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.training import validation
from maskrcnn_launcher.training.options import LaunchRequestError
from maskrcnn_launcher.training.plan import LaunchPlan

# The launcher checks the role itself (it must be the deployment's training or staging role).
# The SDK's own check needs iam:SimulatePrincipalPolicy and iam:GetRole, which the notebook role
# does not have (least privilege), so it could only print warnings.
os.environ.setdefault("SAGEMAKER_VALIDATE_ROLE", "false")

# Imported after the line above; the SDK is large (~2 s to import).
from sagemaker.core.helper.session_helper import Session  # noqa: E402
from sagemaker.train import ModelTrainer  # noqa: E402

_EVENT = "provide-client-params.sagemaker.CreateTrainingJob"


@dataclasses.dataclass(frozen=True)
class Launch:
    """A job ready to send: the SDK's trainer, and what the check of its request expects."""

    trainer: ModelTrainer
    kind: str                                 # validation.TRAINING or STAGING
    base_job_name: str                        # the job is named <base_job_name>-<time>
    checkpoint_s3_uri: Optional[str] = None   # shared by every job of the run
    plan: Optional[LaunchPlan] = None         # a training launch's, as resolved


class DryRunStop(Exception):
    """Raised by the check of a dry run after validation, so that nothing is sent."""


class _OutgoingCheck:
    """The hook of one boto3 session. A botocore client copies its session's handlers when it
    is created and the SDK caches its clients per session, so the hook is registered once, before
    the SDK makes any client of that session, and `submit.send` tells it what to expect."""

    def __init__(self):
        self.expected: Optional[Tuple[Deployment, str, bool]] = None
        self.request: Optional[dict] = None

    def __call__(self, params, **_):
        if self.expected is None:
            raise LaunchRequestError("CreateTrainingJob through a launcher session outside "
                                     "submit.send: not validated, not sent")
        deployment, kind, dry_run = self.expected
        validation.validate(params, deployment, kind)
        self.request = copy.deepcopy(params)
        if dry_run:
            raise DryRunStop()


_CHECKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def watch(boto_session) -> _OutgoingCheck:
    """The session's check, registered on first use (`sagemaker_session` calls this before the
    SDK session is made from `boto_session`)."""
    if boto_session not in _CHECKS:
        check = _OutgoingCheck()
        boto_session.events.register(_EVENT, check, unique_id=f"maskrcnn-launcher-{id(check)}")
        _CHECKS[boto_session] = check
    return _CHECKS[boto_session]


def sagemaker_session(boto_session, deployment: Deployment) -> Session:
    """A session whose default bucket is the deployment's: the notebook role may not create the
    SDK's `sagemaker-<region>-<account>` bucket, and nothing should land outside the prefixes.
    The launcher's check of outgoing requests is registered first, before the SDK's clients."""
    watch(boto_session)
    return Session(boto_session=boto_session, default_bucket=deployment.data_bucket,
                   default_bucket_prefix=deployment.output_prefix.rstrip("/"))
