"""The model registry against the local AWS, every call evaluated against the notebook role:
a finished job registered as a version pending approval, approved or rejected with a reason, and
only an approved version served. Each refusal names what was refused and leaves nothing behind."""

import hashlib
import json

import pytest

from maskrcnn_launcher.runs import evaluation_report, lookup, registry
from maskrcnn_launcher.serving import endpoint_plan, endpoints
from maskrcnn_launcher.serving.endpoint_plan import DeployOptions, DeployRequestError

from tests.launcher.cli import cli
from tests.launcher.conftest import (BUCKET, INFERENCE_IMAGES, JOB_PREFIX,
                                     completed_training_job, model_key, shared_boto_session)
from tests.launcher.fake_aws import FAKE_REPORT

GROUP = f"{JOB_PREFIX}-models"


def session():
    return shared_boto_session()


def group_versions(fake_aws) -> list:
    """The ARNs of the group's versions, as the tests' own client sees them."""
    pages = fake_aws.client("sagemaker").get_paginator("list_model_packages").paginate(
        ModelPackageGroupName=GROUP)
    return [s["ModelPackageArn"] for page in pages for s in page["ModelPackageSummaryList"]]


def report_keys(fake_aws) -> list:
    listed = fake_aws.client("s3").list_objects_v2(Bucket=BUCKET,
                                                   Prefix="jobs/" + registry.REPORTS_FOLDER)
    return [o["Key"] for o in listed.get("Contents", [])]


def test_register_creates_a_pending_version_of_the_group_citing_the_jobs_report(
        fake_aws, deployment):
    """REG-1, REG-2, REG-6: a version of the deployment's group (ARN model-package/<group>/<n>)
    with the job's model.tar.gz and the region's GPU serving image, the GPU instance types of
    SageMaker's enum, the job's ARN, status PendingManualApproval, no Tags; the report copied
    below the output prefix and cited as ModelQuality statistics with its SHA-256."""
    job = completed_training_job(fake_aws, run="register")
    lines = []
    version = registry.register(deployment, job, session(), echo=lines.append)

    assert version.arn.startswith(
        f"arn:aws:sagemaker:eu-west-2:123456789012:model-package/{GROUP}/")
    assert version.approval == "PendingManualApproval" and version.training_job == job
    assert (version.mask_ap, version.box_ap) == (0.377, 0.412)
    package = fake_aws.client("sagemaker").describe_model_package(ModelPackageName=version.arn)
    assert package["ModelPackageGroupName"] == GROUP
    assert package["ModelApprovalStatus"] == "PendingManualApproval"
    spec = package["InferenceSpecification"]
    assert spec["Containers"] == [{"Image": INFERENCE_IMAGES["gpu"],
                                   "ModelDataUrl": f"s3://{BUCKET}/{model_key(job)}"}]
    assert "ml.g5.xlarge" in spec["SupportedRealtimeInferenceInstanceTypes"]
    assert not any(t.split(".")[1].startswith(("c", "m", "inf"))
                   for t in spec["SupportedRealtimeInferenceInstanceTypes"])
    assert spec["SupportedContentTypes"] == ["image/jpeg", "image/png", "application/json"]
    job_arn = fake_aws.client("sagemaker").describe_training_job(
        TrainingJobName=job)["TrainingJobArn"]
    assert package["MetadataProperties"] == {"GeneratedBy": job_arn}
    statistics = package["ModelMetrics"]["ModelQuality"]["Statistics"]
    key = f"jobs/{registry.REPORTS_FOLDER}{job}/report.json"
    assert statistics["S3Uri"] == f"s3://{BUCKET}/{key}"
    stored = fake_aws.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert json.loads(stored) == FAKE_REPORT
    assert statistics == {"ContentType": "application/json", "S3Uri": f"s3://{BUCKET}/{key}",
                          "ContentDigest": "sha256:" + hashlib.sha256(stored).hexdigest()}
    assert f"approve {version.arn}" in lines[-1]


def test_a_job_without_a_report_is_refused_and_nothing_written_or_created(fake_aws, deployment):
    job = completed_training_job(fake_aws, run="no-report", with_report=False)
    before = group_versions(fake_aws)
    with pytest.raises(evaluation_report.ReportMissingError,
                       match=f"training job '{job}': its model .* holds no evaluation report"):
        registry.register(deployment, job, session())
    assert group_versions(fake_aws) == before
    assert not any(job in key for key in report_keys(fake_aws))


