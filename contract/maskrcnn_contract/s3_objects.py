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


def object_exists(s3_client, bucket: str, key: str) -> bool:
    """Whether the object exists: a completeness marker, a model archive."""
    try:
        s3_client.head_object(Bucket=bucket, Key=key)
        return True
    except s3_client.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
