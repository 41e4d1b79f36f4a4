"""The IAM evaluation itself, on small hand-written policies (no synth): conditions as the engine
evaluates them, S3's 404 rule, an unmapped operation, how a denial reads, the template's
resolution, and the recorder in this process and in a subprocess."""

import json
import os
import subprocess
import sys

import pytest

from tests.iam import recorder, template
from tests.iam.check import Checker, needs_of
from tests.iam.implied import Known

ACCOUNT = "123456789012"
BUCKET = "data-bucket"
LIST_PREFIX_ONLY = {"Sid": "ListOwnPrefix", "Effect": "Allow", "Action": "s3:ListBucket",
                    "Resource": f"arn:aws:s3:::{BUCKET}",
                    "Condition": {"StringLike": {"s3:prefix": ["jobs/*"]}}}
READ_JOBS = {"Sid": "ReadJobs", "Effect": "Allow", "Action": "s3:GetObject",
             "Resource": f"arn:aws:s3:::{BUCKET}/jobs/*"}


def deployment(*statements):
    role = template.Role("notebook", "NotebookRole", f"arn:aws:iam::{ACCOUNT}:role/notebook",
                         [{"name": "Data", "policy": {"Version": "2012-10-17",
                                                      "Statement": list(statements)}}])
    return template.Deployment("eu-west-2", ACCOUNT, {"notebook": role}, {}, {}, {})


def call(operation, status=200, service="s3", **params):
    return {"service": service, "service_name": service, "operation": operation,
            "region": "eu-west-2", "params": params, "status": status, "error_code": None}


def test_a_prefix_conditioned_list_is_denied_without_the_key_and_allowed_with_it():
    checker = Checker(deployment(LIST_PREFIX_ONLY))
    assert checker.denials([call("ListObjectsV2", Bucket=BUCKET, Prefix="jobs/a/")], "notebook") == []
    outside, = checker.denials([call("ListObjectsV2", Bucket=BUCKET, Prefix="samples/")],
                               "notebook")
    assert outside.action == "s3:ListBucket" and "ImplicitlyDenied" in outside.text
    assert "StringLike s3:prefix" in outside.text  # the statement that nearly allowed it
    without, = checker.denials([call("ListObjectsV2", Bucket=BUCKET)], "notebook")
    assert "the request has no such key" in without.text


def test_a_head_object_404_needs_list_bucket_on_the_bucket():
    missing = call("HeadObject", status=404, Bucket=BUCKET, Key="jobs/a/model.tar.gz")
    assert [n.action for n in needs_of(missing, Known(deployment()))] == ["s3:GetObject",
                                                                           "s3:ListBucket"]
    found = call("HeadObject", status=200, Bucket=BUCKET, Key="jobs/a/model.tar.gz")
    assert Checker(deployment(READ_JOBS, LIST_PREFIX_ONLY)).denials([found], "notebook") == []
    denial, = Checker(deployment(READ_JOBS, LIST_PREFIX_ONLY)).denials([missing], "notebook")
    assert denial.action == "s3:ListBucket"
    assert "HeadObject answered 404 in the test" in denial.text
    assert "API_HeadObject.html" in denial.text and "HTTP 404" in denial.text
    unconditioned = {**LIST_PREFIX_ONLY, "Condition": {}}
    del unconditioned["Condition"]
    assert Checker(deployment(READ_JOBS, unconditioned)).denials([missing], "notebook") == []


def test_an_operation_missing_from_the_table_fails_naming_it():
    denial, = Checker(deployment()).denials(
        [call("SelectObjectContent", Bucket=BUCKET, Key="k")], "notebook")
    assert denial.action is None
    assert ("add s3.SelectObjectContent to the table (tests/iam/operations.py), with its source"
            in denial.text)


def test_a_denial_names_the_operation_action_resource_and_role():
    denial, = Checker(deployment(READ_JOBS)).denials(
        [call("DeleteObject", Bucket=BUCKET, Key="jobs/a/model.tar.gz")], "notebook")
    first = denial.text.splitlines()[0]
    assert first.startswith("s3.DeleteObject would be refused by AWS: action s3:DeleteObject on "
                            f"resource arn:aws:s3:::{BUCKET}/jobs/a/model.tar.gz is "
                            "ImplicitlyDenied for the notebook role (NotebookRole)")
    assert "API_DeleteObject.html" in denial.text


