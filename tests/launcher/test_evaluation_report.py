"""A finished job's evaluation report, fetched from its model.tar.gz in S3 (as the notebook role:
every call is checked against its IAM policy, tests/iam), printed by the CLI."""

import io
import json
import os
import tarfile

import pytest
from maskrcnn_contract import evaluation_report as contract

from tests.launcher.cli import cli
from tests.launcher.conftest import (BUCKET, JOB_PREFIX, completed_training_job,
                                     model_key, shared_boto_session)
from tests.launcher.fake_aws import FAKE_PNG, FAKE_REPORT

PICTURES = sorted(contract.picture_names(FAKE_REPORT).values())



def test_fetch_writes_the_report_and_its_pictures_and_nothing_else_of_the_model(
        fake_aws, deployment, tmp_path):
    from maskrcnn_launcher.runs import evaluation_report

    job = completed_training_job(fake_aws)
    fetched = evaluation_report.fetch(deployment, job, shared_boto_session(),
                                      str(tmp_path / "report"))
    assert sorted(os.listdir(tmp_path)) == ["report"]  # no .incomplete left behind
    assert sorted(os.listdir(fetched.directory)) == sorted([contract.REPORT_FILE] + PICTURES)
    assert fetched.report == FAKE_REPORT
    assert sorted(os.path.basename(p) for p in fetched.pictures.values()) == PICTURES
    assert all(open(p, "rb").read() == FAKE_PNG for p in fetched.pictures.values())
    lines = evaluation_report.table(fetched.report)
    assert lines[1].split()[:4] == ["person", "12", "0.377", "0.710"]
    assert lines[-1].endswith("person as bicycle 3 (25%)")


def test_a_member_outside_the_report_folder_is_never_written(fake_aws, deployment, tmp_path):
    """Only regular files directly in code/evaluation/: a path that climbs out, a deeper one, a
    link are read past."""
    from maskrcnn_launcher.runs import evaluation_report

    job = completed_training_job(fake_aws)
    out = io.BytesIO()
    folder = contract.MODEL_REPORT_DIR
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in ((f"{folder}/../../escaped.txt", b"x"), (f"{folder}/deep/x.png", b"x"),
                           (f"{folder}/{contract.REPORT_FILE}", json.dumps(FAKE_REPORT).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo(f"{folder}/{PICTURES[0]}")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    fake_aws.client("s3").put_object(Bucket=BUCKET, Key=model_key(job), Body=out.getvalue())
    fetched = evaluation_report.fetch(deployment, job, shared_boto_session(),
                                      str(tmp_path / "a" / "b"))
    assert os.listdir(fetched.directory) == [contract.REPORT_FILE]
    assert fetched.pictures == {}
    assert sorted(os.listdir(tmp_path / "a")) == ["b"]


def test_the_cli_prints_the_table_and_the_pictures_paths(fake_aws, tmp_path):
    job = completed_training_job(fake_aws)
    result = cli(fake_aws, "report", job, "--out", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (f"evaluation report of {job} (step 200, 50 images, 140 detections, "
                        f"pycocotools 2.0.11): {tmp_path / 'r' / contract.REPORT_FILE}")
    assert lines[1].startswith("class ") and lines[2].split()[:2] == ["person", "12"]
    for name in PICTURES:
        assert f"{name[:-len('.png')]}: {tmp_path / 'r' / name}" in lines


def _set_status(fake_aws, name: str, status: str) -> None:
    fake_aws.sagemaker_backend().training_jobs[name].training_job_status = status


@pytest.mark.parametrize("case, message", [
    ("unknown job", f"training job '{JOB_PREFIX}-nothing-20260101000000' does not exist"),
    ("running job", "is InProgress; only a Completed job has a model"),
    ("no report", "/output/model.tar.gz) holds no evaluation report (code/evaluation/report.json)"),
])
def test_the_cli_refuses_a_job_without_a_report_with_exit_status_2(fake_aws, tmp_path, case,
                                                                    message):
    job = f"{JOB_PREFIX}-nothing-20260101000000"
    if case == "running job":
        job = completed_training_job(fake_aws)
        _set_status(fake_aws, job, "InProgress")
    elif case == "no report":
        job = completed_training_job(fake_aws, with_report=False)
    result = cli(fake_aws, "report", job, "--out", str(tmp_path / "r"))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "r.incomplete").exists()