@pytest.mark.parametrize("case, message", [
    ("unknown", "does not exist in eu-west-2"),
    ("other deployment", "is not this deployment's"),
    ("failed", "is Failed: out of memory; only a Completed job has a model"),
    ("registered", "is registered already: arn:aws:sagemaker:"),
])
def test_a_job_that_cannot_be_registered_is_refused_by_name(fake_aws, deployment, case, message):
    job = {"unknown": f"{JOB_PREFIX}-never-ran-20260101120000",
           "other deployment": "someone-else-20260101120000"}.get(case) \
        or completed_training_job(fake_aws, run="refused")
    if case == "failed":
        backend_job = fake_aws.sagemaker_backend().training_jobs[job]
        backend_job.training_job_status, backend_job.failure_reason = "Failed", "out of memory"
    if case == "registered":
        registry.register(deployment, job, session())
    before, reports = group_versions(fake_aws), report_keys(fake_aws)
    with pytest.raises(lookup.RunRequestError, match=message):
        registry.register(deployment, job, session())
    assert group_versions(fake_aws) == before and report_keys(fake_aws) == reports


def test_approve_and_reject_keep_the_reason_and_refuse_what_cannot_be_decided(
        fake_aws, deployment):
    """REG-4: UpdateModelPackage with the decision and the reason as ApprovalDescription;
    refused before anything is sent: no reason, a reason over 1024 characters, another group's
    version, a missing one, the status it has already."""
    arn = registry.register(deployment, completed_training_job(fake_aws, run="decide"),
                            session()).arn
    approved = registry.decide(deployment, arn, registry.APPROVED, "mask AP 0.377 on val",
                               session())
    assert (approved.approval, approved.reason) == ("Approved", "mask AP 0.377 on val")
    number = arn.rpartition("/")[2]
    for bad_arn, bad_reason, message in (
            (arn, " ", "a reason is required"),
            (arn, "x" * 1025, "the reason has 1025 characters; SageMaker keeps at most 1024"),
            (arn.replace(GROUP, "other-models"), "ok",
             f"is not a version of this deployment's model package group {GROUP}"),
            (arn.rpartition("/")[0] + "/999", "ok", "/999 does not exist"),
            ("maskrcnn-test-models", "ok", "is not a model package version ARN"),
            (arn, "again", f"version {number} .* is Approved already")):
        with pytest.raises(registry.RegistryRequestError, match=message):
            registry.decide(deployment, bad_arn, registry.APPROVED, bad_reason, session())
    rejected = registry.decide(deployment, arn, registry.REJECTED, "boxes drift at night",
                               session())
    assert (rejected.approval, rejected.reason) == ("Rejected", "boxes drift at night")


def _serve(deployment, name: str, model_package: str, **options):
    return endpoint_plan.plan(deployment, DeployOptions(
        model_package=model_package, endpoint_name=name, **options), session())


def test_only_an_approved_version_is_served_and_refusals_name_its_status(fake_aws, deployment):
    """REG-4: a pending or rejected version is refused before anything is created, naming its
    status (and the reason it was rejected); an approved one is served as CreateModel from the
    package (PrimaryContainer ModelPackageName, nothing else), its model role evaluated on the
    version's model data and image (tests/iam/implied.py); deleted again afterwards."""
    from tests.launcher.test_deploy import NOTHING, serving_resources

    job = completed_training_job(fake_aws, run="serve-version")
    arn = registry.register(deployment, job, session()).arn
    name = f"{JOB_PREFIX}-endpoint-version"
    before = len(fake_aws.serving_requests_since(0))
    with pytest.raises(DeployRequestError, match=r"is PendingManualApproval: only an Approved "
                                                 r"version is served"):
        _serve(deployment, name, arn)
    registry.decide(deployment, arn, registry.REJECTED, "worse than v1 on bolts", session())
    with pytest.raises(DeployRequestError, match=r"is Rejected \(worse than v1 on bolts\)"):
        _serve(deployment, name, arn)
    with pytest.raises(DeployRequestError, match="serve one or the other"):
        _serve(deployment, name, arn, job_name=job)
    registry.decide(deployment, arn, registry.APPROVED, "better on bolts after all", session())
    with pytest.raises(DeployRequestError, match="version .* holds the TensorFlow Serving GPU"):
        _serve(deployment, name, arn, instance_type="ml.m5.xlarge", require_gpu=False)
    assert fake_aws.serving_requests_since(before) == []
    assert serving_resources(fake_aws, name) == NOTHING

    # moto's CreateEndpointConfig knows no g5 (test_deploy.py serves g4dn and p3 too).
    plan = _serve(deployment, name, arn, instance_type="ml.g4dn.xlarge")
    assert plan.create_model["PrimaryContainer"] == {"ModelPackageName": arn}
    assert (plan.model_package, plan.training_job, plan.image) == \
        (arn, job, INFERENCE_IMAGES["gpu"])
    assert f"model package: {arn} (Approved)" in endpoint_plan.describe_plan(plan)
    result = endpoints.deploy(plan, session(), echo=lambda line: None)
    assert result["model_package"] == arn
    sent = dict(fake_aws.serving_requests_since(before))
    assert sent["CreateModel"]["PrimaryContainer"] == {"ModelPackageName": arn}
    endpoints.delete(deployment, name, session(), echo=lambda line: None)
    assert serving_resources(fake_aws, name) == NOTHING


