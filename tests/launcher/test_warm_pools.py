"""Managed warm pools (docs/aws-rules.md TRN-3..TRN-5): the listing of what is kept, ending one
from the command line (the request as sent, evaluated against the notebook role's IAM like every
call of these tests), the refusals that send nothing, the notebook role's cap, and the fake
SageMaker's own refusals (tests/launcher/fake_aws.py stands in for moto, which has no warm pools).

The jobs here have instance counts no other test uses (3 to 7 instances): a warm pool is taken
over by the next job of its shape (fake_aws.py), and these tests' pools must stay theirs."""

import datetime
import json
import re

import pytest
from botocore.exceptions import ClientError

from maskrcnn_launcher.training import warm_pools
from tests.launcher.conftest import JOB_PREFIX, completed_training_job, shared_boto_session
from tests.launcher.cli import cli
from tests.launcher.test_validation import sent

RELEASE = {"KeepAlivePeriodInSeconds": 0}


def _pool_status(fake_aws, job: str) -> dict:
    return fake_aws.client("sagemaker").describe_training_job(
        TrainingJobName=job).get("WarmPoolStatus")


def test_warm_pools_lists_what_is_kept_and_release_ends_it_from_the_command_line(fake_aws):
    """TRN-4: `warm-pools` lists the job whose pool is kept, with its instances and hours;
    `release-warm-pool` sends UpdateTrainingJob with KeepAlivePeriodInSeconds 0 (allowed to the
    notebook role, TRN-5), after which the pool has ended and is no longer listed."""
    job = completed_training_job(fake_aws, run="warm", keep_alive_seconds=3600, instance_count=3)
    fake_aws.backdate(job, 1800)  # kept for half an hour already
    listed = cli(fake_aws, "warm-pools")
    assert listed.returncode == 0, listed.stderr
    pool, = [p for p in json.loads(listed.stdout) if p["job"] == job]
    assert (pool["instance_type"], pool["instance_count"], pool["price_class"]) == \
        ("ml.p4d.24xlarge", 3, "$$$$$")
    assert pool["kept_hours"] == pytest.approx(0.5, abs=0.02)
    assert pool["instance_hours"] == pytest.approx(1.5, abs=0.06)
    assert pool["ends_in_minutes"] == pytest.approx(30, abs=1)
    assert f"{job}: 3 x ml.p4d.24xlarge ($$$$$ per instance-hour) kept 0.5 h" in listed.stderr
    assert f"end it now: python -m maskrcnn_launcher release-warm-pool {job}" in listed.stderr

    before = len(fake_aws.updates_since(0))
    released = cli(fake_aws, "release-warm-pool", job)
    assert released.returncode == 0, released.stderr
    assert fake_aws.updates_since(before) == [{"TrainingJobName": job, "ResourceConfig": RELEASE}]
    assert f"released the warm pool of {job}: 3 x ml.p4d.24xlarge, kept 0.5 h" in released.stderr
    assert _pool_status(fake_aws, job)["Status"] == "Terminated"
    after = cli(fake_aws, "warm-pools")
    assert after.returncode == 0, after.stderr
    assert job not in after.stdout


def _running(fake_aws, job: str) -> str:
    fake_aws.sagemaker_backend().training_jobs[job].training_job_status = "InProgress"
    return job


def _expired(fake_aws, job: str) -> str:
    fake_aws.backdate(job, 3601)
    return job


def _released(fake_aws, job: str) -> str:
    fake_aws.client("sagemaker").update_training_job(TrainingJobName=job, ResourceConfig=RELEASE)
    return job


def _taken_over(fake_aws, job: str) -> str:
    completed_training_job(fake_aws, run="warm-next", instance_count=4)  # the same shape
    return job


