"""What a training launch reads, checked in S3 before anything is sent.

A job without its dataset or its pretrained backbone fails or learns badly: CreateTrainingJob
refuses an empty S3 channel with a message that blames permissions as much as data, an EFS/FSx
channel without its directory fails only once the instances are up, and a backbone trained from
scratch does not reach the reference accuracy in 12 epochs (docs/aws-rules.md, SM-12). So a
launch is refused, with the command that stages the missing part, unless the bucket holds:
- the dataset's completeness marker, `<data prefix>dataset_info.json` (HeadObject);
- a checkpoint of the chosen backbone under `<pretrained prefix><backbone>/`: an `.index` and its
  `.data-*` files (one ListObjectsV2 page).
The bucket is checked for every data source: it is what EFS (DataSync) and FSx (auto import)
copy from.
"""

from typing import Callable, Dict, List, Optional

from maskrcnn_contract import hyperparameters, job_io

from maskrcnn_launcher.options import LaunchOptions, LaunchRequestError
from maskrcnn_launcher.settings import Deployment

STAGE_COMMAND = ("run prepare-data.ipynb, or `python -m maskrcnn_launcher stage-coco --wait` "
                 "(then `sync-efs` for EFS)")
FROM_SCRATCH_WARNING = (
    "warning: no pretrained backbone; the backbone starts from random weights. The reference "
    "box AP ~37.7 / mask AP ~33.9 after 12 epochs starts from ImageNet weights; from scratch, "
    "Mask R-CNN needs about 3x longer schedules and synchronized batch norm to catch up (He et "
    "al. 2018, 'Rethinking ImageNet Pre-training').")


def effective_hyperparameters(options: LaunchOptions) -> hyperparameters.Hyperparameters:
    try:
        return hyperparameters.parse(hyperparameters.decode(options.hyperparameters))
    except hyperparameters.HyperparameterError as error:
        raise LaunchRequestError(str(error)) from None


def _object_exists(s3_client, bucket: str, key: str) -> bool:
    try:
        s3_client.head_object(Bucket=bucket, Key=key)
        return True
    except s3_client.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return False
        raise


def dataset_staged(s3_client, deployment: Deployment) -> bool:
    return _object_exists(s3_client, deployment.data_bucket,
                          deployment.data_prefix + job_io.DATASET_COMPLETE_MARKER)


def backbone_checkpoint_files(s3_client, deployment: Deployment, backbone: str) -> List[str]:
    """The checkpoint files under the backbone's prefix (names relative to it)."""
    prefix = job_io.pretrained_key_prefix(deployment.pretrained_prefix, backbone)
    page = s3_client.list_objects_v2(Bucket=deployment.data_bucket, Prefix=prefix, MaxKeys=1000)
    return [item["Key"][len(prefix):] for item in page.get("Contents", [])]


def backbone_staged(s3_client, deployment: Deployment, backbone: str) -> bool:
    """An .index with at least one .data-* shard of the same checkpoint."""
    names = backbone_checkpoint_files(s3_client, deployment, backbone)
    return any(name.endswith(".index") and
               any(other.startswith(name[:-len(".index")] + ".data-") for other in names)
               for name in names)


def check_training_inputs(s3_client, deployment: Deployment, options: LaunchOptions,
                          distribution: str = hyperparameters.Hyperparameters.distribution,
                          echo: Callable[[str], None] = print) -> Dict[str, object]:
    """Raises LaunchRequestError naming each missing input and how to stage it. Returns the
    hyperparameters to send: the user's, with `batch_norm` made explicit (when there is no
    pretrained backbone and the user chose none: frozen statistics need pretrained ones, so
    `sync`, or `per_rank` under parameter servers, which have no global batch to sync over)."""
    hps = effective_hyperparameters(options)
    problems, stageable = [], False
    if not dataset_staged(s3_client, deployment):
        problems.append(f"the dataset is not staged: {deployment.data_s3_uri}"
                        f"{job_io.DATASET_COMPLETE_MARKER} is missing")
        stageable = True
    chosen: Optional[str] = options.hyperparameters.get("batch_norm")
    batch_norm = hps.batch_norm
    if options.use_pretrained:
        if not backbone_staged(s3_client, deployment, hps.backbone):
            where = f"{deployment.pretrained_s3_uri}{hps.backbone}/"
            if hps.backbone in job_io.STAGED_BACKBONES:
                problems.append(f"no {hps.backbone} checkpoint (.index and .data-*) in {where}")
                stageable = True
            else:
                problems.append(
                    f"no {hps.backbone} checkpoint (.index and .data-*) in {where}, and the "
                    f"staging job fetches only {', '.join(job_io.STAGED_BACKBONES)} (Model Garden "
                    f"publishes no ImageNet checkpoint for {hps.backbone}): upload one written as "
                    "tf.train.Checkpoint(backbone=...) there, or launch without the pretrained "
                    "backbone (use_pretrained=False / --no-pretrained)")
    else:
        echo(FROM_SCRATCH_WARNING)
        if chosen is None:  # a frozen choice is refused by validation, with the request
            if distribution == "parameter_server":
                batch_norm = "per_rank"
                echo("batch_norm=per_rank: without pretrained statistics the backbone's batch "
                     "norm cannot be frozen, and parameter servers have no synchronous step to "
                     "normalize over the global batch")
            else:
                batch_norm = "sync"
                echo("batch_norm=sync: without pretrained statistics the backbone's batch norm "
                     "cannot be frozen")
    if problems:
        how = f"\nTo stage the dataset and the backbone: {STAGE_COMMAND}" if stageable else ""
        raise LaunchRequestError("cannot launch:\n  - " + "\n  - ".join(problems) + how)
    return {**options.hyperparameters, "batch_norm": batch_norm}
