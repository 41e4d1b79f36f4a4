"""Run the training job on this machine as the SageMaker container would (`make demo`).

1. lays out a SageMaker-like /opt/ml tree under the work directory (input/config/
   hyperparameters.json, resourceconfig.json, inputdataconfig.json; input/data/train; model/;
   output/; checkpoints/),
2. generates the synthetic shapes dataset in COCO format and converts it to TFRecords into the
   `train` channel (kept between runs while its parameters are unchanged),
3. starts N ranks of training_code/train.py with mpirun, as the SageMaker training toolkit does
   (-mca orte_abort_on_non_zero_status 1: one failing rank ends the job),
4. prints the final metrics, and the failure file if the job failed; exits with the job's status.

Defaults reproduce shared/NOTES.md §7 (ResNet-18-FPN, 128 px, compact heads, 2 ranks): about
10-15 minutes on 2 CPU cores, mask AP around 0.3 on the synthetic val set.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from maskrcnn_job import hyperparameters, metrics  # noqa: E402  (pure Python)

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


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default="build/local-run",
                        help="where the /opt/ml tree and the dataset go (build/local-run)")
    parser.add_argument("--ranks", type=int, default=2, help="processes started by mpirun (2)")
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


def _layout(args, work_dir: str) -> dict:
    """The /opt/ml tree and the SM_* environment the toolkit would give the program."""
    opt_ml = os.path.join(work_dir, "opt_ml")
    config = os.path.join(opt_ml, "input", "config")
    channel = os.path.join(opt_ml, "input", "data", "train")
    for sub in ("model", "output") + (() if args.resume else ("checkpoints",)):
        shutil.rmtree(os.path.join(opt_ml, sub), ignore_errors=True)
    for sub in ("model", "output/data", "checkpoints"):
        os.makedirs(os.path.join(opt_ml, sub), exist_ok=True)
    hps = _hyperparameters(args)
    _write_json(os.path.join(config, "hyperparameters.json"), hps)
    _write_json(os.path.join(config, "resourceconfig.json"), {
        "current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "lo"})
    _write_json(os.path.join(config, "inputdataconfig.json"), {
        "train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}})
    _prepare_dataset(args, work_dir, channel)
    return {
        "OPT_ML_ROOT": opt_ml,
        "SM_CHANNEL_TRAIN": channel,
        "SM_MODEL_DIR": os.path.join(opt_ml, "model"),
        "SM_OUTPUT_DATA_DIR": os.path.join(opt_ml, "output", "data"),
        "SM_HOSTS": json.dumps(["algo-1"]),
        "SM_CURRENT_HOST": "algo-1",
        "SM_NUM_GPUS": "0",
        "SM_HPS": json.dumps(hps),
    }


def mpirun_command(ranks: int, env_names, program) -> list:
    """mpirun as the SageMaker toolkit builds it, for one host."""
    command = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none",
               "-mca", "orte_abort_on_non_zero_status", "1", "-mca", "btl_tcp_if_include", "lo"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    for name in env_names:
        command += ["-x", name]
    return command + [sys.executable, program]


def main(argv=None) -> int:
    args = _parse_args(argv)
    started = time.time()
    work_dir = os.path.abspath(args.work_dir)
    sm_env = _layout(args, work_dir)
    env = dict(os.environ, **sm_env, PYTHONUNBUFFERED="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    command = mpirun_command(args.ranks, sorted(sm_env) + ["PYTHONUNBUFFERED",
                                                           "TF_CPP_MIN_LOG_LEVEL"],
                             os.path.join(HERE, "train.py"))
    print("running:", " ".join(command), flush=True)
    final = {}
    pattern = re.compile(r"^(eval/\S+): (\S+)$")
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, bufsize=1)
    try:
        for line in process.stdout:
            sys.stdout.write(line)
            match = pattern.match(line.strip())
            if match:
                final[match.group(1)] = float(match.group(2))
            if time.time() - started > args.timeout:
                raise TimeoutError(f"job ran past --timeout {args.timeout} s")
        status = process.wait()
    except BaseException:
        process.kill()
        process.wait()
        raise
    failure = os.path.join(sm_env["OPT_ML_ROOT"], "output", "failure")
    print(f"\nlocal run finished in {time.time() - started:.0f} s with exit status {status}")
    if status != 0:
        if os.path.exists(failure):
            with open(failure, encoding="utf-8") as f:
                print("failure:\n" + f.read())
        return status or 1
    for name in ("eval/bbox_AP", "eval/bbox_AP50", "eval/segm_AP", "eval/segm_AP50"):
        if name in final:
            print(metrics.format_line(name, final[name]))
    print(f"SavedModel: {os.path.join(sm_env['SM_MODEL_DIR'], '1')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
