"""Pytest wiring of the IAM evaluation (imported by tests/conftest.py).

A test marked `iam_role(<role>)` (tests/launcher/conftest.py marks every launcher test
`notebook`; the staging tests are marked `staging`) records the AWS calls its code makes, in
this process and in the subprocesses it starts (tests/iam/recorder.py), and fails when AWS would
refuse one of them to that role under the synthesized template's policies (tests/iam/check.py):
the calls are evaluated after the test's body, so a denial fails the test itself. The values the
deployment publishes come from the fixture `iam_published` (the launcher tests' moto seed; stand-ins
elsewhere); the template is synthesized when a test first needs it and kept in the tests' build
cache (tests/build_cache.py) for every pytest process while what it is made from is unchanged.

A request played on emulated hosts (maskrcnn_local/sagemaker_job.py: the staging request in
tests/training/test_sagemaker_job.py, the training requests of tests/training/playback.py) is
evaluated by `PlayedJob`: the harness adds the recorder to the hosts' environment (the layer of
this machine's settings; nothing else the job sees changes), every process on the hosts records
into a file of the play's work directory, and `PlayedJob.check` evaluates those calls against the
role the request's RoleArn names, raising IamDenied. What SageMaker itself does as that role (the
S3 channels' download, the upload of the model and output) is done by the emulation in the pytest
process and never recorded there: it is evaluated where the launcher's CreateTrainingJob request
is (tests/iam/implied.py, training_job_runs_as_its_role).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import pytest

from tests import build_cache
from tests.iam import deployment as fake
from tests.iam import recorder, template
from tests.iam.check import Checker

MARK = "iam_role"
EXPECTED = "iam_expect_denied"
_RECORDING = pytest.StashKey[dict]()
_CHECKERS: Dict[tuple, Checker] = {}
_TEMPLATE: Dict[str, dict] = {}
# What the synthesized template is made of: the app, its context, the stacks, the contract whose
# names it publishes, what its assets hash (the training image's context, the notebooks), the
# fake deployment's settings, and the CDK libraries.
SYNTHESIZED_FROM = ("app.py", "cdk.json", "stacks", "contract/maskrcnn_contract", "training_code",
                    "horovod", ".dockerignore", "notebooks", "tests/iam/deployment.py")
CDK_PACKAGES = ("aws-cdk-lib", "constructs", "cdk-nag", "jsii")

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


def _template(synth_dir: Callable[[], str]) -> dict:
    """The deployment stack's template of the fake deployment: from the build cache, or
    synthesized into the directory `synth_dir` makes (~15 s of CPU, most of it jsii's Node)."""
    if "stack" not in _TEMPLATE:
        digest = build_cache.key(SYNTHESIZED_FROM, CDK_PACKAGES)
        with build_cache.entry("iam-template", digest) as directory:
            cached = directory / "template.json"
            if not cached.is_file():
                cached.write_text(json.dumps(fake.synthesize(Path(synth_dir()))),
                                  encoding="utf-8")
            _TEMPLATE["stack"] = json.loads(cached.read_text(encoding="utf-8"))
    return _TEMPLATE["stack"]


@pytest.fixture(scope="session")
def iam_template(tmp_path_factory) -> dict:
    """The deployment stack's template of the fake deployment (one synth per session)."""
    return _template(lambda: tmp_path_factory.mktemp("iam-synth"))


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


def _checker(published: Dict[str, str], vpc: str, stack: Callable[[], dict]) -> Checker:
    key = (tuple(sorted(published.items())), vpc)
    if key not in _CHECKERS:
        _CHECKERS[key] = Checker(template.load(stack(), fake.SSM_PATH, published, fake.REGION,
                                               fake.ACCOUNT, {"AWS::EC2::VPC": vpc}))
    return _CHECKERS[key]


def checker(request) -> Checker:
    published, vpc = request.getfixturevalue("iam_published")
    return _checker(published, vpc, lambda: request.getfixturevalue("iam_template"))


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


class PlayedJob:
    """The IAM evaluation of one request played on emulated hosts: the recorder forwarded into
    every process on the hosts, and what they recorded evaluated against the role the request's
    RoleArn names.

        recording = PlayedJob(request, work_dir, fake.iam_published)
        played = sagemaker_job.play(request, work_dir, ...,
                                    environment=recording.environment(this_machines))
        calls = recording.check()  # raises IamDenied

    The hosts reach the recording file because it lies in the play's work directory, which they
    see at the same path (emulated_hosts.Cluster keeps it visible); the site directory is in the
    repository. The hosts' processes are told the file by RECORD_ENV and load the recorder through
    tests/iam/site/sitecustomize.py first on PYTHONPATH, both set in the layer of the container's
    environment that is this machine's (emulated_hosts.Cluster.container_environment), by the
    harness only. The SageMaker training toolkit hands both on: to the program it starts
    (PYTHONPATH becomes its own sys.path, environment.write_env_vars) and, for MPI, to the other
    hosts' ranks (a worker's toolkit writes its environment to /etc/environment, which their ssh
    sessions read).
    """

    FILE = "iam-calls.jsonl"

    def __init__(self, request: dict, work_dir: str,
                 published: Callable[[], Tuple[Dict[str, str], str]]):
        """`published` returns ({SSM parameter: value}, VPC id) of the deployment the request was
        built against (FakeDeployment.iam_published), to which the template is resolved; it is
        called only if the hosts made a call."""
        self.job = request["TrainingJobName"]
        self.role_arn = request["RoleArn"]
        self.published = published
        os.makedirs(work_dir, exist_ok=True)
        self.file = os.path.join(os.path.abspath(work_dir), self.FILE)
        open(self.file, "w", encoding="utf-8").close()  # not a previous play's calls

    def environment(self, environment: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """`environment` (this machine's settings for the hosts) with the recorder added."""
        values = dict(environment or {})
        values[recorder.RECORD_ENV] = self.file
        values["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(recorder.SITE_DIR), values.get("PYTHONPATH")) if p)
        return values

    def calls(self) -> List[dict]:
        """The calls the hosts' processes recorded."""
        return recorder.read_file(self.file)

    def check(self) -> List[dict]:
        """The calls the hosts' processes recorded; raises IamDenied with one message per request
        AWS would refuse to the request's role under the synthesized template's policies."""
        calls = self.calls()
        if not calls:
            return calls
        published, vpc = self.published()

        def stack() -> dict:
            with tempfile.TemporaryDirectory(prefix="iam-synth-") as directory:
                return _template(lambda: directory)

        evaluation = _checker(published, vpc, stack)
        roles = evaluation.deployment.roles
        role = evaluation.deployment.role_by_arn(self.role_arn)
        if role is None:
            raise IamDenied(f"{self.job}: its RoleArn {self.role_arn} is none of the synthesized "
                            "template's roles (" + ", ".join(
                                f"{r.name}: {r.arn}" for r in roles.values()) + ")")
        found = [d.text for d in evaluation.denials(calls, role.name)]
        if found:
            raise IamDenied(f"{len(found)} AWS request(s) that {self.job}'s processes made on its "
                            f"emulated hosts, which the {role.name} role (its RoleArn) may not "
                            "make under the synthesized template's policies:\n"
                            + "\n".join(found))
        return calls


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
