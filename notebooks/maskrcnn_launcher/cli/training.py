"""The training flow's commands: launch, tune, follow, warm-pools, release-warm-pool."""

import argparse
import json
import sys

from maskrcnn_contract import metrics

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.runs import follow, lookup, tuning_jobs
from maskrcnn_launcher.training import tuning, warm_pools
from maskrcnn_launcher.training.options import (
    DATA_SOURCES,
    DISTRIBUTIONS,
    INPUT_MODES,
    MAX_KEEP_ALIVE_SECONDS,
    LaunchOptions,
    LaunchRequestError,
)

REFUSALS = (LaunchRequestError, instances.InstanceTypeError, warm_pools.WarmPoolRequestError)
FAILURES = ()


def _hyperparameter(text: str):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE, e.g. max_steps=1000")
    return key, value


def _add_launch_arguments(launch) -> None:
    """What a launch and a tuning job share: the launch's options."""
    defaults = LaunchOptions()
    launch.add_argument("--data-source", choices=DATA_SOURCES, default=defaults.data_source)
    launch.add_argument("--dataset", default=defaults.dataset,
                        help=f"the staged dataset to train on (default {defaults.dataset}; "
                        "`datasets` lists them, `stage-dataset` stages one)")
    launch.add_argument("--init-from", metavar="JOB_OR_S3_URI",
                        help="fine-tune: start from an earlier training job's checkpoints (its "
                        "name, a tuning job's name for its best candidate's, or their s3:// URI "
                        "below the checkpoint prefix); every weight of "
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
                        "checkpoints (default: <data source>-<random>, a new run); a tuning "
                        "job's name is <prefix>-<run name>, at most 32 characters")
    launch.add_argument("--mlflow", action=argparse.BooleanOptionalAction, default=None,
                        help="log the run (parameters, metrics, evaluation report, model) to the "
                        "deployment's MLflow tracking server; default: when the deployment has "
                        "one (maskrcnn:mlflow); --no-mlflow logs none (docs/experiments.md)")
    launch.add_argument("--mlflow-experiment", metavar="NAME",
                        help="the MLflow experiment the run is logged to (default: the dataset's "
                        "name; 1 to 500 characters)")
    launch.add_argument("--dry-run", action="store_true",
                        help="build and validate the request as it would be sent; send nothing")
    launch.add_argument("--wait", action="store_true", help="wait for the end, print metrics")


def add_commands(sub) -> None:
    _add_launch_arguments(sub.add_parser("launch", help="start a Mask R-CNN training job"))
    tune_p = sub.add_parser("tune", help="start a hyperparameter tuning job: the launch's "
                            "training job searched over ranges (docs/tuning.md)")
    _add_launch_arguments(tune_p)
    tuning_defaults = tuning.TuningOptions()
    tune_p.add_argument("--objective", default=tuning_defaults.objective,
                        help="the evaluation figure to optimize, one of: "
                        + ", ".join(metrics.OBJECTIVE_METRICS)
                        + f" (default {tuning_defaults.objective})")
    tune_p.add_argument("--range", action="append", default=[], dest="ranges",
                        metavar="NAME=MIN:MAX[:SCALING] | NAME=A|B",
                        help="a hyperparameter to search (repeatable; scaling Auto, Linear, "
                        "Logarithmic, ReverseLogarithmic); default: "
                        + "; ".join(r.describe() for r in tuning.DEFAULT_RANGES))
    tune_p.add_argument("--max-jobs", type=int, default=tuning_defaults.max_jobs)
    tune_p.add_argument("--max-parallel-jobs", type=int,
                        default=tuning_defaults.max_parallel_jobs)
    tune_p.add_argument("--strategy", default=tuning_defaults.strategy,
                        help=f"one of {', '.join(tuning.STRATEGIES)}")
    tune_p.add_argument("--early-stopping", default=tuning_defaults.early_stopping,
                        help=f"one of {', '.join(tuning.EARLY_STOPPING)}: Auto stops a candidate "
                        "whose objective falls behind the median of the earlier ones")
    follow_p = sub.add_parser("follow", help="wait for a job, print its log and metrics; for a "
                              "tuning job, its candidates (status, objective) and the best")
    follow_p.add_argument("job_name")
    sub.add_parser("warm-pools", help="list the deployment's training jobs whose warm pool is "
                   "kept now: instances, hourly price class, hours kept, when it ends")
    release_p = sub.add_parser("release-warm-pool", help="end a finished job's warm pool now "
                               "(stopping a job does not); its instances stop billing")
    release_p.add_argument("job_name")