def test_latest_approved_is_the_newest_approved_version(fake_aws, deployment):
    older = registry.register(deployment, completed_training_job(fake_aws, run="older"),
                              session()).arn
    newer = registry.register(deployment, completed_training_job(fake_aws, run="newer"),
                              session()).arn
    registry.decide(deployment, older, registry.APPROVED, "first", session())
    assert registry.latest_approved(deployment, session().client("sagemaker")) == older
    registry.decide(deployment, newer, registry.APPROVED, "second", session())
    plan = _serve(deployment, f"{JOB_PREFIX}-endpoint-latest", registry.LATEST_APPROVED)
    assert plan.create_model["PrimaryContainer"] == {"ModelPackageName": newer}


def test_versions_show_their_ap_newest_first_and_a_changed_report_is_named(fake_aws, deployment):
    """The AP a version shows is read from the report it cites; a report changed after
    registration (its SHA-256 no longer the version's) shows no AP and says so."""
    first = registry.register(deployment, completed_training_job(fake_aws, run="list-a"),
                              session())
    second = registry.register(deployment, completed_training_job(fake_aws, run="list-b"),
                               session())
    found = registry.versions(deployment, session())
    arns = [v.arn for v in found]
    assert arns.index(second.arn) < arns.index(first.arn)
    shown = {v.arn: v for v in found}
    assert (shown[second.arn].mask_ap, shown[second.arn].box_ap) == (0.377, 0.412)
    lines = registry.version_lines(found)
    assert any(f"mask AP 0.377  box AP 0.412  {second.training_job}" in line
               and second.arn in line for line in lines)

    key = f"jobs/{registry.REPORTS_FOLDER}{second.training_job}/report.json"
    fake_aws.client("s3").put_object(Bucket=BUCKET, Key=key, Body=b'{"tampered": true}')
    again = {v.arn: v for v in registry.versions(deployment, session())}[second.arn]
    assert again.mask_ap is None and "changed since registration" in again.problem


def _call(operation: str, **params) -> dict:
    """A call as the IAM evaluation records one (tests/iam/recorder.py)."""
    return {"service": "sagemaker", "service_name": "sagemaker", "operation": operation,
            "region": "eu-west-2", "params": params, "status": 200, "error_code": None}


def test_the_notebook_role_registers_pending_versions_of_its_group_and_decides_on_them_only(
        request):
    """REG-2, REG-4 against the synthesized template's notebook role (tests/iam): registering
    into the deployment's group pending approval is allowed; registering approved (skipping the
    review), into another group, an update to another status or another group's version, is
    refused."""
    from tests.iam.deployment import ACCOUNT, DEPLOYMENT_NAME, REGION
    from tests.iam.plugin import checker

    check = checker(request)
    group = f"{DEPLOYMENT_NAME}-models"
    version = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/{group}/3"
    allowed = [_call("CreateModelPackage", ModelPackageGroupName=group,
                     ModelApprovalStatus="PendingManualApproval"),
               _call("UpdateModelPackage", ModelPackageArn=version, ModelApprovalStatus="Approved"),
               _call("UpdateModelPackage", ModelPackageArn=version, ModelApprovalStatus="Rejected"),
               _call("DescribeModelPackage", ModelPackageName=version),
               _call("DescribeModelPackageGroup", ModelPackageGroupName=group)]
    assert check.denials(allowed, "notebook") == []
    for call in (_call("CreateModelPackage", ModelPackageGroupName=group,
                       ModelApprovalStatus="Approved"),
                 _call("CreateModelPackage", ModelPackageGroupName="other-models",
                       ModelApprovalStatus="PendingManualApproval"),
                 _call("UpdateModelPackage", ModelPackageArn=version,
                       ModelApprovalStatus="PendingManualApproval"),
                 _call("UpdateModelPackage", ModelPackageArn=version.replace(group, "other-models"),
                       ModelApprovalStatus="Approved"),
                 _call("DescribeModelPackage",
                       ModelPackageName=version.replace(group, "other-models"))):
        denial, = check.denials([call], "notebook")
        assert denial.action == f"sagemaker:{call['operation']}", denial.text


