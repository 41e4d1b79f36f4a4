"""The pretrained backbone's staging: fetched like Model Garden's published checkpoint (a local
HTTP server plays storage.googleapis.com), verified by bytes and by restoring, uploaded with its
manifest last, skipped when staged, resumed when interrupted."""

import json

import pytest
from maskrcnn_contract import job_io

from maskrcnn_job.staging import stage_backbone, stage_coco
from maskrcnn_job.staging.downloads import StagingError, google_storage_hashes
from maskrcnn_job.staging.stage_backbone import PublishedCheckpoint

from tests.iam.deployment import BUCKET
from tests.training import backbone_checkpoints, fake_http

# The staging job's S3 calls are evaluated against the staging role's policies in the synthesized
# template (tests/iam/plugin.py), on the deployment's data bucket.
pytestmark = pytest.mark.iam_role("staging")
PRETRAINED = f"s3://{BUCKET}/pretrained/"


@pytest.fixture(scope="module")
def resnet18_checkpoint():
    """{file name: bytes} of a ResNet-18 backbone checkpoint (backbone_checkpoints.py)."""
    return backbone_checkpoints.published(18, "ckpt-7")


def _serve(checkpoint, **kwargs):
    return fake_http.Files({f"/vision/r18/{name}": data for name, data in checkpoint.items()},
                           **kwargs)


def _keys(client):
    return [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


def test_resnet50_is_the_checkpoint_model_gardens_coco_mask_rcnn_names():
    from official.core import exp_factory

    from maskrcnn_job.training import experiment

    named = exp_factory.get_exp_config(experiment.EXPERIMENT).task.init_checkpoint
    assert named == "gs://cloud-tpu-checkpoints/vision-2.0/resnet50_imagenet/ckpt-28080"
    assert stage_backbone.PUBLISHED["resnet50"] == PublishedCheckpoint.from_gcs(named)
    assert stage_backbone.PUBLISHED["resnet50"].urls() == (
        "https://storage.googleapis.com/cloud-tpu-checkpoints/vision-2.0/resnet50_imagenet/"
        "ckpt-28080.data-00000-of-00001",
        "https://storage.googleapis.com/cloud-tpu-checkpoints/vision-2.0/resnet50_imagenet/"
        "ckpt-28080.index")
    assert stage_backbone.DEFAULT_BACKBONES == ("resnet50",)


def test_stages_verifies_and_uploads_with_the_manifest_last_then_skips(
        resnet18_checkpoint, s3, tmp_path):
    served = _serve(resnet18_checkpoint)
    uploaded = []
    original = s3.upload_file
    s3.upload_file = lambda filename, bucket, key: (uploaded.append(key),
                                                    original(filename, bucket, key))
    with fake_http.serving(served) as base:
        table = {"resnet18": PublishedCheckpoint(f"{base}/vision/r18/ckpt-7")}
        destination = stage_backbone.stage("resnet18", str(tmp_path), PRETRAINED, client=s3,
                                           table=table, progress=False)
        assert destination == f"{PRETRAINED}resnet18/"
        assert uploaded == ["pretrained/resnet18/ckpt-7.data-00000-of-00001",
                            "pretrained/resnet18/ckpt-7.index",
                            f"pretrained/resnet18/{job_io.PRETRAINED_COMPLETE_MARKER}"]
        manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=uploaded[-1])["Body"].read())
        for name, data in resnet18_checkpoint.items():
            assert manifest["files"][name]["bytes"] == len(data)
            uploaded_copy = s3.get_object(Bucket=BUCKET, Key=f"pretrained/resnet18/{name}")
            assert uploaded_copy["Body"].read() == data
        assert manifest["backbone"] == "resnet18" and manifest["checkpoint"] == "ckpt-7"
        # Staged: a second run asks nothing of the server and uploads nothing.
        requests_before, uploads_before = len(served.requests), len(uploaded)
        stage_backbone.stage("resnet18", str(tmp_path / "again"), PRETRAINED, client=s3,
                             table=table, progress=False)
        assert (len(served.requests), len(uploaded)) == (requests_before, uploads_before)


