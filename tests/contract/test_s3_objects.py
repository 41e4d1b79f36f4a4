"""Existence checks by listing (docs/aws-rules.md S3-2): what the roles' prefix-conditioned
s3:ListBucket allows, where HeadObject would answer a missing key with 403."""

import boto3
import pytest
from moto import mock_aws

from maskrcnn_contract import s3_objects


class _ListingOnly:
    """A client that fails any call but ListObjectsV2."""

    def __init__(self, client):
        self._client = client

    def list_objects_v2(self, **kwargs):
        assert kwargs["Prefix"] and kwargs["MaxKeys"] == 1
        return self._client.list_objects_v2(**kwargs)

    def __getattr__(self, name):
        raise AssertionError(f"{name}: only ListObjectsV2 may be used (S3-2)")


@pytest.fixture
def s3(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket="data")
        yield client


def test_an_object_is_found_by_listing_its_key_and_only_that_key(s3):
    s3.put_object(Bucket="data", Key="datasets/coco2017/dataset_info.json.part", Body=b"")
    s3.put_object(Bucket="data", Key="jobs/a/output/model.tar.gz", Body=b"")
    listing = _ListingOnly(s3)
    assert s3_objects.object_exists(listing, "data", "jobs/a/output/model.tar.gz")
    # A longer key that starts with the marker's name is not the marker.
    assert not s3_objects.object_exists(listing, "data", "datasets/coco2017/dataset_info.json")
    assert not s3_objects.object_exists(listing, "data", "datasets/other/dataset_info.json")


def test_split_s3_uri_gives_bucket_and_prefix_or_names_the_bad_value():
    assert s3_objects.split_s3_uri("s3://b/a/b") == ("b", "a/b/")
    assert s3_objects.split_s3_uri("s3://b") == ("b", "")
    with pytest.raises(s3_objects.S3UriError, match="'b/a' is not an s3:// URI"):
        s3_objects.split_s3_uri("b/a")