def test_the_fake_refuses_what_sagemaker_refuses(fake_aws, deployment):
    """The fake is no kinder than SageMaker (REG-1, REG-4): Tags on a version, an instance type
    outside SageMaker's enum, a model from a version that is not Approved."""
    sm = fake_aws.client("sagemaker")
    spec = {"Containers": [{"Image": INFERENCE_IMAGES["gpu"],
                            "ModelDataUrl": f"s3://{BUCKET}/jobs/x/output/model.tar.gz"}]}
    with pytest.raises(sm.exceptions.ClientError, match="Tags cannot be given"):
        sm.create_model_package(ModelPackageGroupName=GROUP, InferenceSpecification=spec,
                                Tags=[{"Key": "team", "Value": "vision"}])
    with pytest.raises(sm.exceptions.ClientError, match="ml.g5.huge"):
        sm.create_model_package(ModelPackageGroupName=GROUP, InferenceSpecification=dict(
            spec, SupportedRealtimeInferenceInstanceTypes=["ml.g5.huge"]))
    arn = sm.create_model_package(ModelPackageGroupName=GROUP, InferenceSpecification=spec,
                                  ModelApprovalStatus="PendingManualApproval")["ModelPackageArn"]
    with pytest.raises(sm.exceptions.ClientError, match="is PendingManualApproval"):
        sm.create_model(ModelName=f"{JOB_PREFIX}-fake-check",
                        ExecutionRoleArn=fake_aws.parameters["model-role-arn"],
                        PrimaryContainer={"ModelPackageName": arn})
    summary, = [s for s in sm.list_model_packages(ModelPackageGroupName=GROUP)[
        "ModelPackageSummaryList"] if s["ModelPackageArn"] == arn]
    assert "InferenceSpecification" not in summary and summary["ModelPackageVersion"] >= 1



def test_register_approve_models_and_deploy_from_the_command_line(fake_aws):
    """The commands a team runs: register, approve (a missing reason exits 2 before anything is
    sent), models, deploy --model-package (an unapproved version exits 2 naming its status)."""
    job = completed_training_job(fake_aws, run="cli-registry")
    registered = cli(fake_aws, "register", job)
    assert registered.returncode == 0, registered.stderr
    arn = json.loads(registered.stdout)[0]["arn"]
    refused = cli(fake_aws, "deploy", "--model-package", arn, "--dry-run")
    assert refused.returncode == 2 and "is PendingManualApproval" in refused.stderr
    no_reason = cli(fake_aws, "approve", arn, "--reason", "")
    assert no_reason.returncode == 2 and "a reason is required" in no_reason.stderr
    approved = cli(fake_aws, "approve", arn, "--reason", "mask AP 0.377")
    assert approved.returncode == 0, approved.stderr
    listed = cli(fake_aws, "models")
    assert listed.returncode == 0, listed.stderr
    assert any(arn in line and "Approved" in line and "mask AP 0.377" in line
               for line in listed.stderr.splitlines())
    planned = cli(fake_aws, "deploy", "--model-package", registry.LATEST_APPROVED, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    requests = json.loads(planned.stdout)
    assert requests["CreateModel"]["PrimaryContainer"] == {"ModelPackageName": arn}


def test_the_inference_notebook_shows_the_registrys_versions_with_their_ap(fake_aws, deployment):
    from tests.launcher.test_notebooks import execute

    version = registry.register(deployment, completed_training_job(fake_aws, run="notebook"),
                                session())
    output = execute("inference.ipynb", until=3)
    assert any(version.arn in line and "mask AP 0.377  box AP 0.412" in line
               and "PendingManualApproval" in line for line in output.splitlines()), output
