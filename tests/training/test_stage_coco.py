"""COCO staging: resumable verified download (local HTTP server with Range), extract, S3 upload."""

import hashlib
import http.server
import os
import threading
import zipfile

import pytest

from maskrcnn_job import stage_coco
from maskrcnn_job.stage_coco import Archive, StagingError


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    payload = b""
    ranges = []

    def do_GET(self):  # noqa: N802
        start = 0
        header = self.headers.get("Range")
        if header:
            start = int(header.split("=")[1].split("-")[0])
            self.ranges.append(start)
        body = self.payload[start:]
        self.send_response(206 if header else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    archive_path = tmp_path / "annotations_trainval2017.zip"
    with zipfile.ZipFile(archive_path, "w") as zf:
        zf.writestr("annotations/instances_val2017.json", "{}" + " " * 5000)
    _RangeHandler.payload = archive_path.read_bytes()
    _RangeHandler.ranges = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd, Archive(f"http://127.0.0.1:{httpd.server_port}/annotations_trainval2017.zip",
                         len(_RangeHandler.payload),
                         hashlib.md5(_RangeHandler.payload).hexdigest(), "annotations")
    httpd.shutdown()


def test_download_resumes_a_partial_file_and_verifies_it(server, tmp_path):
    _, archive = server
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    half = len(_RangeHandler.payload) // 2
    (downloads / (archive.name + ".part")).write_bytes(_RangeHandler.payload[:half])
    path = stage_coco.download(archive, str(downloads), progress=False)
    assert _RangeHandler.ranges == [half]
    assert open(path, "rb").read() == _RangeHandler.payload
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

    from maskrcnn_job import coco_to_tfrecord

    channel = str(tmp_path / "channel")
    coco_to_tfrecord.convert_coco_dir(small_coco, channel, progress=False)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="data")
        uploaded = []
        original = client.upload_file

        def recording_upload(filename, bucket, key):
            uploaded.append(key)
            original(filename, bucket, key)

        client.upload_file = recording_upload
        count = stage_coco.upload(channel, "s3://data/" + stage_coco.DEFAULT_PREFIX, client)
        keys = {o["Key"] for o in client.list_objects_v2(Bucket="data")["Contents"]}
    assert count == len(keys) == len(uploaded)
    assert uploaded[-1] == "datasets/coco2017/dataset_info.json"
    assert "datasets/coco2017/annotations/instances_val2017.json" in keys
    assert "datasets/coco2017/tfrecords/train-00000-of-00001.tfrecord" in keys
    with pytest.raises(StagingError, match="not an s3:// URI"):
        stage_coco.upload(channel, "data/prefix", client)