def test_an_interrupted_download_resumes(resnet18_checkpoint, tmp_path):
    served = _serve(resnet18_checkpoint)
    data_name = "ckpt-7.data-00000-of-00001"
    local = tmp_path / "pretrained" / "resnet18"
    local.mkdir(parents=True)
    half = len(resnet18_checkpoint[data_name]) // 2
    (local / (data_name + ".part")).write_bytes(resnet18_checkpoint[data_name][:half])
    with fake_http.serving(served) as base:
        table = {"resnet18": PublishedCheckpoint(f"{base}/vision/r18/ckpt-7")}
        result = stage_backbone.stage("resnet18", str(tmp_path), None, table=table,
                                      progress=False)
    assert result == str(local)
    assert served.ranges == [half, 0]  # the data file resumed, the index from its start
    assert (local / data_name).read_bytes() == resnet18_checkpoint[data_name]


def test_bytes_that_differ_from_the_published_md5_are_refused(resnet18_checkpoint, s3, tmp_path):
    served = _serve(resnet18_checkpoint,
                    announced_md5={"/vision/r18/ckpt-7.index": "0" * 32})
    with fake_http.serving(served) as base:
        table = {"resnet18": PublishedCheckpoint(f"{base}/vision/r18/ckpt-7")}
        with pytest.raises(StagingError, match=r"ckpt-7\.index: MD5 .* != published 0{32}"):
            stage_backbone.stage("resnet18", str(tmp_path), PRETRAINED, client=s3, table=table,
                                 progress=False)
    assert _keys(s3) == []


def test_a_server_without_published_hashes_is_refused(resnet18_checkpoint, tmp_path):
    with fake_http.serving(_serve(resnet18_checkpoint, hashes=False)) as base:
        table = {"resnet18": PublishedCheckpoint(f"{base}/vision/r18/ckpt-7")}
        with pytest.raises(StagingError, match="no MD5 in x-goog-hash"):
            stage_backbone.stage("resnet18", str(tmp_path), None, table=table, progress=False)


def test_a_checkpoint_of_another_depth_is_refused_before_upload(resnet18_checkpoint, s3,
                                                                 tmp_path):
    with fake_http.serving(_serve(resnet18_checkpoint)) as base:
        table = {"resnet34": PublishedCheckpoint(f"{base}/vision/r18/ckpt-7")}
        with pytest.raises(StagingError, match="not a checkpoint of Model Garden's resnet34"):
            stage_backbone.stage("resnet34", str(tmp_path), PRETRAINED, client=s3, table=table,
                                 progress=False)
    assert _keys(s3) == []


@pytest.mark.parametrize("backbone", ["resnet18", "resnet34", "resnet101"])
def test_backbones_without_a_published_checkpoint_say_what_to_do(backbone):
    with pytest.raises(stage_backbone.NoPublishedCheckpoint) as raised:
        stage_backbone.published(backbone)
    message = str(raised.value)
    assert backbone in message and "resnet50" in message
    assert f"<pretrained prefix>{backbone}/" in message and "use_pretrained=False" in message


def test_cloud_storage_hash_headers_parse_in_both_forms():
    from email.message import Message

    one = Message()
    one["x-goog-hash"] = "crc32c=n03x6A==,md5=Ojk9c3dhfxgoKVVHYwFbHQ=="
    two = Message()
    two["x-goog-hash"] = "crc32c=n03x6A=="
    two["x-goog-hash"] = "md5=Ojk9c3dhfxgoKVVHYwFbHQ=="
    expected = {"crc32c": "9f4df1e8", "md5": "3a393d7377617f182829554763015b1d"}
    assert google_storage_hashes(one) == google_storage_hashes(two) == expected


def test_the_staging_job_stages_the_backbone_and_skips_a_staged_dataset(
        resnet18_checkpoint, s3, tmp_path, monkeypatch):
    s3.put_object(Bucket=BUCKET, Key=f"datasets/coco2017/{job_io.DATASET_COMPLETE_MARKER}",
                  Body=b"{}")
    with fake_http.serving(_serve(resnet18_checkpoint)) as base:
        monkeypatch.setattr(stage_backbone, "PUBLISHED",
                            {"resnet18": PublishedCheckpoint(f"{base}/vision/r18/ckpt-7")})
        unreachable = stage_coco.Archive("http://127.0.0.1:9/never.zip", 1, "0" * 32, "never")
        channel = stage_coco.stage(str(tmp_path), f"s3://{BUCKET}/datasets/coco2017/", workers=1,
                                   archives=(unreachable,), pretrained_s3_uri=PRETRAINED,
                                   backbones=("resnet18",))
    assert channel == ""
    assert f"pretrained/resnet18/{job_io.PRETRAINED_COMPLETE_MARKER}" in _keys(s3)
