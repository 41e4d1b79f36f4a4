"""Stage COCO 2017 for the cloud: download (resumable, verified) -> convert -> upload to S3.

Writes the `train` channel layout (see training_code/README.md) under an S3 prefix, by default
the one the stacks use, `s3://<bucket>/datasets/coco2017/`. dataset_info.json is uploaded last: a
prefix without it is incomplete. Runs anywhere with this package's requirements, or as a
SageMaker job with the training image (hyperparameter `sagemaker_program=stage_coco.py`, the
destination as hyperparameter `s3_uri`, a volume of >= 100 GB: ~19 GB of archives, ~20 GB of
images, ~20 GB of TFRecords), so no notebook disk is needed.
"""

import argparse
import dataclasses
import hashlib
import os
import shutil
import sys
import urllib.request
import zipfile
from typing import Optional

from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER, STAGING_S3_URI, STAGING_WORK_DIR
from tqdm import tqdm

DEFAULT_PREFIX = "datasets/coco2017/"
_CHUNK = 8 << 20


@dataclasses.dataclass(frozen=True)
class Archive:
    url: str
    size: int
    md5: str
    extracts_to: str  # a directory the archive creates, to skip extracting twice

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[1]


COCO_2017 = (
    Archive("http://images.cocodataset.org/annotations/annotations_trainval2017.zip",
            252907541, "f4bbac642086de4f52a3fdda2de5fa2c", "annotations"),
    Archive("http://images.cocodataset.org/zips/val2017.zip",
            815585330, "442b8da7639aecaf257c1dceb8ba8c80", "val2017"),
    Archive("http://images.cocodataset.org/zips/train2017.zip",
            19336861798, "cced6f7f71b7629ddf16f17bbcfab6b2", "train2017"),
)


class StagingError(RuntimeError):
    pass


def _md5(path: str) -> str:
    digest = hashlib.md5()  # noqa: S324  (the checksum COCO publishes)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def download(archive: Archive, directory: str, progress: bool = True) -> str:
    """Downloads to <name>.part, resuming it with an HTTP Range request; verifies size and MD5
    before giving the file its final name. Returns the path."""
    path = os.path.join(directory, archive.name)
    if os.path.exists(path):
        return path  # only verified files get the final name
    os.makedirs(directory, exist_ok=True)
    part = path + ".part"
    have = os.path.getsize(part) if os.path.exists(part) else 0
    if have > archive.size:
        os.remove(part)
        have = 0
    if have < archive.size:
        request = urllib.request.Request(archive.url, headers={"Range": f"bytes={have}-"})
        with urllib.request.urlopen(request, timeout=60) as response:
            if have and response.status != 206:  # the server ignored Range: start over
                have = 0
            with open(part, "ab" if have else "wb") as out, tqdm(
                    total=archive.size, initial=have, unit="B", unit_scale=True,
                    desc=archive.name, disable=not progress) as bar:
                for block in iter(lambda: response.read(_CHUNK), b""):
                    out.write(block)
                    bar.update(len(block))
    size = os.path.getsize(part)
    if size != archive.size:
        raise StagingError(f"{archive.url}: got {size} bytes, expected {archive.size}; "
                           "run again to resume")
    md5 = _md5(part)
    if md5 != archive.md5:
        os.remove(part)
        raise StagingError(f"{archive.url}: MD5 {md5} != published {archive.md5}; the partial "
                           "download was removed, run again")
    os.replace(part, path)
    return path


def extract(archive_path: str, archive: Archive, coco_dir: str) -> None:
    target = os.path.join(coco_dir, archive.extracts_to)
    done = target + ".extracted"
    if os.path.exists(done):
        return
    shutil.rmtree(target, ignore_errors=True)
    with zipfile.ZipFile(archive_path) as zf:
        for member in tqdm(zf.infolist(), desc=f"extract {archive.name}", unit="file"):
            zf.extract(member, coco_dir)
    open(done, "w").close()


def upload(channel_dir: str, s3_uri: str, client=None) -> int:
    """Uploads the channel tree; dataset_info.json last. Returns the number of files."""
    import boto3

    if not s3_uri.startswith("s3://"):
        raise StagingError(f"destination {s3_uri!r} is not an s3:// URI")
    bucket, _, prefix = s3_uri[len("s3://"):].partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    client = client or boto3.client("s3")
    files = sorted(os.path.relpath(os.path.join(root, name), channel_dir)
                   for root, _, names in os.walk(channel_dir) for name in names)
    files.sort(key=lambda rel: rel == DATASET_COMPLETE_MARKER)
    for rel in tqdm(files, desc=f"upload to {s3_uri}", unit="file"):
        client.upload_file(os.path.join(channel_dir, rel), bucket, prefix + rel)
    return len(files)


def stage(work_dir: str, s3_uri: Optional[str], workers: int, strict: bool = False,
          archives=COCO_2017) -> str:
    from maskrcnn_job import coco_to_tfrecord

    downloads = os.path.join(work_dir, "downloads")
    coco_dir = os.path.join(work_dir, "coco")
    channel = os.path.join(work_dir, "channel")
    for archive in archives:
        extract(download(archive, downloads), archive, coco_dir)
    # COCO 2017 holds a few degenerate annotations; by default they are skipped and reported.
    coco_to_tfrecord.convert_coco_dir(coco_dir, channel, skip_invalid=not strict,
                                      workers=workers)
    if s3_uri:
        upload(channel, s3_uri)
    return channel


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # The launcher's hyperparameter names too: the SageMaker toolkit passes them as --name value.
    parser.add_argument("--s3-uri", f"--{STAGING_S3_URI}", dest="s3_uri",
                        help=f"destination, e.g. s3://<bucket>/{DEFAULT_PREFIX}; none: local only")
    # In a SageMaker job: on the ML volume (/opt/ml), but not in output/, which SageMaker would
    # upload as output.tar.gz at the end (~60 GB).
    default_work = ("/opt/ml/stage-coco-work" if "SM_CURRENT_HOST" in os.environ
                    else "build/coco2017")
    parser.add_argument("--work-dir", f"--{STAGING_WORK_DIR}", dest="work_dir", default=default_work,
                        help=f"downloads, images and TFRecords ({default_work})")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--strict", action="store_true",
                        help="fail on invalid annotations instead of skipping and reporting them")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        print(f"ignoring arguments {unknown}", file=sys.stderr)
    channel = stage(args.work_dir, args.s3_uri, args.workers, args.strict)
    print(f"staged: {channel}" + (f" -> {args.s3_uri}" if args.s3_uri else ""))


if __name__ == "__main__":
    main()
