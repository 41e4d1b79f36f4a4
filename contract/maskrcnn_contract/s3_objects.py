"""S3 locations as the job and the launcher both name and test them (pure Python: the caller
hands in its boto3 client)."""

from typing import Tuple


class S3UriError(ValueError):
    """Not an s3:// URI."""


def split_s3_uri(s3_uri: str) -> Tuple[str, str]:
    """'s3://bucket/a/b' -> ('bucket', 'a/b/'): a key prefix ending in '/' (or '' for the root)."""
    if not s3_uri.startswith("s3://") or len(s3_uri) <= len("s3://"):
        raise S3UriError(f"{s3_uri!r} is not an s3:// URI")
    bucket, _, prefix = s3_uri[len("s3://"):].partition("/")
    return bucket, prefix.rstrip("/") + "/" if prefix else ""


def split_object_uri(uri: str) -> Tuple[str, str]:
    """'s3://bucket/a/b.tar.gz' -> ('bucket', 'a/b.tar.gz'): an object's bucket and key."""
    folder, _, name = uri.rpartition("/")
    bucket, prefix = split_s3_uri(folder)
    return bucket, prefix + name


def object_exists(s3_client, bucket: str, key: str) -> bool:
    """Whether the object exists (a completeness marker, a model archive), by listing the key as
    a prefix (ListObjectsV2, s3:ListBucket with s3:prefix = the key). Not HeadObject: on a missing
    key it answers 403, not 404, to a caller without an unconditioned s3:ListBucket on the bucket,
    and the deployment's roles may list their prefixes only (docs/aws-rules.md S3-2)."""
    page = s3_client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
    # A key sorts before every other key it is a prefix of, so it is the first one listed.
    return any(item["Key"] == key for item in page.get("Contents", []))
