"""Stage a dataset for the cloud: the backbone checkpoint, then the dataset, into S3.

One program for every dataset (the launcher's staging request names it in its Environment,
SAGEMAKER_PROGRAM=stage_dataset.py; docs/aws-rules.md SM-14). The dataset `coco2017` is
downloaded from COCO's published archives (stage_coco); any other is converted from the labeling
tool's COCO export the user uploaded below `import_s3_uri` (s3://<bucket>/imports/<name>/: CVAT's
COCO 1.0, Label Studio's COCO, one annotations file, or a .zip of one; data/exports.py) by the same
converter, an export with one annotations file split by `val_fraction` and `split_seed`. Both
write the `train` channel layout under `s3_uri` (s3://<bucket>/datasets/<name>/) with
dataset_info.json last; each part is skipped when its S3 prefix is complete, and a re-run resumes
(downloads kept when their size matches), so the job can be run again. Invalid records are skipped
and reported (in the channel and in dataset_info.json's notes) unless `strict`. Runs anywhere with
this package's requirements, or as a SageMaker job with the training image.
"""

import argparse
import os
from typing import Dict, Optional, Sequence

from maskrcnn_contract.job_io import (
    DATASET_COMPLETE_MARKER,
    DEFAULT_DATASET,
    DEFAULT_SPLIT_SEED,
    DEFAULT_VAL_FRACTION,
    STAGING_BACKBONES,
    STAGING_CONTAINER_WORK_DIR,
    STAGING_CROWD_AS_INSTANCES,
    STAGING_DATASET,
    STAGING_IMPORT_S3_URI,
    STAGING_PRETRAINED_S3_URI,
    STAGING_S3_URI,
    STAGING_SPLIT_SEED,
    STAGING_STRICT,
    STAGING_VAL_FRACTION,
    STAGING_WORK_DIR,
    DatasetNameError,
    check_dataset_name,
)
from maskrcnn_contract.labeling import (
    BOXES_WITHOUT_MASK,
    BOXES_WITHOUT_MASK_CHOICES,
    REFUSE,
    check_boxes_without_mask,
)

from maskrcnn_job.staging import s3_upload, stage_backbone, stage_coco
from maskrcnn_job.staging.downloads import StagingError


def stage_export(name: str, work_dir: str, import_s3_uri: str, s3_uri: Optional[str],
                 workers: int, strict: bool = False, val_fraction: float = DEFAULT_VAL_FRACTION,
                 split_seed: int = DEFAULT_SPLIT_SEED, crowd_as_instances: bool = False,
                 boxes_without_mask: str = REFUSE) -> str:
    """Downloads the export below `import_s3_uri` (a local directory or .zip when it is no s3://
    URI), converts it into <work_dir>/channel and uploads that to `s3_uri`; skipped when
    `s3_uri` is complete. Returns the local channel directory ('' when skipped)."""
    from maskrcnn_job.data import coco_to_tfrecord, layout

    try:
        check_boxes_without_mask(boxes_without_mask)
    except ValueError as error:  # before anything is downloaded
        raise StagingError(str(error)) from None

    if s3_uri and s3_upload.exists(s3_uri, DATASET_COMPLETE_MARKER):
        print(f"{s3_uri}{DATASET_COMPLETE_MARKER} exists: dataset {name!r} is staged already")
        return ""
    if import_s3_uri.startswith("s3://"):
        export = os.path.join(work_dir, "import")
        if not s3_upload.download_prefix(import_s3_uri, export):
            raise StagingError(f"nothing below {import_s3_uri}: upload the labeling tool's COCO "
                               f"export there (`python -m maskrcnn_launcher upload-export "
                               f"--dataset {name} DIR`), then stage again")
    else:
        export = import_s3_uri
    channel = os.path.join(work_dir, "channel")
    try:
        coco_to_tfrecord.convert_export(
            export, channel, name=name, val_fraction=val_fraction, seed=split_seed,
            crowd_as_instances=crowd_as_instances, skip_invalid=not strict, workers=workers,
            work_dir=work_dir, boxes_without_mask=boxes_without_mask)
    except coco_to_tfrecord.ConversionError as error:
        raise StagingError(f"dataset {name!r} from {import_s3_uri}: {error}") from None
    # What was left out or changed, in the job's log too (dataset_info.json keeps the notes).
    for note in layout.Channel(channel).read_info().notes:
        print(f"note: {note}")
    if s3_uri:
        s3_upload.upload_directory(channel, s3_uri, last=DATASET_COMPLETE_MARKER)
    return channel


def stage(name: str, work_dir: str, s3_uri: Optional[str], workers: int, strict: bool = False,
          import_s3_uri: Optional[str] = None, pretrained_s3_uri: Optional[str] = None,
          backbones: Sequence[str] = stage_backbone.DEFAULT_BACKBONES,
          checkpoints: Optional[Dict[str, stage_backbone.PublishedCheckpoint]] = None,
          archives=stage_coco.COCO_2017, **export_options) -> str:
    """The backbone checkpoints first (small), then the dataset `name`. Returns the local channel
    directory ('' when the dataset was staged already)."""
    check_dataset_name(name)
    if name == DEFAULT_DATASET:
        if import_s3_uri:
            raise StagingError(f"{STAGING_IMPORT_S3_URI}={import_s3_uri}: {DEFAULT_DATASET} is "
                               "staged from COCO's published archives; name your export's "
                               "dataset otherwise")
        return stage_coco.stage(work_dir, s3_uri, workers, strict, archives=archives,
                                pretrained_s3_uri=pretrained_s3_uri, backbones=backbones,
                                checkpoints=checkpoints)
    if not import_s3_uri:
        raise StagingError(f"dataset {name!r}: no {STAGING_IMPORT_S3_URI}, the export to convert "
                           f"(only {DEFAULT_DATASET} is downloaded from its archives)")
    if pretrained_s3_uri:
        for backbone in backbones:
            stage_backbone.stage(backbone, work_dir, pretrained_s3_uri, table=checkpoints)
    return stage_export(name, work_dir, import_s3_uri, s3_uri, workers, strict,
                        **export_options)


