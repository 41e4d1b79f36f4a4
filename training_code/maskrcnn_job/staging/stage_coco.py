"""Stage COCO 2017 for the cloud: download (resumable, verified) -> convert -> upload to S3.

The dataset `coco2017` of the staging job (stage_dataset.py, which parses its arguments). Writes
the `train` channel layout (see training_code/README.md) under an S3 prefix, the one the stacks
use being `s3://<bucket>/datasets/coco2017/`. dataset_info.json is uploaded last: a
prefix without it is incomplete. First, with `pretrained_s3_uri`, the ImageNet backbone checkpoint
goes to `<pretrained_s3_uri><backbone>/` (stage_backbone). Each part is skipped when its S3 prefix
is complete, so the job can be re-run. Runs anywhere with this package's requirements, or as a
SageMaker job with the training image (started by the request's Environment
SAGEMAKER_PROGRAM=stage_dataset.py, the destination as hyperparameter `s3_uri`, a volume of
>= 100 GB:
~19 GB of archives, ~20 GB of images, ~20 GB of TFRecords), so no notebook disk is needed.

Its sources are the published ones (COCO_2017, stage_backbone.PUBLISHED) unless the environment
variable MASKRCNN_STAGING_SOURCES names a JSON file that replaces them: the one seam of the job,
for the test that plays the launcher's staging request on emulated hosts without the internet
(tests/training/test_sagemaker_job.py; training_code/README.md, "Staging sources"). The launcher
never sets it; the files are verified against what that file lists, as against the published
sizes and hashes.
"""

import dataclasses
import json
import os
import shutil
import zipfile
from typing import Dict, Optional, Sequence, Tuple

from tqdm import tqdm

from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER, DEFAULT_DATASET

from maskrcnn_job.staging import s3_upload, stage_backbone
from maskrcnn_job.staging.downloads import RemoteFile, StagingError, download  # noqa: F401  (re-exported)

DEFAULT_PREFIX = "datasets/coco2017/"


@dataclasses.dataclass(frozen=True)
class Archive(RemoteFile):
    extracts_to: str  # a directory the archive creates, to skip extracting twice


COCO_2017 = (
    Archive("http://images.cocodataset.org/annotations/annotations_trainval2017.zip",
            252907541, "f4bbac642086de4f52a3fdda2de5fa2c", "annotations"),
    Archive("http://images.cocodataset.org/zips/val2017.zip",
            815585330, "442b8da7639aecaf257c1dceb8ba8c80", "val2017"),
    Archive("http://images.cocodataset.org/zips/train2017.zip",
            19336861798, "cced6f7f71b7629ddf16f17bbcfab6b2", "train2017"),
)


SOURCES_ENV = "MASKRCNN_STAGING_SOURCES"


def sources(environ=None) -> Tuple[Tuple[Archive, ...],
                                   Optional[Dict[str, stage_backbone.PublishedCheckpoint]]]:
    """(the COCO archives, the backbone checkpoints table or None for the published one): the
    published sources, or those of the JSON file SOURCES_ENV names, whose keys replace them:
    {"coco_archives": [{"url", "size", "md5", "extracts_to"}, ...],
     "checkpoints": {backbone: {"url_prefix", "data_shards"}}}."""
    environ = os.environ if environ is None else environ
    path = environ.get(SOURCES_ENV)
    if not path:
        return COCO_2017, None
    try:
        with open(path, encoding="utf-8") as f:
            listed = json.load(f)
        archives = (tuple(Archive(**item) for item in listed["coco_archives"])
                    if "coco_archives" in listed else COCO_2017)
        checkpoints = listed.get("checkpoints")
        table = None if checkpoints is None else {
            name: stage_backbone.PublishedCheckpoint(**item) for name, item in checkpoints.items()}
    except (OSError, ValueError, TypeError, AttributeError) as error:
        raise StagingError(f"{SOURCES_ENV}={path}: {type(error).__name__}: {error}") from None
    print(f"staging sources: {path} ({SOURCES_ENV}), not the published ones", flush=True)
    return archives, table


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


def stage(work_dir: str, s3_uri: Optional[str], workers: int, strict: bool = False,
          archives=COCO_2017, pretrained_s3_uri: Optional[str] = None,
          backbones: Sequence[str] = stage_backbone.DEFAULT_BACKBONES,
          checkpoints: Optional[Dict[str, stage_backbone.PublishedCheckpoint]] = None) -> str:
    """The backbone checkpoints first (small), then COCO; each skipped when its S3 prefix is
    complete already. Returns the local channel directory ('' when COCO was skipped).
    `checkpoints`: the backbones' sources (None: the published ones)."""
    from maskrcnn_job.data import coco_to_tfrecord

    if pretrained_s3_uri:
        for backbone in backbones:
            stage_backbone.stage(backbone, work_dir, pretrained_s3_uri, table=checkpoints)
    if s3_uri and s3_upload.exists(s3_uri, DATASET_COMPLETE_MARKER):
        print(f"{s3_uri}{DATASET_COMPLETE_MARKER} exists: COCO 2017 is staged already")
        return ""
    downloads = os.path.join(work_dir, "downloads")
    coco_dir = os.path.join(work_dir, "coco")
    channel = os.path.join(work_dir, "channel")
    for archive in archives:
        extract(download(archive, downloads), archive, coco_dir)
    # COCO 2017 holds a few degenerate annotations; by default they are skipped and reported.
    coco_to_tfrecord.convert_coco_dir(coco_dir, channel, skip_invalid=not strict,
                                      workers=workers, name=DEFAULT_DATASET)
    if s3_uri:
        s3_upload.upload_directory(channel, s3_uri, last=DATASET_COMPLETE_MARKER)
    return channel
