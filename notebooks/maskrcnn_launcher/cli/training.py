"""The training flow's commands: launch, follow, warm-pools, release-warm-pool."""

import argparse
import json
import sys

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.runs import follow
from maskrcnn_launcher.training import warm_pools
from maskrcnn_launcher.training.options import (DATA_SOURCES, DISTRIBUTIONS, INPUT_MODES,
                                                MAX_KEEP_ALIVE_SECONDS, LaunchOptions,
                                                LaunchRequestError)

REFUSALS = (LaunchRequestError, instances.InstanceTypeError, warm_pools.WarmPoolRequestError)
FAILURES = ()


def _hyperparameter(text: str):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE, e.g. max_steps=1000")
    return key, value


def add_commands(sub) -> None:
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
    follow_p = sub.add_parser("follow", help="wait for a job, print its log and metrics")
    follow_p.add_argument("job_name")
    sub.add_parser("warm-pools", help="list the deployment's training jobs whose warm pool is "
                   "kept now: instances, hourly price class, hours kept, when it ends")
    release_p = sub.add_parser("release-warm-pool", help="end a finished job's warm pool now "
                               "(stopping a job does not); its instances stop billing")
    release_p.add_argument("job_name")


def follow_job(boto_session, job_name: str) -> None:
    job = follow.wait_for_job(boto_session.client("sagemaker"), job_name)
    lines = list(follow.log_lines(boto_session.client("logs"), job_name))
    for line in lines:
        print(line)
    print(json.dumps({"job": job_name, "status": job["TrainingJobStatus"],
                      "final_metrics": follow.final_metrics(job),
                      "metrics_from_log": follow.metrics_from_lines(lines)}, indent=1))


def launch(args, deployment, boto_session) -> None:
    from maskrcnn_launcher.training import jobs, submit  # the SDK is imported only to launch

    options = LaunchOptions(
        data_source=args.data_source, dataset=args.dataset, init_from=args.init_from,
        instance_type=args.instance_type,
        instance_count=args.instances, distribution=args.distribution,
        processes_per_host=args.processes_per_host,
        hyperparameters=dict(args.hp), use_spot=args.spot, max_run_hours=args.max_run_hours,
        volume_size_gb=args.volume_gb, use_pretrained=not args.no_pretrained,
        run_name=args.run_name, input_mode=args.input_mode,
        keep_alive_seconds=args.keep_alive_seconds)
    job = jobs.training_job(deployment, options, boto_session)
    sent = submit.send(job, deployment, dry_run=args.dry_run)
    for line in jobs.describe_inputs(sent):
        print(line, file=sys.stderr if args.dry_run else sys.stdout)
    if args.dry_run:
        print(json.dumps(sent, indent=1, default=str))
        return
    name = sent["TrainingJobName"]
    print(f"started {name}; checkpoints of run {job.base_job_name}: "
          f"{job.checkpoint_s3_uri}")
    if args.wait:
        follow_job(boto_session, name)


def list_warm_pools(args, deployment, boto_session) -> None:
    found = warm_pools.warm_pools(boto_session.client("sagemaker"), deployment)
    for line in warm_pools.warm_pool_lines(found) or ["no warm pools kept"]:
        print(line, file=sys.stderr)
    print(json.dumps(found, indent=1))


def release_warm_pool(args, deployment, boto_session) -> None:
    pool = warm_pools.release(boto_session.client("sagemaker"), deployment, args.job_name)
    print(f"released the warm pool of {args.job_name}: {pool['instance_count']} x "
          f"{pool['instance_type']}, kept {pool['kept_hours']:g} h", file=sys.stderr)
    print(json.dumps(pool, indent=1))


COMMANDS = {
    "launch": launch,
    "follow": lambda args, deployment, boto_session: follow_job(boto_session, args.job_name),
    "warm-pools": list_warm_pools,
    "release-warm-pool": release_warm_pool,
}
