"""Command line: the notebooks' steps without Jupyter, e.g. from a pipeline.

    python -m maskrcnn_launcher launch --data-source fsx --instances 2 [--dataset NAME]
                                       [--init-from <job> | --init-from s3://...] [--distribution D]
                                       [--input-mode File] [--keep-alive-seconds N]
                                       [--dry-run] [--wait]
    python -m maskrcnn_launcher upload-export --dataset NAME <directory or .zip>
    python -m maskrcnn_launcher stage-dataset [--dataset NAME] [--val-fraction F] [--split-seed S]
                                              [--crowd-as-instances] [--boxes-without-mask B]
                                              [--strict] [--dry-run] [--wait]
    python -m maskrcnn_launcher datasets | sync-efs | fsx-status | follow <job>
    python -m maskrcnn_launcher deploy [--job <job>] [--instance-type T] [--min N] [--max N]
                                       [--target-invocations X] [--data-capture PCT]
                                       [--idle-hours H | --no-idle-alarm]
                                       [--allow-cpu] [--dry-run]
    python -m maskrcnn_launcher invoke <endpoint> <image>... | endpoints | delete-endpoint <endpoint>
    python -m maskrcnn_launcher report <job> [--out DIR]
    python -m maskrcnn_launcher warm-pools | release-warm-pool <job>

Exit status 2 with a message naming the bad value when the request is invalid (nothing sent or
created); 1 when a deployment failed after creating something (the message says what exists).
"""

import argparse
import json
import sys

from maskrcnn_contract import job_io, labeling

from maskrcnn_launcher import (data_prep, deploy, evaluation_report, follow, instances, settings,
                               warm_pools)
from maskrcnn_launcher.options import (DATA_SOURCES, DISTRIBUTIONS, INPUT_MODES,
                                       MAX_KEEP_ALIVE_SECONDS, LaunchOptions, LaunchRequestError)