@pytest.mark.parametrize("case, make, message", [
    ("unknown", lambda f: f"{JOB_PREFIX}-nothing-20260101000000",
     f"training job '{JOB_PREFIX}-nothing-20260101000000' does not exist in eu-west-2"),
    ("another deployment's", lambda f: "other-warm-20260101000000",
     f"training job 'other-warm-20260101000000' is not this deployment's: its jobs start with "
     f"{JOB_PREFIX}-"),
    ("without a pool", lambda f: completed_training_job(f, run="cold", instance_count=5),
     "has no warm pool: it was launched without a keep-alive"),
    ("running", lambda f: _running(f, completed_training_job(
        f, run="running", keep_alive_seconds=600, instance_count=6)),
     "is InProgress: its warm pool starts when it ends and lasts 600 s; release it then"),
    ("expired", lambda f: _expired(f, completed_training_job(
        f, run="expired", keep_alive_seconds=3600, instance_count=7)),
     "its warm pool is Terminated"),
    ("released already", lambda f: _released(f, completed_training_job(
        f, run="released", keep_alive_seconds=600, instance_count=7)),
     "its warm pool is Terminated"),
    ("taken over", lambda f: _taken_over(f, completed_training_job(
        f, run="taken", keep_alive_seconds=600, instance_count=4)),
     "its warm pool moved to job 'maskrcnn-test-warm-next-"),
])
def test_a_release_that_cannot_work_exits_2_naming_the_job_and_sends_nothing(
        fake_aws, case, make, message):
    """TRN-4: refused before UpdateTrainingJob is sent: another deployment's job (the notebook
    role may not update it, TRN-5), one that does not exist, one still running, one without a
    pool, one whose pool has ended or moved to a later job."""
    job = make(fake_aws)
    before = len(fake_aws.updates_since(0))
    result = cli(fake_aws, "release-warm-pool", job)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert f"error: training job '{job}'" in result.stderr and message in result.stderr
    assert fake_aws.updates_since(before) == []


def test_the_listing_shows_only_the_deployments_live_pools_newest_first(fake_aws, deployment):
    """TRN-4: ListTrainingJobs WarmPoolStatusEquals=Available, each described for its instances;
    another deployment's job whose name merely contains the prefix is left out, so are ended
    pools."""
    client = shared_boto_session().client("sagemaker")
    older = completed_training_job(fake_aws, run="pool-a", keep_alive_seconds=1200,
                                   instance_count=5)
    newer = completed_training_job(fake_aws, run="pool-b", keep_alive_seconds=3600,
                                   instance_count=6)
    ended = _expired(fake_aws, completed_training_job(fake_aws, run="pool-c",
                                                      keep_alive_seconds=60, instance_count=3))
    fake_aws.backdate(older, 900)
    foreign = f"x-{JOB_PREFIX}-pool-20260101000000"
    fake_aws.client("sagemaker").create_training_job(
        **{**_request_of(fake_aws, newer), "TrainingJobName": foreign,
           "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1,
                              "VolumeSizeInGB": 50, "KeepAlivePeriodInSeconds": 600}})
    found = warm_pools.warm_pools(client, deployment)
    names = [p["job"] for p in found]
    assert foreign not in names and ended not in names
    assert names.index(newer) < names.index(older)
    pool = found[names.index(older)]
    assert (pool["instance_count"], pool["keep_alive_seconds"], pool["ends_in_minutes"]) == \
        (5, 1200, 5)
    now = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    line, = [line for line in warm_pools.warm_pool_lines(
        warm_pools.warm_pools(client, deployment, now=now)) if line.startswith(older)]
    # An hour later by the caller's clock: kept 1.25 h, 6.25 instance-hours, nothing left.
    assert re.fullmatch(
        rf"{older}: 5 x ml\.p4d\.24xlarge \(\$\$\$\$\$ per instance-hour\) kept 1\.2[56] h "
        r"\(6\.[23]\d instance-hours\), ends by itself in 0 min of 1200 s keep-alive; end it now: "
        rf"python -m maskrcnn_launcher release-warm-pool {older}", line), line
    for job in (older, newer):
        _released(fake_aws, job)


def _request_of(fake_aws, job: str) -> dict:
    """The CreateTrainingJob request the fake recorded for `job`."""
    return next(r for r in fake_aws.requests_since(0) if r["TrainingJobName"] == job)


def _call(operation: str, params: dict) -> dict:
    """A SageMaker call as the IAM evaluation records one (tests/iam/recorder.py)."""
    return {"service": "sagemaker", "service_name": "sagemaker", "operation": operation,
            "region": "eu-west-2", "params": params, "status": 200, "error_code": None}