def _flag(value: str) -> bool:
    """A boolean hyperparameter: the toolkit passes it as --name true|false."""
    lowered = str(value).strip().lower()
    if lowered not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{value!r}: expected true or false")
    return lowered == "true"


def main(argv=None) -> None:
    # No abbreviations: `--backbone` must not pass for `--backbones`.
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # The launcher's hyperparameter names too: the SageMaker toolkit passes them as --name value.
    parser.add_argument("--dataset", f"--{STAGING_DATASET}", dest="dataset",
                        default=DEFAULT_DATASET,
                        help=f"the dataset's name ({DEFAULT_DATASET}: COCO's archives)")
    parser.add_argument("--s3-uri", f"--{STAGING_S3_URI}", dest="s3_uri",
                        help="destination, e.g. s3://<bucket>/datasets/<name>/; none: local only")
    parser.add_argument("--import-s3-uri", f"--{STAGING_IMPORT_S3_URI}", dest="import_s3_uri",
                        help="the export to convert: s3://<bucket>/imports/<name>/, or a local "
                        "directory or .zip")
    parser.add_argument("--val-fraction", f"--{STAGING_VAL_FRACTION}", dest="val_fraction",
                        type=float, default=DEFAULT_VAL_FRACTION,
                        help="one annotations file: the share of images that goes to val")
    parser.add_argument("--split-seed", f"--{STAGING_SPLIT_SEED}", dest="split_seed", type=int,
                        default=DEFAULT_SPLIT_SEED, help="the seed of that split")
    parser.add_argument("--crowd-as-instances", f"--{STAGING_CROWD_AS_INSTANCES}",
                        dest="crowd_as_instances", type=_flag, nargs="?", const=True,
                        default=False, help="train crowd annotations (iscrowd=1) as instances")
    parser.add_argument("--boxes-without-mask", f"--{BOXES_WITHOUT_MASK}",
                        dest="boxes_without_mask", default=REFUSE,
                        choices=BOXES_WITHOUT_MASK_CHOICES,
                        help="annotations that are boxes without a mask (\"segmentation\": []): "
                        "refuse the export (default), leave them out (named in the notes), or "
                        "train each with its box filled as its mask")
    default_work = (STAGING_CONTAINER_WORK_DIR if "SM_CURRENT_HOST" in os.environ
                    else "build/staging")
    parser.add_argument("--work-dir", f"--{STAGING_WORK_DIR}", dest="work_dir",
                        default=default_work,
                        help=f"downloads, images and TFRecords ({default_work}/<dataset>)")
    parser.add_argument("--pretrained-s3-uri", f"--{STAGING_PRETRAINED_S3_URI}",
                        dest="pretrained_s3_uri",
                        help="where the backbone checkpoints go, e.g. s3://<bucket>/pretrained/ "
                        "(each in <backbone>/); none: no backbone")
    parser.add_argument("--backbones", f"--{STAGING_BACKBONES}", dest="backbones",
                        default=",".join(stage_backbone.DEFAULT_BACKBONES),
                        help="comma-separated backbones whose ImageNet checkpoint to stage")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--strict", f"--{STAGING_STRICT}", dest="strict", type=_flag, nargs="?",
                        const=True, default=False,
                        help="fail on invalid annotations instead of skipping and reporting them")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # A misspelled staging hyperparameter would otherwise stage with the default silently.
        known = sorted(action.dest for action in parser._actions if action.dest != "help")
        raise StagingError(f"unknown arguments {unknown}: the staging job's hyperparameters are "
                           f"{', '.join(known)}")
    try:
        check_dataset_name(args.dataset)
    except DatasetNameError as error:
        raise StagingError(str(error)) from None
    backbones = [b.strip() for b in args.backbones.split(",") if b.strip()]
    archives, checkpoints = stage_coco.sources()
    options = {} if args.dataset == DEFAULT_DATASET else {
        "val_fraction": args.val_fraction, "split_seed": args.split_seed,
        "crowd_as_instances": args.crowd_as_instances,
        "boxes_without_mask": args.boxes_without_mask}
    channel = stage(args.dataset, os.path.join(args.work_dir, args.dataset), args.s3_uri,
                    args.workers, args.strict, import_s3_uri=args.import_s3_uri,
                    pretrained_s3_uri=args.pretrained_s3_uri, backbones=backbones,
                    checkpoints=checkpoints, archives=archives, **options)
    if channel:
        print(f"staged: {channel}" + (f" -> {args.s3_uri}" if args.s3_uri else ""))


if __name__ == "__main__":
    main()