def _hyperparameter(text: str):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE, e.g. max_steps=1000")
    return key, value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m maskrcnn_launcher", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ssm-path", help="the deployment's SSM path (default: $MASKRCNN_SSM_PATH, "
                   "~/.maskrcnn/ssm-path, /maskrcnn)")
    sub = p.add_subparsers(dest="command", required=True)

    launch = sub.add_parser("launch", help="start a Mask R-CNN training job")
    defaults = LaunchOptions()
    launch.add_argument("--data-source", choices=DATA_SOURCES, default=defaults.data_source)
    launch.add_argument("--dataset", default=defaults.dataset,
                        help=f"the staged dataset to train on (default {defaults.dataset}; "
                        "`datasets` lists them, `stage-dataset` stages one)")
    launch.add_argument("--init-from", metavar="JOB_OR_S3_URI",
                        help="fine-tune: start from an earlier training job's checkpoints (its "
                        "name, or their s3:// URI below the checkpoint prefix); every weight of "
                        "the same shape is restored, the class-specific layers are re-initialized "
                        "when the classes differ (see --hp freeze_backbone=true)")
    launch.add_argument("--instance-type", default=defaults.instance_type,
                        help=f"default {defaults.instance_type}; known GPU counts: "
                        + ", ".join(f"{k}={v}" for k, v in instances.GPUS_PER_INSTANCE.items()))
    launch.add_argument("--instances", type=int, default=defaults.instance_count)
    launch.add_argument("--distribution", choices=DISTRIBUTIONS,
                        help="how the instances share the work (default: the `distribution` "
                        "hyperparameter if given, else horovod). horovod: synchronous, one MPI "
                        "rank per GPU; multi_worker_mirrored: synchronous, TensorFlow's "
                        "collectives, one process per instance; parameter_server: asynchronous, "
                        "2 or more instances (notebooks/README.md)")
    launch.add_argument("--processes-per-host", type=int,
                        help="Horovod ranks per instance (default: its GPU count); horovod only")
    launch.add_argument("--hp", type=_hyperparameter, action="append", default=[],
                        metavar="NAME=VALUE", help="training hyperparameter (repeatable)")
    launch.add_argument("--spot", action="store_true", help="managed spot training")
    launch.add_argument("--max-run-hours", type=float, default=defaults.max_run_hours)
    launch.add_argument("--volume-gb", type=int, default=defaults.volume_size_gb)
    launch.add_argument("--input-mode", choices=INPUT_MODES,
                        help="how the job reads an S3 data source: FastFile (default) streams it "
                        "as the job reads, File copies it onto every instance before the start; "
                        "EFS and FSx are mounted (File)")
    launch.add_argument("--keep-alive-seconds", type=int, default=defaults.keep_alive_seconds,
                        help="managed warm pool: keep the instances this long after the job (at "
                        f"most {MAX_KEEP_ALIVE_SECONDS}) so that the next job of the same shape "
                        "starts at once; billed while kept (`warm-pools` lists them, "
                        "`release-warm-pool` ends one); not with --spot; needs a warm-pool quota "
                        "(default: none)")
    launch.add_argument("--no-pretrained", action="store_true",
                        help="no `pretrained` channel (train the backbone from scratch)")
    launch.add_argument("--run-name", help="name of the run; a run launched again resumes from its "
                        "checkpoints (default: <data source>-<random>, a new run)")
    launch.add_argument("--dry-run", action="store_true",
                        help="build and validate the request as it would be sent; send nothing")
    launch.add_argument("--wait", action="store_true", help="wait for the end, print metrics")

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
    follow_p = sub.add_parser("follow", help="wait for a job, print its log and metrics")
    follow_p.add_argument("job_name")

    serve = deploy.DeployOptions()
    dep = sub.add_parser("deploy", help="serve a finished training job's model on an "
                         "auto-scaling endpoint (costs its instances' hourly price until deleted)")
    dep.add_argument("--job", help="training job to serve (default: the deployment's latest "
                     "Completed one)")
    dep.add_argument("--endpoint-name", help="name of the model, endpoint configuration and "
                     "endpoint, starting with the deployment's job-name prefix (default: "
                     "<prefix>-endpoint-<UTC time>)")
    dep.add_argument("--instance-type", default=serve.instance_type,
                     help=f"default {serve.instance_type}; GPU families: "
                     + ", ".join(sorted(instances.HOSTING_GPU_FAMILIES)))
    dep.add_argument("--instance-count", type=int, default=serve.instance_count,
                     help="initial instances (default %(default)s)")
    dep.add_argument("--min", type=int, default=serve.min_instances, dest="min_instances",
                     help="auto scaling minimum (default %(default)s)")
    dep.add_argument("--max", type=int, default=serve.max_instances, dest="max_instances",
                     help="auto scaling maximum (default %(default)s)")
    dep.add_argument("--target-invocations", type=float, default=serve.target_invocations,
                     help="target requests per instance per minute (default %(default)s)")
    dep.add_argument("--data-capture", type=int, default=0, metavar="PERCENT",
                     help="capture this percentage of requests and answers to "
                     "s3://<bucket>/<output prefix>data-capture/ (default: off)")
    dep.add_argument("--idle-hours", type=int, default=serve.idle_hours,
                     help="notify the deployment's SNS topic when the endpoint has had no "
                     "invocations for this many hours (1 to "
                     f"{deploy.MAX_IDLE_HOURS}; default %(default)s)")
    dep.add_argument("--no-idle-alarm", action="store_true",
                     help="no idle alarm (an endpoint nobody calls bills unnoticed)")
    dep.add_argument("--allow-cpu", action="store_true",
                     help="allow a CPU instance type (slow: seconds per image)")
    dep.add_argument("--keep-on-failure", action="store_true",
                     help="when a step fails, keep what was created (default: delete it)")
    dep.add_argument("--dry-run", action="store_true",
                     help="check and print the requests; create nothing")
    delete_p = sub.add_parser("delete-endpoint", help="delete an endpoint, its auto scaling, "
                              "endpoint configuration and model (what is gone already is skipped)")
    delete_p.add_argument("endpoint_name")
    invoke_p = sub.add_parser("invoke", help="send images to an endpoint, print its detections")
    invoke_p.add_argument("endpoint_name")
    invoke_p.add_argument("images", nargs="+", metavar="IMAGE", help="JPEG or PNG files")
    invoke_p.add_argument("--score-threshold", type=float,
                          help="drop weaker detections (the endpoint's default otherwise)")
    sub.add_parser("endpoints", help="list the deployment's endpoints: status, instances, "
                   "hourly price class, age, idle alarm")
    report_p = sub.add_parser("report", help="a finished training job's evaluation report (from "
                              "its model.tar.gz): print its per-class table, write its files")
    report_p.add_argument("job_name")
    report_p.add_argument("--out", help="where report.json and its pictures go (default: "
                          f"${evaluation_report.ROOT_ENV} or {evaluation_report.DEFAULT_ROOT}, "
                          "then /<job>)")
    sub.add_parser("warm-pools", help="list the deployment's training jobs whose warm pool is "
                   "kept now: instances, hourly price class, hours kept, when it ends")
    release_p = sub.add_parser("release-warm-pool", help="end a finished job's warm pool now "
                               "(stopping a job does not); its instances stop billing")
    release_p.add_argument("job_name")
    return p