def follow_tuning_job(boto_session, deployment, name: str) -> None:
    sagemaker = boto_session.client("sagemaker")
    last = tuning_jobs.wait(sagemaker, deployment, name,
                            echo=lambda line: print(line, file=sys.stderr))
    print(json.dumps(tuning_jobs.summary(last, tuning_jobs.candidates(sagemaker, name)),
                     indent=1))


def follow_any(args, deployment, boto_session) -> None:
    """A tuning job's candidates when the name is a tuning job's, else the training job."""
    if lookup.describe_tuning_job(boto_session.client("sagemaker"), deployment, args.job_name):
        follow_tuning_job(boto_session, deployment, args.job_name)
    else:
        follow_job(boto_session, args.job_name)


def follow_job(boto_session, job_name: str) -> None:
    job = follow.wait_for_job(boto_session.client("sagemaker"), job_name)
    lines = list(follow.log_lines(boto_session.client("logs"), job_name))
    for line in lines:
        print(line)
    print(json.dumps({"job": job_name, "status": job["TrainingJobStatus"],
                      "final_metrics": follow.final_metrics(job),
                      "metrics_from_log": follow.metrics_from_lines(lines)}, indent=1))


def _launch_options(args) -> LaunchOptions:
    return LaunchOptions(
        data_source=args.data_source, dataset=args.dataset, init_from=args.init_from,
        instance_type=args.instance_type,
        instance_count=args.instances, distribution=args.distribution,
        processes_per_host=args.processes_per_host,
        hyperparameters=dict(args.hp), use_spot=args.spot, max_run_hours=args.max_run_hours,
        volume_size_gb=args.volume_gb, use_pretrained=not args.no_pretrained,
        run_name=args.run_name, input_mode=args.input_mode,
        keep_alive_seconds=args.keep_alive_seconds, mlflow=args.mlflow,
        mlflow_experiment=args.mlflow_experiment)


def launch(args, deployment, boto_session) -> None:
    from maskrcnn_launcher.training import jobs, submit  # the SDK is imported only to launch

    # A dry run's stdout is the request alone (JSON): what the launch tells goes to stderr.
    job = jobs.training_job(deployment, _launch_options(args), boto_session,
                            echo=lambda line: print(line, file=sys.stderr if args.dry_run
                                                    else sys.stdout))
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


def tune(args, deployment, boto_session) -> None:
    ranges = tuple(tuning.parse_range(text) for text in args.ranges) or tuning.DEFAULT_RANGES
    options = tuning.TuningOptions(
        objective=args.objective, ranges=ranges, max_jobs=args.max_jobs,
        max_parallel_jobs=args.max_parallel_jobs, strategy=args.strategy,
        early_stopping=args.early_stopping)
    built = tuning.tuning_job(deployment, _launch_options(args), options, boto_session,
                              echo=lambda line: print(line, file=sys.stderr))
    sent = tuning.send(built, deployment, boto_session.client("sagemaker"), dry_run=args.dry_run)
    if args.dry_run:
        print(json.dumps(sent, indent=1, default=str))
        return
    name = sent["HyperParameterTuningJobName"]
    print(f"started tuning job {name}; follow it with `follow {name}`")
    if args.wait:
        follow_tuning_job(boto_session, deployment, name)


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
    "tune": tune,
    "follow": follow_any,
    "warm-pools": list_warm_pools,
    "release-warm-pool": release_warm_pool,
}
