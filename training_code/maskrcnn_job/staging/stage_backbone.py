"""The ImageNet-pretrained backbone: Model Garden's published checkpoint -> verified -> S3.

Model Garden's COCO Mask R-CNN experiment (`maskrcnn_resnetfpn_coco`) initializes its ResNet-50
backbone from `gs://cloud-tpu-checkpoints/vision-2.0/resnet50_imagenet/ckpt-28080`, a public
Cloud Storage object also served over HTTPS at storage.googleapis.com. It is fetched from there
(resumable), verified twice, and uploaded to `<pretrained prefix><backbone>/`, which the
launcher sends as the job's `pretrained` channel:
- bytes: size and MD5 against the hashes Cloud Storage publishes for each object (its
  `x-goog-hash` header); they are recorded in checkpoint_info.json, uploaded last;
- content: it restores into Model Garden's backbone of that depth exactly as the job's
  `MaskRCNNTask.initialize` will (every backbone variable found, with its shape).
Model Garden publishes no ImageNet checkpoint for the other depths the hyperparameters allow;
for those the message says what to do instead.
"""

import dataclasses
import json
import os
from typing import Dict, Optional, Tuple

from maskrcnn_contract import job_io

from maskrcnn_job.staging import s3_upload
from maskrcnn_job.staging.downloads import StagingError, describe_google_storage_object, download

GOOGLE_STORAGE_HTTPS = "https://storage.googleapis.com/"


@dataclasses.dataclass(frozen=True)
class PublishedCheckpoint:
    url_prefix: str  # the checkpoint prefix over HTTP(S): <url_prefix>.index, .data-*
    data_shards: int = 1

    @classmethod
    def from_gcs(cls, gcs_prefix: str) -> "PublishedCheckpoint":
        return cls(GOOGLE_STORAGE_HTTPS + gcs_prefix[len("gs://"):])

    @property
    def name(self) -> str:
        return self.url_prefix.rsplit("/", 1)[1]

    def urls(self) -> Tuple[str, ...]:
        shards = tuple(f"{self.url_prefix}.data-{i:05d}-of-{self.data_shards:05d}"
                       for i in range(self.data_shards))
        return shards + (f"{self.url_prefix}.index",)


# The checkpoint Model Garden's maskrcnn_resnetfpn_coco experiment names (a test pins it).
PUBLISHED: Dict[str, PublishedCheckpoint] = {
    "resnet50": PublishedCheckpoint.from_gcs(
        "gs://cloud-tpu-checkpoints/vision-2.0/resnet50_imagenet/ckpt-28080"),
}
DEFAULT_BACKBONES = job_io.STAGED_BACKBONES


class NoPublishedCheckpoint(StagingError):
    pass


def published(backbone: str, table: Optional[Dict[str, PublishedCheckpoint]] = None
              ) -> PublishedCheckpoint:
    table = PUBLISHED if table is None else table
    if backbone not in table:
        raise NoPublishedCheckpoint(
            f"backbone {backbone!r}: Model Garden publishes no ImageNet checkpoint for it (only "
            f"for {', '.join(sorted(table))}). Train an ImageNet classifier with Model Garden's "
            "resnet_imagenet experiment and upload its checkpoint (written as "
            f"tf.train.Checkpoint(backbone=...)) under <pretrained prefix>{backbone}/, or train "
            "from scratch (launch with use_pretrained=False and batch_norm=sync; expect a lower "
            "AP after 12 epochs)")
    return table[backbone]


def verify_restores(prefix: str, backbone: str) -> None:
    """Restores the checkpoint into Model Garden's `backbone` the way MaskRCNNTask.initialize
    does (init_checkpoint_modules='backbone'); raises StagingError if it does not fit."""
    import tensorflow as tf
    import tf_keras
    from official.core import exp_factory
    from official.vision.modeling.backbones import factory

    from maskrcnn_job.training import experiment  # registers Model Garden's experiments

    model_config = exp_factory.get_exp_config(experiment.EXPERIMENT).task.model
    model_config.backbone.resnet.model_id = int(backbone[len("resnet"):])
    model = factory.build_backbone(tf_keras.layers.InputSpec(shape=[None, None, None, 3]),
                                   model_config.backbone, model_config.norm_activation)
    try:
        tf.train.Checkpoint(backbone=model).read(prefix).expect_partial() \
            .assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
        first_line = (str(error).strip().splitlines() or [""])[0][:300]
        raise StagingError(f"{prefix} is not a checkpoint of Model Garden's {backbone} backbone "
                           f"({type(error).__name__}: {first_line})") from None


def stage(backbone: str, work_dir: str, pretrained_s3_uri: Optional[str], client=None,
          table: Optional[Dict[str, PublishedCheckpoint]] = None, progress: bool = True) -> str:
    """Downloads, verifies and uploads one backbone's checkpoint to
    <pretrained_s3_uri><backbone>/, unless checkpoint_info.json is there already. Returns the
    destination (the local directory without `pretrained_s3_uri`)."""
    destination = None
    if pretrained_s3_uri:
        bucket, prefix = s3_upload.split_s3_uri(pretrained_s3_uri)
        destination = f"s3://{bucket}/{job_io.pretrained_key_prefix(prefix, backbone)}"
        if s3_upload.exists(destination, job_io.PRETRAINED_COMPLETE_MARKER, client):
            print(f"{destination}{job_io.PRETRAINED_COMPLETE_MARKER} exists: the {backbone} "
                  "checkpoint is staged already")
            return destination
    checkpoint = published(backbone, table)
    local = os.path.join(work_dir, "pretrained", backbone)
    files = [describe_google_storage_object(url) for url in checkpoint.urls()]
    for remote in files:
        download(remote, local, progress=progress)
    verify_restores(os.path.join(local, checkpoint.name), backbone)
    with open(os.path.join(local, job_io.PRETRAINED_COMPLETE_MARKER), "w", encoding="utf-8") as f:
        json.dump({"backbone": backbone, "checkpoint": checkpoint.name,
                   "source": checkpoint.url_prefix,
                   "files": {r.name: {"bytes": r.size, "md5": r.md5, "url": r.url}
                             for r in files}}, f, indent=1)
    if destination is None:
        return local
    s3_upload.upload_directory(local, destination, last=job_io.PRETRAINED_COMPLETE_MARKER,
                               client=client)
    print(f"staged the {backbone} checkpoint {checkpoint.name}: {destination}")
    return destination