def test_a_context_key_the_action_does_not_know_fails_loudly():
    from tests.iam import operations

    entry = {"needs": [{"action": "s3:ListBucket", "resource": "arn:aws:s3:::{Bucket}",
                        "context": {"s3:prefx": "Prefix"}}], "source": "a typo"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(operations.OPERATIONS, "s3.ListObjectsV2", entry)
        denial, = Checker(deployment(LIST_PREFIX_ONLY)).denials(
            [call("ListObjectsV2", Bucket=BUCKET, Prefix="jobs/")], "notebook")
    assert denial.action is None and "s3:prefx" in denial.text


def test_the_template_resolves_from_the_published_values():
    raw = {"Resources": {
        "SubnetA": {"Type": "AWS::EC2::Subnet"}, "SubnetB": {"Type": "AWS::EC2::Subnet"},
        "Bucket": {"Type": "AWS::S3::Bucket"},
        "Subnets": {"Type": "AWS::SSM::Parameter", "Properties": {
            "Name": "/d/subnet-ids",
            "Value": {"Fn::Join": ["", [{"Ref": "SubnetA"}, ",", {"Ref": "SubnetB"}]]}}},
        "BucketName": {"Type": "AWS::SSM::Parameter", "Properties": {
            "Name": "/d/data-bucket", "Value": {"Ref": "Bucket"}}},
    }}
    resolver = template.Resolver(raw, "eu-west-2", ACCOUNT)
    resolver.bind_published("/d", {"subnet-ids": "subnet-1,subnet-2", "data-bucket": "b"})
    resolver.derive()
    assert resolver.resolve({"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket", "Arn"]}, "/jobs/*"]]}) \
        == "arn:aws:s3:::b/jobs/*"
    assert resolver.resolve([{"Ref": "SubnetB"}, {"Fn::Sub": "arn:${AWS::Partition}:x:${AWS::Region}"}]) \
        == ["subnet-2", "arn:aws:x:eu-west-2"]
    assert resolver.resolve({"Ref": "Elsewhere"}) == "UNRESOLVED(Ref.Elsewhere)"
    with pytest.raises(template.TemplateMismatch, match="/d/subnet-ids: the template publishes"):
        template.Resolver(raw, "eu-west-2", ACCOUNT).bind_published("/d", {"subnet-ids": "subnet-1"})


def test_the_recorder_keeps_the_code_under_tests_calls_not_the_tests_own():
    import boto3
    from maskrcnn_contract import s3_objects
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        recorder.start()
        client.create_bucket(Bucket=BUCKET)  # the test's own set-up: not recorded
        s3_objects.split_s3_uri(f"s3://{BUCKET}/x")
        s3_objects.object_exists(client, BUCKET, "jobs/missing")  # the contract's: recorded
        calls = recorder.stop()
    assert [(c["service_name"], c["params"]["Bucket"]) for c in calls] == [("s3", BUCKET)]
    assert calls[0]["operation"] in ("HeadObject", "ListObjectsV2")


def test_a_subprocess_records_its_calls_through_sitecustomize(tmp_path):
    record = tmp_path / "calls.jsonl"
    env = dict(os.environ, PYTHONPATH=str(recorder.SITE_DIR), **{recorder.RECORD_ENV: str(record)},
               AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    code = ("import boto3; from moto import mock_aws\n"
            "with mock_aws():\n"
            "    boto3.client('ssm', region_name='eu-west-2').get_parameters_by_path(Path='/d')\n")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    recorded, = [json.loads(line) for line in record.read_text().splitlines()]
    assert (recorded["service_name"], recorded["operation"], recorded["params"]) == (
        "ssm", "GetParametersByPath", {"Path": "/d"})
    assert recorded["status"] == 200 and recorded["region"] == "eu-west-2"


def test_sitecustomize_loads_botocore_only_with_the_process_and_runs_the_one_it_hides(tmp_path):
    """A process that never imports botocore (a training rank on a played job's host) does not
    import it for the recorder; a sitecustomize further on PYTHONPATH still runs."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import os\nos.environ['HIDDEN_RAN'] = '1'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(recorder.SITE_DIR), str(hidden))),
               **{recorder.RECORD_ENV: str(tmp_path / "calls.jsonl")})
    code = ("import os, sys\n"
            "print('botocore' in sys.modules, os.environ.get('HIDDEN_RAN'))\n"
            "import botocore.handlers\n"
            "print(sorted(n for n in sys.modules if 'iam_recorder' in n))\n")
    printed = subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120,
                             capture_output=True, text=True).stdout.splitlines()
    assert printed == ["False 1", "['maskrcnn_iam_recorder']"]


def test_a_played_jobs_hosts_get_the_recorder_in_their_machines_environment(tmp_path):
    from tests.iam.plugin import PlayedJob

    work = tmp_path / "job"
    work.mkdir()
    (work / PlayedJob.FILE).write_text('{"a previous play": 1}\n')
    request = {"TrainingJobName": "maskrcnn-test-staging-1", "RoleArn": "arn:aws:iam::1:role/s"}
    recording = PlayedJob(request, str(work), lambda: pytest.fail("nothing to resolve"))
    environment = recording.environment({"PYTHONPATH": "/elsewhere", "HOROVOD_CYCLE_TIME": "10"})
    assert environment == {recorder.RECORD_ENV: str(work / PlayedJob.FILE),
                           "PYTHONPATH": f"{recorder.SITE_DIR}{os.pathsep}/elsewhere",
                           "HOROVOD_CYCLE_TIME": "10"}
    assert recording.check() == []  # nothing recorded: nothing to evaluate, no synth