def test_the_notebook_role_ends_its_own_warm_pools_only_and_caps_the_keep_alive(
        request, fake_aws, deployment):
    """TRN-5, against the synthesized template's notebook role (tests/iam): UpdateTrainingJob of
    the deployment's jobs with a keep-alive of 0 is allowed; a longer keep-alive, an update
    without one (profiler, remote debugging) or another deployment's job is refused; a launch
    with a keep-alive up to 3600 s, or none, is allowed and one above is refused."""
    from tests.iam.plugin import checker

    check = checker(request)
    own = f"{JOB_PREFIX}-any-20260101000000"
    assert check.denials([_call("UpdateTrainingJob", {"TrainingJobName": own,
                                                      "ResourceConfig": RELEASE})],
                         "notebook") == []
    for params in ({"TrainingJobName": own, "ResourceConfig": {"KeepAlivePeriodInSeconds": 600}},
                   {"TrainingJobName": own, "RemoteDebugConfig": {"EnableRemoteDebug": True}},
                   {"TrainingJobName": "other-any-20260101000000", "ResourceConfig": RELEASE}):
        denial, = check.denials([_call("UpdateTrainingJob", params)], "notebook")
        assert denial.action == "sagemaker:UpdateTrainingJob", denial.text

    launch = json.loads(json.dumps(sent(deployment, data_source="s3"), default=str))
    for keep in (None, 3600):
        params = json.loads(json.dumps(launch))
        if keep is not None:
            params["ResourceConfig"]["KeepAlivePeriodInSeconds"] = keep
        assert check.denials([_call("CreateTrainingJob", params)], "notebook") == [], keep
    launch["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 3601
    denial, = check.denials([_call("CreateTrainingJob", launch)], "notebook")
    assert denial.action == "sagemaker:CreateTrainingJob", denial.text


@pytest.mark.parametrize("case, call, code", [
    ("unknown job", lambda f, job: f.update_training_job(
        TrainingJobName=f"{JOB_PREFIX}-nothing-20260101000000", ResourceConfig=RELEASE),
     "ResourceNotFound"),
    ("no pool", lambda f, job: f.update_training_job(
        TrainingJobName=job["cold"], ResourceConfig=RELEASE), "ValidationException"),
    ("above the limit", lambda f, job: f.update_training_job(
        TrainingJobName=job["warm"], ResourceConfig={"KeepAlivePeriodInSeconds": 3601}),
     "ValidationException"),
    ("not a warm-pool update", lambda f, job: f.update_training_job(
        TrainingJobName=job["warm"], RemoteDebugConfig={"EnableRemoteDebug": True}),
     "ValidationException"),
    ("running", lambda f, job: f.update_training_job(
        TrainingJobName=job["running"], ResourceConfig=RELEASE), "ValidationException"),
    ("launch above the limit", lambda f, job: f.create_training_job(
        **{**job["request"], "TrainingJobName": f"{JOB_PREFIX}-long-20260101000000",
           "ResourceConfig": {**job["request"]["ResourceConfig"],
                              "KeepAlivePeriodInSeconds": 3601}}), "ValidationException"),
    ("launch with spot", lambda f, job: f.create_training_job(
        **{**job["request"], "TrainingJobName": f"{JOB_PREFIX}-spot-20260101000000",
           "EnableManagedSpotTraining": True}), "ValidationException"),
])
def test_the_fake_refuses_what_sagemaker_refuses(fake_aws, case, call, code):
    """The stand-in for moto's missing warm pools is no kinder than SageMaker: an update of a job
    that does not exist, has no pool, is still running, or asks for more than 3600 s or anything
    but the keep-alive; a launch with a keep-alive above 3600 s or with spot."""
    jobs = {"cold": completed_training_job(fake_aws, run="fake-cold", instance_count=5),
            "warm": completed_training_job(fake_aws, run="fake-warm", keep_alive_seconds=600,
                                           instance_count=6)}
    jobs["running"] = _running(fake_aws, completed_training_job(
        fake_aws, run="fake-running", keep_alive_seconds=600, instance_count=7))
    jobs["request"] = _request_of(fake_aws, jobs["warm"])
    with pytest.raises(ClientError) as error:
        call(fake_aws.client("sagemaker"), jobs)
    assert error.value.response["Error"]["Code"] == code
    assert _pool_status(fake_aws, jobs["warm"])["Status"] == "Available"
    _released(fake_aws, jobs["warm"])
