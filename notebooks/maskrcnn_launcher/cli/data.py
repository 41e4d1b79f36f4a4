"""The data flow's commands: upload-export, stage-dataset, datasets, sync-efs, fsx-status."""

import json
import sys

from maskrcnn_contract import job_io, labeling

from maskrcnn_launcher.data import exports, file_systems, staging

REFUSALS = (job_io.DatasetNameError,)
FAILURES = ()


def add_commands(sub) -> None:
    stage = sub.add_parser("stage-dataset", aliases=["stage-coco"],
                           help="stage a dataset into S3: COCO 2017 from its archives, any other "
                           "from the export uploaded below the imports prefix (skipped if staged)")
    stage.add_argument("--dataset", default=job_io.DEFAULT_DATASET,
                       help=f"its name (default {job_io.DEFAULT_DATASET}); another dataset is "
                       "converted from s3://<bucket>/<imports prefix><name>/ (upload-export)")
    stage.add_argument("--val-fraction", type=float, default=job_io.DEFAULT_VAL_FRACTION,
                       help="an export with one annotations file: the share of its images that "
                       "goes to val (default %(default)s)")
    stage.add_argument("--split-seed", type=int, default=job_io.DEFAULT_SPLIT_SEED,
                       help="the seed of that split (default %(default)s): the same seed, the "
                       "same split")
    stage.add_argument("--crowd-as-instances", action="store_true",
                       help="train annotations marked iscrowd=1 as instances (CVAT marks every "
                       "mask so; Model Garden skips crowds in training)")
    stage.add_argument("--boxes-without-mask", choices=labeling.BOXES_WITHOUT_MASK_CHOICES,
                       default=labeling.REFUSE,
                       help="annotations that are boxes without a mask (drawn with a rectangle "
                       "tool: \"segmentation\": []): refuse the export (default), "
                       f"{labeling.LEAVE_OUT} (named in the dataset's notes), or "
                       f"{labeling.BOX_AS_MASK} (trained with the box filled as the mask)")
    stage.add_argument("--strict", action="store_true",
                       help="fail on an invalid annotation or image instead of skipping and "
                       "reporting it")
    stage.add_argument("--no-backbone", action="store_true",
                       help="leave the ImageNet backbone out (no download)")
    stage.add_argument("--dry-run", action="store_true")
    stage.add_argument("--wait", action="store_true")
    upload = sub.add_parser("upload-export", help="upload a labeling tool's COCO export (a "
                            "directory or a .zip) below the imports prefix, for stage-dataset")
    upload.add_argument("--dataset", required=True, help="the dataset it becomes")
    upload.add_argument("export", help="the export's directory or .zip file")
    sub.add_parser("datasets", help="the staged datasets (classes, images) and the exports "
                   "uploaded below the imports prefix")
    sub.add_parser("sync-efs", help="run the DataSync S3 -> EFS task and wait")
    sub.add_parser("fsx-status", help="FSx data repository association status")


def stage_dataset(args, deployment, boto_session) -> None:
    staging.stage_dataset(
        boto_session, deployment, args.dataset, wait=args.wait, dry_run=args.dry_run,
        val_fraction=args.val_fraction, split_seed=args.split_seed,
        crowd_as_instances=args.crowd_as_instances,
        boxes_without_mask=args.boxes_without_mask, strict=args.strict,
        stage_backbone=not args.no_backbone)


COMMANDS = {
    "stage-dataset": stage_dataset,
    "stage-coco": stage_dataset,
    "upload-export": lambda args, deployment, boto_session: exports.upload_import(
        boto_session.client("s3"), deployment, args.dataset, args.export,
        echo=lambda line: print(line, file=sys.stderr)),
    "datasets": lambda args, deployment, boto_session: print(json.dumps(
        exports.datasets(boto_session.client("s3"), deployment), indent=1)),
    "sync-efs": lambda args, deployment, boto_session: file_systems.sync_to_efs(
        boto_session.client("datasync"), deployment),
    "fsx-status": lambda args, deployment, boto_session: print(json.dumps(
        file_systems.fsx_import_status(boto_session.client("fsx"), deployment), indent=1)),
}
