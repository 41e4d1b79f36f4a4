"""COCO staging: resumable verified download (local HTTP server with Range), extract, S3 upload."""

import hashlib
import os
import zipfile

import pytest
from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER

from maskrcnn_job.staging import s3_upload, stage_coco
from maskrcnn_job.staging.stage_coco import Archive, StagingError

from tests.iam.deployment import BUCKET
from tests.training import fake_http

# The staging job's S3 calls are evaluated against the staging role's policies in the synthesized
# template (tests/iam/plugin.py), on the deployment's data bucket.
pytestmark = pytest.mark.iam_role("staging")


@pytest.fixture
def server(tmp_path):
    archive_path = tmp_path / "annotations_trainval2017.zip"
    with zipfile.ZipFile(archive_path, "w") as zf:
        zf.writestr("annotations/instances_val2017.json", "{}" + " " * 5000)
    payload = archive_path.read_bytes()
    served = fake_http.Files({"/annotations_trainval2017.zip": payload})
    with fake_http.serving(served) as base_url:
        yield served, Archive(f"{base_url}/annotations_trainval2017.zip", len(payload),
                              hashlib.md5(payload).hexdigest(), "annotations")


def test_download_resumes_a_partial_file_and_verifies_it(server, tmp_path):
    served, archive = server
    payload = served.files["/annotations_trainval2017.zip"]
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    half = len(payload) // 2
    (downloads / (archive.name + ".part")).write_bytes(payload[:half])
    path = stage_coco.download(archive, str(downloads), progress=False)
    assert served.ranges == [half]
    assert open(path, "rb").read() == payload
    assert not os.path.exists(path + ".part")
    stage_coco.extract(path, archive, str(tmp_path / "coco"))
    assert (tmp_path / "coco" / "annotations" / "instances_val2017.json").exists()


def test_checksum_mismatch_removes_the_download(server, tmp_path):
    _, archive = server
    wrong = Archive(archive.url, archive.size, "0" * 32, archive.extracts_to)
    downloads = tmp_path / "downloads"
    with pytest.raises(StagingError, match="MD5"):
        stage_coco.download(wrong, str(downloads), progress=False)
    assert os.listdir(downloads) == []


def test_upload_writes_the_channel_with_dataset_info_last(small_coco, tmp_path):
    import boto3
    from moto import mock_aws

    from maskrcnn_job.data import coco_to_tfrecord

    channel = str(tmp_path / "channel")
    coco_to_tfrecord.convert_coco_dir(small_coco, channel, progress=False)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        uploaded = []
        original = client.upload_file

        def recording_upload(filename, bucket, key):
            uploaded.append(key)
            original(filename, bucket, key)

        client.upload_file = recording_upload
        count = s3_upload.upload_directory(channel, f"s3://{BUCKET}/" + stage_coco.DEFAULT_PREFIX,
                                           last=DATASET_COMPLETE_MARKER, client=client)
        keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert count == len(keys) == len(uploaded)
    assert uploaded[-1] == "datasets/coco2017/dataset_info.json"
    assert "datasets/coco2017/annotations/instances_val.json" in keys
    assert "datasets/coco2017/tfrecords/train-00000-of-00001.tfrecord" in keys
    with pytest.raises(StagingError, match="not an s3:// URI"):
        s3_upload.upload_directory(channel, "data/prefix", last=DATASET_COMPLETE_MARKER,
                                   client=client)