def _deploy(args, deployment, boto_session) -> None:
    options = deploy.DeployOptions(
        job_name=args.job, endpoint_name=args.endpoint_name, instance_type=args.instance_type,
        instance_count=args.instance_count, min_instances=args.min_instances,
        max_instances=args.max_instances, target_invocations=args.target_invocations,
        require_gpu=not args.allow_cpu, data_capture_percent=args.data_capture,
        idle_hours=None if args.no_idle_alarm else args.idle_hours)
    plan = deploy.plan(deployment, options, boto_session)
    for line in deploy.describe_plan(plan):
        print(line, file=sys.stderr)
    if args.dry_run:
        print(json.dumps(plan.requests(), indent=1))
        return
    result = deploy.deploy(plan, boto_session, echo=lambda line: print(line, file=sys.stderr),
                           rollback_on_failure=not args.keep_on_failure)
    print(f"endpoint {plan.name} is InService and costs its instances' hourly price until "
          f"deleted: python -m maskrcnn_launcher delete-endpoint {plan.name}", file=sys.stderr)
    print(json.dumps(result, indent=1))


def _invoke(args, boto_session) -> None:
    runtime = boto_session.client("sagemaker-runtime")
    answers = {}
    for path in args.images:
        try:
            with open(path, "rb") as f:
                body = f.read()
        except OSError as error:
            raise deploy.DeployRequestError(f"cannot read image {path}: {error}") from None
        answers[path] = deploy.invoke(runtime, args.endpoint_name, body,
                                      score_threshold=args.score_threshold)
    print(json.dumps(answers, indent=1))


def _follow(boto_session, job_name: str) -> None:
    job = follow.wait_for_job(boto_session.client("sagemaker"), job_name)
    lines = list(follow.log_lines(boto_session.client("logs"), job_name))
    for line in lines:
        print(line)
    print(json.dumps({"job": job_name, "status": job["TrainingJobStatus"],
                      "final_metrics": follow.final_metrics(job),
                      "metrics_from_log": follow.metrics_from_lines(lines)}, indent=1))


