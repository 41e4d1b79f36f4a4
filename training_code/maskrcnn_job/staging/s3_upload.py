"""Uploads a directory under an S3 prefix with its completeness marker last, checks markers, and
downloads a prefix (an uploaded export)."""

import os
from typing import Tuple

from tqdm import tqdm

from maskrcnn_contract import s3_objects

from maskrcnn_job.staging.downloads import StagingError


def split_s3_uri(s3_uri: str) -> Tuple[str, str]:
    """'s3://bucket/a/b' -> ('bucket', 'a/b/'); a staging error naming a destination otherwise."""
    try:
        return s3_objects.split_s3_uri(s3_uri)
    except s3_objects.S3UriError as error:
        raise StagingError(f"destination {error}") from None


def _client(client):
    import boto3

    return client or boto3.client("s3")


def exists(s3_uri: str, name: str, client=None) -> bool:
    """Whether the object `name` exists under the prefix `s3_uri`."""
    bucket, prefix = split_s3_uri(s3_uri)
    return s3_objects.object_exists(_client(client), bucket, prefix + name)


def upload_directory(directory: str, s3_uri: str, last: str, client=None) -> int:
    """Uploads the tree under the prefix, the file `last` (the marker that says the prefix is
    complete) at the very end. Returns the number of files."""
    bucket, prefix = split_s3_uri(s3_uri)
    client = _client(client)
    files = sorted(os.path.relpath(os.path.join(root, name), directory)
                   for root, _, names in os.walk(directory) for name in names)
    files.sort(key=lambda rel: rel == last)
    for rel in tqdm(files, desc=f"upload to {s3_uri}", unit="file"):
        client.upload_file(os.path.join(directory, rel), bucket, prefix + rel)
    return len(files)


def download_prefix(s3_uri: str, directory: str, client=None) -> int:
    """Downloads every object below the prefix into `directory` (keys relative to the prefix);
    a file already there with the object's size is kept, so a re-run resumes. Returns the number
    of objects."""
    bucket, prefix = split_s3_uri(s3_uri)
    client = _client(client)
    objects = [item for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix) for item in page.get("Contents", [])
        if not item["Key"].endswith("/")]
    root = os.path.abspath(directory)
    for item in tqdm(objects, desc=f"download {s3_uri}", unit="file"):
        target = os.path.abspath(os.path.join(root, item["Key"][len(prefix):]))
        if not target.startswith(root + os.sep):
            raise StagingError(f"s3://{bucket}/{item['Key']} would be written outside {root}")
        if os.path.isfile(target) and os.path.getsize(target) == item["Size"]:
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        client.download_file(bucket, item["Key"], target + ".incomplete")
        os.replace(target + ".incomplete", target)
    return len(objects)
