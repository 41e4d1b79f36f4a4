"""What a training launch reads, looked up in S3 before anything is sent.

A job without its dataset or its pretrained backbone fails or learns badly: CreateTrainingJob
refuses an empty S3 channel with a message that blames permissions as much as data, an EFS/FSx
channel without its directory fails only once the instances are up, and a backbone trained from
scratch does not reach the reference accuracy in 12 epochs (docs/aws-rules.md, SM-12). So the
plan of a launch (`plan.py`) refuses it, with the command that stages the missing part, unless
the bucket holds:
- the dataset's completeness marker, `<datasets prefix><name>/dataset_info.json` (listed, S3-2);
- a checkpoint of the chosen backbone under `<pretrained prefix><backbone>/`: an `.index` and its
  `.data-*` files (one ListObjectsV2 page).
The bucket is looked up for every data source: it is what EFS (DataSync) and FSx (auto import)
copy from. This module only reports what is missing; what the launch then sends is the plan's.
"""

import dataclasses
import json
from typing import List, Optional, Sequence

from maskrcnn_contract import job_io
from maskrcnn_contract.s3_objects import object_exists

from maskrcnn_launcher.deployment.settings import Deployment


def stage_command(dataset: str) -> str:
    """How a user stages `dataset` (and the backbone), from a notebook or the command line."""
    return (f"run prepare-data.ipynb with DATASET = {dataset!r}, or `python -m maskrcnn_launcher "
            f"stage-dataset --dataset {dataset} --wait` (then `sync-efs` for EFS)")


@dataclasses.dataclass(frozen=True)
class Missing:
    """One input a launch needs that is not in the bucket."""

    problem: str
    stageable: bool  # the staging job would write it


def dataset_staged(s3_client, deployment: Deployment, dataset: str) -> bool:
    return object_exists(s3_client, deployment.data_bucket,
                         deployment.dataset_key_prefix(dataset) + job_io.DATASET_COMPLETE_MARKER)


def dataset_info(s3_client, deployment: Deployment, dataset: str) -> dict:
    """The staged dataset's dataset_info.json (its classes, splits and where it came from)."""
    key = deployment.dataset_key_prefix(dataset) + job_io.DATASET_COMPLETE_MARKER
    body = s3_client.get_object(Bucket=deployment.data_bucket, Key=key)["Body"].read()
    return json.loads(body)


def import_uploaded(s3_client, deployment: Deployment, dataset: str) -> bool:
    """Whether anything lies below the dataset's import prefix (an export the user uploaded)."""
    page = s3_client.list_objects_v2(Bucket=deployment.data_bucket,
                                     Prefix=deployment.import_key_prefix(dataset), MaxKeys=1)
    return bool(page.get("Contents"))


def backbone_checkpoint_files(s3_client, deployment: Deployment, backbone: str) -> List[str]:
    """The checkpoint files under the backbone's prefix (names relative to it)."""
    prefix = job_io.pretrained_key_prefix(deployment.pretrained_prefix, backbone)
    page = s3_client.list_objects_v2(Bucket=deployment.data_bucket, Prefix=prefix, MaxKeys=1000)
    return [item["Key"][len(prefix):] for item in page.get("Contents", [])]


def has_checkpoint(names: Sequence[str]) -> bool:
    """An .index with at least one .data-* shard of the same checkpoint among `names`."""
    return any(name.endswith(".index") and
               any(other.startswith(name[:-len(".index")] + ".data-") for other in names)
               for name in names)


def backbone_staged(s3_client, deployment: Deployment, backbone: str) -> bool:
    return has_checkpoint(backbone_checkpoint_files(s3_client, deployment, backbone))


def missing_dataset(s3_client, deployment: Deployment, dataset: str) -> Optional[Missing]:
    """Why the dataset cannot be trained on yet, with what to do; None once it is staged."""
    if dataset_staged(s3_client, deployment, dataset):
        return None
    where = f"{deployment.dataset_s3_uri(dataset)}{job_io.DATASET_COMPLETE_MARKER} is missing"
    if dataset == job_io.DEFAULT_DATASET or import_uploaded(s3_client, deployment, dataset):
        return Missing(f"dataset {dataset!r} is not staged: {where}", stageable=True)
    return Missing(
        f"dataset {dataset!r} is not staged ({where}), and nothing is uploaded to convert into "
        f"it: upload the labeling tool's COCO export (CVAT 'COCO 1.0': annotations/ and images/; "
        f"Label Studio 'COCO': result.json and images/; or a zip of either) to "
        f"{deployment.import_s3_uri(dataset)}, then {stage_command(dataset)}", stageable=False)


def missing_training_inputs(s3_client, deployment: Deployment, dataset: str,
                            backbone: Optional[str]) -> List[Missing]:
    """What a training job would lack: the dataset and, unless `backbone` is None (trained from
    scratch, or fine-tuned from an earlier run), that backbone's checkpoint. Empty when
    everything is staged."""
    missing = [m for m in [missing_dataset(s3_client, deployment, dataset)] if m]
    if backbone and not backbone_staged(s3_client, deployment, backbone):
        where = f"{deployment.pretrained_s3_uri}{backbone}/"
        if backbone in job_io.STAGED_BACKBONES:
            missing.append(Missing(f"no {backbone} checkpoint (.index and .data-*) in {where}",
                                   stageable=True))
        else:
            missing.append(Missing(
                f"no {backbone} checkpoint (.index and .data-*) in {where}, and the staging job "
                f"fetches only {', '.join(job_io.STAGED_BACKBONES)} (Model Garden publishes no "
                f"ImageNet checkpoint for {backbone}): upload one written as "
                "tf.train.Checkpoint(backbone=...) there, or launch without the pretrained "
                "backbone (use_pretrained=False / --no-pretrained)", stageable=False))
    return missing


def refusal(missing: Sequence[Missing], dataset: str) -> str:
    """The message of a launch refused for its missing inputs: each one, and how to stage what
    the staging job can write."""
    how = (f"\nTo stage the dataset and the backbone: {stage_command(dataset)}"
           if any(m.stageable for m in missing) else "")
    return "cannot launch:\n  - " + "\n  - ".join(m.problem for m in missing) + how