def run(args) -> None:
    if args.command == "invoke":  # refused before anything is read or sent
        deploy.check_score_threshold(args.score_threshold)
    deployment, boto_session = settings.connect(args.ssm_path)
    if args.command == "launch":
        from maskrcnn_launcher import jobs, submit  # the SDK is imported only to launch

        options = LaunchOptions(
            data_source=args.data_source, dataset=args.dataset, init_from=args.init_from,
            instance_type=args.instance_type,
            instance_count=args.instances, distribution=args.distribution,
            processes_per_host=args.processes_per_host,
            hyperparameters=dict(args.hp), use_spot=args.spot, max_run_hours=args.max_run_hours,
            volume_size_gb=args.volume_gb, use_pretrained=not args.no_pretrained,
            run_name=args.run_name, input_mode=args.input_mode,
            keep_alive_seconds=args.keep_alive_seconds)
        launch = jobs.training_job(deployment, options, boto_session)
        sent = submit.send(launch, deployment, dry_run=args.dry_run)
        for line in jobs.describe_inputs(sent):
            print(line, file=sys.stderr if args.dry_run else sys.stdout)
        if args.dry_run:
            print(json.dumps(sent, indent=1, default=str))
            return
        name = sent["TrainingJobName"]
        print(f"started {name}; checkpoints of run {launch.base_job_name}: "
              f"{launch.checkpoint_s3_uri}")
        if args.wait:
            _follow(boto_session, name)
    elif args.command in ("stage-dataset", "stage-coco"):
        data_prep.stage_dataset(
            boto_session, deployment, args.dataset, wait=args.wait, dry_run=args.dry_run,
            val_fraction=args.val_fraction, split_seed=args.split_seed,
            crowd_as_instances=args.crowd_as_instances,
            boxes_without_mask=args.boxes_without_mask, strict=args.strict,
            stage_backbone=not args.no_backbone)
    elif args.command == "upload-export":
        data_prep.upload_import(boto_session.client("s3"), deployment, args.dataset, args.export,
                                echo=lambda line: print(line, file=sys.stderr))
    elif args.command == "datasets":
        print(json.dumps(data_prep.datasets(boto_session.client("s3"), deployment), indent=1))
    elif args.command == "sync-efs":
        data_prep.sync_to_efs(boto_session.client("datasync"), deployment)
    elif args.command == "fsx-status":
        print(json.dumps(data_prep.fsx_import_status(boto_session.client("fsx"), deployment),
                         indent=1))
    elif args.command == "follow":
        _follow(boto_session, args.job_name)
    elif args.command == "deploy":
        _deploy(args, deployment, boto_session)
    elif args.command == "delete-endpoint":
        deploy.delete(deployment, args.endpoint_name, boto_session)
    elif args.command == "invoke":
        _invoke(args, boto_session)
    elif args.command == "report":
        fetched = evaluation_report.fetch(deployment, args.job_name, boto_session, args.out)
        print("\n".join(evaluation_report.describe(fetched)
                        + evaluation_report.table(fetched.report)))
        for kind, path in fetched.pictures.items():
            print(f"{kind}: {path}")
    elif args.command == "warm-pools":
        found = warm_pools.warm_pools(boto_session.client("sagemaker"), deployment)
        for line in warm_pools.warm_pool_lines(found) or ["no warm pools kept"]:
            print(line, file=sys.stderr)
        print(json.dumps(found, indent=1))
    elif args.command == "release-warm-pool":
        pool = warm_pools.release(boto_session.client("sagemaker"), deployment, args.job_name)
        print(f"released the warm pool of {args.job_name}: {pool['instance_count']} x "
              f"{pool['instance_type']}, kept {pool['kept_hours']:g} h", file=sys.stderr)
        print(json.dumps(pool, indent=1))
    elif args.command == "endpoints":
        found = deploy.endpoints(boto_session.client("sagemaker"), deployment,
                                 boto_session.client("cloudwatch"))
        for line in deploy.endpoint_lines(found) or ["no endpoints"]:
            print(line, file=sys.stderr)
        print("price classes per instance-hour: " + "; ".join(
            f"{c} {what}" for c, what in instances.PRICE_CLASSES.items()), file=sys.stderr)
        print(json.dumps(found, indent=1))


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    try:
        run(args)
    except (LaunchRequestError, instances.InstanceTypeError, settings.SettingsError,
            deploy.DeployRequestError, job_io.DatasetNameError,
            warm_pools.WarmPoolRequestError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except (deploy.DeployError, deploy.InvokeError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
