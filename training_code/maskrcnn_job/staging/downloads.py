"""Resumable, verified HTTP downloads: the COCO archives and the pretrained backbone checkpoint.

A file gets its final name only after its size and MD5 match the published ones, so a present
file is a verified file and a re-run skips it; an interrupted download resumes from its `.part`
with an HTTP Range request.
"""

import base64
import binascii
import dataclasses
import hashlib
import os
import re
import urllib.request
from typing import Dict

from tqdm import tqdm

_CHUNK = 8 << 20


class StagingError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    url: str
    size: int
    md5: str  # hex

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[1]


def md5_of(path: str) -> str:
    digest = hashlib.md5()  # noqa: S324  (the checksum the sources publish)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def google_storage_hashes(headers) -> Dict[str, str]:
    """{'md5': hex, 'crc32c': hex} from Cloud Storage's `x-goog-hash` response headers (one
    header per hash, or both in one, comma-separated; values base64): the hashes Cloud Storage
    stores for the whole object, sent with every GET and HEAD."""
    hashes = {}
    for header in headers.get_all("x-goog-hash") or []:
        for item in header.split(","):
            match = re.fullmatch(r"\s*(md5|crc32c)=([A-Za-z0-9+/]+={0,2})\s*", item)
            if match:
                try:
                    hashes[match.group(1)] = base64.b64decode(match.group(2)).hex()
                except binascii.Error:
                    pass
    return hashes


def describe_google_storage_object(url: str) -> RemoteFile:
    """Size and MD5 of a public Cloud Storage object, from a HEAD request to its HTTPS URL."""
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            headers = response.headers
    except OSError as error:
        raise StagingError(f"{url}: {error}") from None
    md5 = google_storage_hashes(headers).get("md5")
    length = headers.get("Content-Length")
    if md5 is None or not (length or "").isdigit():
        raise StagingError(f"{url}: the response has no MD5 in x-goog-hash or no Content-Length "
                           f"(headers: {dict(headers)}); cannot verify the download")
    return RemoteFile(url, int(length), md5)


def download(remote: RemoteFile, directory: str, progress: bool = True) -> str:
    """Downloads to <name>.part, resuming it with an HTTP Range request; verifies size and MD5
    before giving the file its final name. Returns the path."""
    path = os.path.join(directory, remote.name)
    if os.path.exists(path):
        return path  # only verified files get the final name
    os.makedirs(directory, exist_ok=True)
    part = path + ".part"
    have = os.path.getsize(part) if os.path.exists(part) else 0
    if have > remote.size:
        os.remove(part)
        have = 0
    if have < remote.size:
        request = urllib.request.Request(remote.url, headers={"Range": f"bytes={have}-"})
        with urllib.request.urlopen(request, timeout=60) as response:
            if have and response.status != 206:  # the server ignored Range: start over
                have = 0
            with open(part, "ab" if have else "wb") as out, tqdm(
                    total=remote.size, initial=have, unit="B", unit_scale=True,
                    desc=remote.name, disable=not progress) as bar:
                for block in iter(lambda: response.read(_CHUNK), b""):
                    out.write(block)
                    bar.update(len(block))
    size = os.path.getsize(part)
    if size != remote.size:
        raise StagingError(f"{remote.url}: got {size} bytes, expected {remote.size}; "
                           "run again to resume")
    md5 = md5_of(part)
    if md5 != remote.md5:
        os.remove(part)
        raise StagingError(f"{remote.url}: MD5 {md5} != published {remote.md5}; the partial "
                           "download was removed, run again")
    os.replace(part, path)
    return path
