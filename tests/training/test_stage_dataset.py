"""The staging job on an uploaded export: imports/<name>/ in S3 -> converted -> datasets/<name>/,
dataset_info.json last, skipped once staged; its S3 calls checked against the staging role."""

import json
import os

import pytest
from maskrcnn_contract import job_io

from maskrcnn_job.staging import stage_dataset
from maskrcnn_job.staging.downloads import StagingError

from tests.iam.deployment import BUCKET
from tests.training.tool_exports import cvat_export

pytestmark = pytest.mark.iam_role("staging")


def _upload(s3, root, prefix):
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            # PutObject, not upload_file: its threads would hide that the test uploads (the user
            # does, not the staging role).
            with open(path, "rb") as f:
                s3.put_object(Bucket=BUCKET, Body=f.read(),
                              Key=prefix + os.path.relpath(path, root).replace(os.sep, "/"))


def _keys(s3, prefix):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]


def test_an_uploaded_cvat_export_is_staged_as_its_dataset_and_then_skipped(s3, tmp_path,
                                                                           monkeypatch):
    root, _ = cvat_export(tmp_path, count=5)
    _upload(s3, root, "imports/parts/")
    uploaded = []
    real_upload = s3.upload_file
    monkeypatch.setattr("boto3.client", lambda *a, **k: s3)
    monkeypatch.setattr(s3, "upload_file", lambda path, bucket, key: (
        uploaded.append(key), real_upload(path, bucket, key)))
    args = ["--dataset", "parts", "--s3_uri", f"s3://{BUCKET}/datasets/parts/",
            "--import_s3_uri", f"s3://{BUCKET}/imports/parts/", "--work_dir", str(tmp_path / "w"),
            "--val_fraction", "0.4", "--split_seed", "5", "--workers", "1"]
    # CVAT's crowds: refused, naming the option, and nothing written below datasets/.
    with pytest.raises(StagingError, match="crowd_as_instances=true"):
        stage_dataset.main(args)
    assert _keys(s3, "datasets/") == []
    stage_dataset.main(args + ["--crowd_as_instances", "true"])
    assert uploaded[-1] == f"datasets/parts/{job_io.DATASET_COMPLETE_MARKER}"
    info = json.loads(s3.get_object(Bucket=BUCKET, Key=uploaded[-1])["Body"].read())
    assert info["name"] == "parts"
    assert [c["source_id"] for c in info["categories"]] == [1, 2, 3, 4]  # as CVAT numbers them
    assert info["splits"]["val"]["num_images"] == 2
    assert "datasets/parts/annotations/split.json" in _keys(s3, "datasets/parts/")
    # Staged: a re-run converts nothing.
    uploaded.clear()
    stage_dataset.main(args + ["--crowd_as_instances", "true"])
    assert uploaded == []


def test_a_dataset_without_its_export_or_with_a_bad_name_is_refused(s3, tmp_path):
    with pytest.raises(StagingError, match=r"nothing below s3://.*/imports/parts/: upload"):
        stage_dataset.main(["--dataset", "parts", "--s3_uri", f"s3://{BUCKET}/datasets/parts/",
                            "--import_s3_uri", f"s3://{BUCKET}/imports/parts/",
                            "--work_dir", str(tmp_path)])
    with pytest.raises(StagingError, match="dataset name 'Parts_1': expected 1 to 63 lowercase"):
        stage_dataset.main(["--dataset", "Parts_1", "--work_dir", str(tmp_path)])
    with pytest.raises(StagingError, match="no import_s3_uri"):
        stage_dataset.main(["--dataset", "parts", "--work_dir", str(tmp_path)])
    assert _keys(s3, "datasets/") == []
