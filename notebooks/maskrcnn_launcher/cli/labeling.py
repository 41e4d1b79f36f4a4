"""The labeling flow's commands: predict-batch, predictions."""

import json
import sys

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.labeling import batch_jobs, batch_plan, handoff, pre_annotations
from maskrcnn_launcher.runs import registry

REFUSALS = (batch_plan.BatchRequestError, pre_annotations.PreAnnotationError)
FAILURES = (batch_jobs.BatchFailure,)


def add_commands(sub) -> None:
    chosen = batch_plan.BatchOptions(input_uri="")
    batch = sub.add_parser(
        "predict-batch", help="predict every image below an S3 prefix with a Batch Transform "
        "(billed per instance-hour while it runs), then write the predictions as COCO files, "
        "pre-annotations for Label Studio and CVAT, and which images to label next")
    batch.add_argument("--input", required=True, metavar="S3_PREFIX",
                       help="s3://<data bucket>/<samples prefix>...: every JPEG or PNG below it")
    batch.add_argument("--job", help="training job whose model predicts (default: the "
                       "deployment's latest Completed one)")
    batch.add_argument("--model-package", metavar=f"ARN|{registry.LATEST_APPROVED}",
                       help="an Approved version of the deployment's model registry instead")
    batch.add_argument("--name", help="name of the transform job and its model, starting with "
                       "the deployment's job-name prefix (default: <prefix>-predict-<UTC time>)")
    batch.add_argument("--instance-type", default=chosen.instance_type,
                       help=f"default {chosen.instance_type}; GPU families: "
                       + ", ".join(sorted(instances.HOSTING_GPU_FAMILIES)))
    batch.add_argument("--instance-count", type=int, default=chosen.instance_count,
                       help="instances sharing the images (default %(default)s)")
    batch.add_argument("--score-threshold", type=float, default=chosen.score_threshold,
                       help="keep detections scoring at least this (default %(default)s; lower "
                       "it to rank by uncertainty over more detections)")
    batch.add_argument("--allow-cpu", action="store_true",
                       help="allow a CPU instance type (slow: seconds per image)")
    batch.add_argument("--dry-run", action="store_true",
                       help="check and print the requests; create nothing")
    batch.add_argument("--no-wait", action="store_true",
                       help="start the transform and return; collect later with `predictions`")
    _add_output_options(batch)
    collect = sub.add_parser(
        "predictions", help="collect an ended batch predictions run: COCO files, "
        "pre-annotations, ranking and contact sheet, written and uploaded beside its answers")
    collect.add_argument("name", help="the transform job's name (predict-batch printed it)")
    _add_output_options(collect)


def _add_output_options(parser) -> None:
    parser.add_argument("--top", type=int, default=handoff.DEFAULT_TOP,
                        help="images on the contact sheet (default %(default)s)")
    parser.add_argument("--out", help=f"local folder for the files (default: ${handoff.ROOT_ENV} "
                        f"or {handoff.DEFAULT_ROOT}, then /<name>/)")


def check(args) -> None:
    """Refused before anything is read or sent."""
    if isinstance(args.top, bool) or args.top < 1:
        raise batch_plan.BatchRequestError(f"--top {args.top}: expected at least 1 image for the "
                                           "contact sheet")


def _echo(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def predict_batch(args, deployment, boto_session) -> None:
    options = batch_plan.BatchOptions(
        input_uri=args.input, job_name=args.job, model_package=args.model_package,
        name=args.name, instance_type=args.instance_type, instance_count=args.instance_count,
        score_threshold=args.score_threshold, require_gpu=not args.allow_cpu)
    plan = batch_plan.plan(deployment, options, boto_session)
    for line in batch_plan.describe_plan(plan):
        _echo(line)
    if args.dry_run:
        print(json.dumps(plan.requests(), indent=1))
        return
    batch_jobs.send(plan, boto_session, echo=_echo)
    if args.no_wait:
        _echo(f"collect it once it has ended: python -m maskrcnn_launcher predictions {plan.name}")
        return
    batch_jobs.wait(plan.name, boto_session, echo=_echo)
    _finish(args, deployment, plan.name, boto_session)


def predictions(args, deployment, boto_session) -> None:
    _finish(args, deployment, args.name, boto_session)


def _finish(args, deployment, name: str, boto_session) -> None:
    folder = args.out or handoff.default_folder(name)
    finished = handoff.finish(deployment, name, boto_session, folder, args.top, echo=_echo)
    for line in finished.lines:
        _echo(line)
    print(json.dumps({"predictions": finished.location, "local": folder, "files": finished.uris,
                      "summary": finished.run.summary()}, indent=1))


COMMANDS = {"predict-batch": predict_batch, "predictions": predictions}
CHECKS = {"predict-batch": check, "predictions": check}
