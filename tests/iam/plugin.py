"""Pytest wiring of the IAM evaluation (imported by tests/conftest.py).

A test marked `iam_role(<role>)` (tests/launcher/conftest.py marks every launcher test
`notebook`; the staging tests are marked `staging`) records the AWS calls its code makes, in
this process and in the subprocesses it starts (tests/iam/recorder.py), and fails when AWS would
refuse one of them to that role under the synthesized template's policies (tests/iam/check.py):
the calls are evaluated after the test's body, so a denial fails the test itself. The values the
deployment publishes come from the fixture `iam_published` (the launcher tests' moto seed; stand-ins
elsewhere); the template is synthesized once per session, when a test first made a call.
"""

from __future__ import annotations

import os
import tempfile
from typing import Dict

import pytest

from tests.iam import deployment as fake
from tests.iam import recorder, template
from tests.iam.check import Checker

MARK = "iam_role"
EXPECTED = "iam_expect_denied"
_RECORDING = pytest.StashKey[dict]()
_CHECKERS: Dict[tuple, Checker] = {}

# Before any test makes a boto3 session. The CDK pipeline's Synth step runs tests/infra in an
# environment of requirements-infra.txt alone, which has no botocore and makes no AWS call; a
# test marked iam_role there fails in _iam_recording instead of passing unrecorded.
try:
    recorder.install()
    _BOTOCORE = True
except ImportError:
    _BOTOCORE = False


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARK}(role): evaluate the AWS calls the test's code "
                                       "makes against that role's policies in the synthesized "
                                       "template (notebook, staging, training, model)")
    config.addinivalue_line("markers", f"{EXPECTED}(action, reason): the test makes a call AWS "
                                       "refuses with that action on purpose; the test fails if "
                                       "it does not")


@pytest.fixture(scope="session")
def iam_template(tmp_path_factory) -> dict:
    """The deployment stack's template of the fake deployment (one synth per session)."""
    return fake.synthesize(tmp_path_factory.mktemp("iam-synth"))


@pytest.fixture
def iam_published():
    """{SSM parameter: value} the deployment publishes, and the VPC, for resolving the template.
    Overridden by tests/launcher/conftest.py with what it seeds into moto."""
    return dict(fake.STAND_INS), fake.STAND_IN_VPC


@pytest.fixture(autouse=True)
def _iam_recording(request):
    marker = request.node.get_closest_marker(MARK)
    if marker is None:
        yield
        return
    if not _BOTOCORE:
        pytest.fail("this test's AWS calls are evaluated against IAM, which needs botocore")
    handle, path = tempfile.mkstemp(prefix="iam-calls-", suffix=".jsonl")
    os.close(handle)
    saved = {name: os.environ.get(name) for name in (recorder.RECORD_ENV, "PYTHONPATH")}
    os.environ[recorder.RECORD_ENV] = path
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(recorder.SITE_DIR), saved["PYTHONPATH"]) if p)
    request.node.stash[_RECORDING] = {"role": marker.args[0], "file": path, "request": request}
    recorder.start()
    try:
        yield
    finally:
        recorder.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        os.remove(path)


def checker(request) -> Checker:
    published, vpc = request.getfixturevalue("iam_published")
    key = (tuple(sorted(published.items())), vpc)
    if key not in _CHECKERS:
        _CHECKERS[key] = Checker(template.load(
            request.getfixturevalue("iam_template"), fake.SSM_PATH, published, fake.REGION,
            fake.ACCOUNT, {"AWS::EC2::VPC": vpc}))
    return _CHECKERS[key]


def denials(item) -> list:
    """The messages of the requests AWS would refuse, but those the test expects (an expected
    refusal that does not come is one too)."""
    recording = item.stash.get(_RECORDING, None)
    if recording is None:
        return []
    calls = recorder.stop() + recorder.read_file(recording["file"])
    recorder.start()  # calls made while the test's fixtures tear down are not evaluated
    expected = {m.args[0]: m.args[1] for m in item.iter_markers(EXPECTED)}
    found = checker(recording["request"]).denials(calls, recording["role"]) if calls else []
    messages = [d.text for d in found if d.action not in expected]
    messages += [f"the test expects AWS to refuse {action} ({reason}), and no request of it "
                 "was refused" for action, reason in expected.items()
                 if not any(d.action == action for d in found)]
    return messages


class IamDenied(AssertionError):
    pass


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        result = yield
    except BaseException as error:
        found = denials(item)
        if found and isinstance(error, Exception):
            error.add_note("AWS would also refuse:\n" + "\n".join(found))
        raise
    found = denials(item)
    if found:
        role = item.stash[_RECORDING]["role"]
        raise IamDenied(f"{len(found)} AWS request(s) the {role} role may not make under the "
                        "synthesized template's policies:\n" + "\n".join(found))
    return result
