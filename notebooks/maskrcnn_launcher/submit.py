"""Sends a launch through the SageMaker SDK, validating the request it actually sends.

One botocore hook on the outgoing CreateTrainingJob call runs `validation.validate` on the exact
request (after the SDK has named the job and filled its defaults): an invalid request raises
there and is never sent. A dry run goes through the same SDK path and stops at the same point,
so what it prints is what a real launch would send.
"""

import copy
import weakref
from typing import TYPE_CHECKING, Optional, Tuple

from maskrcnn_launcher import validation
from maskrcnn_launcher.options import LaunchRequestError
from maskrcnn_launcher.settings import Deployment

if TYPE_CHECKING:
    from maskrcnn_launcher.jobs import Launch

_EVENT = "provide-client-params.sagemaker.CreateTrainingJob"


class DryRunStop(Exception):
    """Raised by the check of a dry run after validation, so that nothing is sent."""


class _OutgoingCheck:
    """The hook of one boto3 session. A botocore client copies its session's handlers when it
    is created and the SDK caches its clients per session, so the hook is registered once, before
    the SDK makes any client of that session, and `send` tells it what to expect."""

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
    """The session's check, registered on first use (jobs.py calls this before the SDK session
    is made from `boto_session`)."""
    if boto_session not in _CHECKS:
        check = _OutgoingCheck()
        boto_session.events.register(_EVENT, check, unique_id=f"maskrcnn-launcher-{id(check)}")
        _CHECKS[boto_session] = check
    return _CHECKS[boto_session]


def send(launch: "Launch", deployment: Deployment, dry_run: bool = False) -> dict:
    """Starts the job without waiting (or, with `dry_run`, only builds and validates it).
    Returns the CreateTrainingJob request: TrainingJobName is the job's name."""
    check = watch(launch.trainer.sagemaker_session.boto_session)
    check.expected, check.request = (deployment, launch.kind, dry_run), None
    try:
        launch.trainer.train(wait=False, logs=False)
    except DryRunStop:
        pass
    finally:
        check.expected = None
    if check.request is None:
        raise RuntimeError("the SageMaker SDK did not send CreateTrainingJob through this session")
    return check.request
