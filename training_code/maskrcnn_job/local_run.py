"""Run the training job on this machine as the SageMaker container would (`make demo`).

    python -m maskrcnn_job.local_run [--ranks 2] [--hosts 1] [--hp KEY=VALUE ...]

1. lays out a SageMaker-like /opt/ml tree under the work directory (input/config/
   hyperparameters.json, resourceconfig.json, inputdataconfig.json; input/data/train; model/;
   output/; checkpoints/),
2. generates the synthetic shapes dataset in COCO format and converts it to TFRecords into the
   `train` channel (kept between runs while its parameters are unchanged),
3. starts N ranks of training_code/train.py (or --program) with mpirun, as the SageMaker training toolkit does
   (-mca orte_abort_on_non_zero_status 1: one failing rank ends the job); HOROVOD_CYCLE_TIME
   defaults to 20 ms here: with one core per rank, Horovod's background thread waking every
   few ms slows the step by ~25% (benchmarks/cpu_scaling.py),
4. prints the final metrics, and the failure file if the job failed; exits with the job's status.

Defaults: ResNet-18-FPN, 128 px, compact heads, 2 ranks: about 8-10 minutes on 2 CPU cores
(figures in training_code/README.md).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from maskrcnn_contract import hyperparameters, job_io, metrics

# The container's /opt/ml/code: train.py beside this package.
CODE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_PROGRAM = os.path.join(CODE_DIR, "train.py")

# What the demo trains with; every key can be overridden with --hp KEY=VALUE.
LOCAL_HYPERPARAMETERS = {
    "backbone": "resnet18",
    "model_preset": "compact",
    "image_size": 128,
    "images_per_gpu": 2,
    "base_learning_rate": 0.01,
    "warmup_steps": 50,
    "epochs": 12,
    "lr_decay_epochs": "10",
    "mixed_precision": False,
    "eval_every_epochs": 4,
    "checkpoint_every_steps": 200,
    "log_every_steps": 50,
    "max_instances": 8,
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default="build/local-run",
                        help="where the /opt/ml tree and the dataset go (build/local-run)")
    parser.add_argument("--ranks", type=int, default=2, help="processes started by mpirun (2)")
    parser.add_argument("--hosts", type=int, default=1,
                        help="emulated hosts, each with its own /opt/ml tree (1)")
    parser.add_argument("--train-images", type=int, default=400,
                        help="synthetic training images (400)")
    parser.add_argument("--val-images", type=int, default=50,
                        help="synthetic validation images (50)")
    parser.add_argument("--image-size", type=int, default=128,
                        help="synthetic image side in pixels, also the model input size (128)")
    parser.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE",
                        help="override a hyperparameter (repeatable); see training_code/README.md")
    parser.add_argument("--resume", action="store_true",
                        help="keep checkpoints/ of the previous run and resume from the latest")
    parser.add_argument("--timeout", type=int, default=3600,
                        help="seconds before the job is stopped (3600)")
    parser.add_argument("--program", default=TRAIN_PROGRAM,
                        help="the program each rank runs (training_code/train.py)")
    return parser.parse_args(argv)


def _hyperparameters(args) -> dict:
    values = dict(LOCAL_HYPERPARAMETERS, image_size=args.image_size)
    cores = os.cpu_count() or 1
    values["threads_per_rank"] = max(1, cores // args.ranks)
    for item in args.hp:
        if "=" not in item:
            raise SystemExit(f"--hp {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        values[key] = value
    hyperparameters.parse(values)  # fail here, before any work, on a bad name or value
    # SageMaker hands every hyperparameter to the container as a string.
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items()}


def _write_json(path, payload):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1)


def _prepare_dataset(args, work_dir: str, channel: str) -> None:
    """Synthetic COCO -> TFRecords into the train channel, unless already there."""
    stamp = {"train": args.train_images, "val": args.val_images, "size": args.image_size,
             "seed": 0}
    stamp_file = os.path.join(channel, "synthetic.json")
    if os.path.exists(stamp_file):
        with open(stamp_file, encoding="utf-8") as f:
            if json.load(f) == stamp:
                print(f"dataset: reusing {channel}")
                return
    from maskrcnn_job import coco_to_tfrecord, synthetic_coco

    coco_dir = os.path.join(work_dir, "coco-synthetic")
    shutil.rmtree(coco_dir, ignore_errors=True)
    shutil.rmtree(channel, ignore_errors=True)
    started = time.time()
    synthetic_coco.generate(coco_dir, args.train_images, args.val_images, args.image_size)
    coco_to_tfrecord.convert_coco_dir(coco_dir, channel, workers=1)
    _write_json(stamp_file, stamp)
    print(f"dataset: generated and converted in {time.time() - started:.0f} s -> {channel}")


def _host_names(count: int) -> list:
    return [f"algo-{i + 1}" for i in range(count)]


def _opt_ml(work_dir: str, host: str) -> str:
    """algo-1 keeps the plain name: a one-host run has one tree, <work>/opt_ml."""
    return os.path.join(work_dir, "opt_ml" if host == "algo-1" else f"opt_ml-{host}")


def prepare_layout(args, work_dir: str) -> list:
    """One /opt/ml tree per emulated host; returns the SM_* environment of each host."""
    hosts = _host_names(args.hosts)
    hps = _hyperparameters(args)
    train = job_io.TRAIN_CHANNEL
    shared_channel = os.path.join(_opt_ml(work_dir, "algo-1"), "input", "data", train)
    environments = []
    for host in hosts:
        opt_ml = _opt_ml(work_dir, host)
        config = os.path.join(opt_ml, "input", "config")
        for sub in ("model", "output") + (() if args.resume else ("checkpoints",)):
            shutil.rmtree(os.path.join(opt_ml, sub), ignore_errors=True)
        for sub in ("model", "output/data", "checkpoints"):
            os.makedirs(os.path.join(opt_ml, sub), exist_ok=True)
        _write_json(os.path.join(config, "hyperparameters.json"), hps)
        _write_json(os.path.join(config, "resourceconfig.json"), {
            "current_host": host, "hosts": hosts, "network_interface_name": "lo"})
        _write_json(os.path.join(config, "inputdataconfig.json"), {
            train: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}})
        channel = os.path.join(opt_ml, "input", "data", train)
        if host == "algo-1":
            _prepare_dataset(args, work_dir, channel)
        elif not os.path.islink(channel):
            # Every host sees the same (fully replicated) channel.
            shutil.rmtree(channel, ignore_errors=True)
            os.makedirs(os.path.dirname(channel), exist_ok=True)
            os.symlink(shared_channel, channel)
        environments.append({
            "OPT_ML_ROOT": opt_ml,
            f"SM_CHANNEL_{train.upper()}": channel,
            "SM_MODEL_DIR": os.path.join(opt_ml, "model"),
            "SM_OUTPUT_DATA_DIR": os.path.join(opt_ml, "output", "data"),
            "SM_HOSTS": json.dumps(hosts),
            "SM_CURRENT_HOST": host,
            "SM_NUM_GPUS": "0",
            "SM_HPS": json.dumps(hps),
        })
    return environments


def mpirun_command(ranks_per_host: int, host_environments: list, program: str) -> list:
    """mpirun as the SageMaker toolkit builds it; emulated hosts become MPMD app contexts, each
    with its own /opt/ml tree, so ranks 0..n-1 run on algo-1, the next n on algo-2, ..."""
    command = ["mpirun", "--bind-to", "none",
               "-mca", "orte_abort_on_non_zero_status", "1", "-mca", "btl_tcp_if_include", "lo"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    if ranks_per_host * len(host_environments) > (os.cpu_count() or 1):
        # Only when needed: oversubscribed, Open MPI yields the CPU while it waits, which
        # doubled the step time of 2 ranks on 2 cores (benchmarks/cpu_scaling.py).
        command.append("--oversubscribe")
    for index, host_env in enumerate(host_environments):
        if index:
            command.append(":")
        command += ["-np", str(ranks_per_host)]
        for name, value in sorted(host_env.items()):
            command += ["-x", f"{name}={value}"]
        command += ["-x", "PYTHONUNBUFFERED=1", "-x", "TF_CPP_MIN_LOG_LEVEL",
                    "-x", f"HOROVOD_CYCLE_TIME={os.environ.get('HOROVOD_CYCLE_TIME', '20')}",
                    sys.executable, program]
    return command


def _print_failures(host_environments: list) -> None:
    for host_env in host_environments:
        failure = os.path.join(host_env["OPT_ML_ROOT"], "output", "failure")
        if os.path.exists(failure):
            with open(failure, encoding="utf-8") as f:
                print(f"failure ({host_env['SM_CURRENT_HOST']}):\n" + f.read())


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.ranks % args.hosts:
        raise SystemExit(f"--ranks {args.ranks} is not a multiple of --hosts {args.hosts}")
    started = time.time()
    work_dir = os.path.abspath(args.work_dir)
    host_environments = prepare_layout(args, work_dir)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    command = mpirun_command(args.ranks // args.hosts, host_environments,
                             os.path.abspath(args.program))
    print("running:", " ".join(command), flush=True)
    final = {}
    pattern = re.compile(r"^(eval/\S+): (\S+)$")
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, bufsize=1)
    # A watchdog, not a check per line: a hung job prints nothing.
    watchdog = threading.Timer(args.timeout, process.kill)
    watchdog.start()
    try:
        for line in process.stdout:
            sys.stdout.write(line)
            match = pattern.match(line.strip())
            if match:
                final[match.group(1)] = float(match.group(2))
        status = process.wait()
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        watchdog.cancel()
    if not watchdog.is_alive() and time.time() - started >= args.timeout:
        print(f"local run stopped: it ran past --timeout {args.timeout} s")
    sys.stdout.flush()
    print(f"\nlocal run finished in {time.time() - started:.0f} s with exit status {status}")
    if status != 0:
        _print_failures(host_environments)
        return status or 1
    for name in ("eval/bbox_AP", "eval/bbox_AP50", "eval/segm_AP", "eval/segm_AP50"):
        if name in final:
            print(metrics.format_line(name, final[name]))
    print(f"SavedModel: {os.path.join(host_environments[0]['SM_MODEL_DIR'], '1')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
