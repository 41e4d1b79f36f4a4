"""Run the training job on this machine as SageMaker would (`make demo`).

    python -m maskrcnn_local.local_run [--distribution horovod] [--ranks 2] [--hosts 1]
                                     [--hp KEY=VALUE ...]

Two ways, by --hosts:
- one host (the default; needs no root): lays out a SageMaker-like /opt/ml tree under the work
  directory and starts training_code/train.py (or --program) as the toolkit would: with
  `--distribution horovod`, the ranks with mpirun and the options the SageMaker training toolkit
  uses (-mca orte_abort_on_non_zero_status 1: one failing rank ends the job); with
  multi_worker_mirrored or parameter_server, once (one worker; under parameter_server the job
  then starts its chief, worker and PS tasks on this host). The job finds its tree through
  OPT_ML_ROOT.
- several hosts (root only): emulated hosts, each with its own network, /opt/ml, sshd and
  processes, running the real SageMaker training toolkit over the code as the image holds it
  (maskrcnn_local/emulated_hosts.py), with the image's Python (.venv-image). The hosts'
  /opt/ml/model are then aggregated into <work-dir>/model as SageMaker packs its model.tar.gz (a
  name two hosts wrote fails the run: docs/aws-rules.md SM-10), and that is what is drawn from.
Both generate the synthetic shapes dataset in COCO format and convert it to TFRecords for the
`train` channel (kept between runs while its parameters are unchanged), and print the job's output
and the failure reason if the job failed, or else the final metrics and the path of the picture of
the model's predictions last; the exit status is the job's, or 1 when it exited 0 without
exporting a SavedModel (--no-model-expected: a program that exports none on purpose). On one
host the console shows one progress line per log step and the job appends its metric lines to
<work-dir>/metrics.txt; emulated hosts keep them in the job's output, where SageMaker's regexes
read them.

HOROVOD_CYCLE_TIME defaults to 10 ms here (HOROVOD_CYCLE_TIME in the environment overrides it).
With one core per rank, Horovod's background thread waking every millisecond or so takes CPU time
from the step; a long cycle delays each batch-norm allreduce of batch_norm=sync, one after the
other (docs/batch-norm.md, "The cost", says how to measure both).

Defaults: ResNet-18-FPN, 128 px, compact heads, 2 ranks, batch_norm=per_rank (there is no
pretrained backbone here, and on these CPUs sync's allreduce per layer doubles the step:
docs/batch-norm.md, "Local runs"); the accuracy they reach: docs/benchmarks.md, "`make demo`'s
accuracy".
"""

import argparse
import contextlib
import functools
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from maskrcnn_contract import hyperparameters, job_io, labeling, metrics, tracking

from maskrcnn_job import job  # pure Python until it runs the job
from maskrcnn_job.data import layout

# The container's /opt/ml/code: train.py beside this package.
CODE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_PROGRAM = os.path.join(CODE_DIR, "train.py")
REPO = os.path.dirname(CODE_DIR)
# The image's Python (Makefile: the DLC stand-in plus the Dockerfile's layer).
IMAGE_PYTHON = os.path.join(REPO, ".venv-image", "bin", "python")

DEFAULT_HOROVOD_CYCLE_TIME = "10"  # ms; see the docstring

# A one-host run's metric lines (the job's METRICS_FILE_ENV), under the work directory.
METRICS_FILE = "metrics.txt"

# A one-host run's MLflow experiment when --mlflow-tracking-uri names a server.
LOCAL_EXPERIMENT = "local-runs"

# What the job exports at its end: <model dir>/1/saved_model.pb (maskrcnn_job/serving/export.py).
SAVED_MODEL_VERSION = "1"
SAVED_MODEL_FILE = "saved_model.pb"

# What the run prints last, before the predictions' path.
FINAL_METRICS = ("eval/bbox_AP", "eval/bbox_AP50", "eval/segm_AP", "eval/segm_AP50")

# A local run's batch norm unless --hp batch_norm says otherwise (there is no pretrained backbone
# for the job's default, frozen): each rank's own images, no allreduce per layer.
LOCAL_BATCH_NORM = "per_rank"

# What the demo trains with; every key can be overridden with --hp KEY=VALUE.
LOCAL_HYPERPARAMETERS = {
    "backbone": "resnet18",
    "model_preset": "compact",
    "image_size": 128,
    "images_per_gpu": 2,
    # x 2 ranks: a peak of 0.08 for 4 images a step, which a from-scratch ResNet-18 takes
    # (docs/benchmarks.md, "`make demo`'s accuracy").
    "base_learning_rate": 0.04,
    "warmup_steps": 50,
    # 1,600 steps on 1,600 images (--train-images): on fewer images the same steps overfit
    # (docs/local-runs.md, "The demo's settings").
    "epochs": 4,
    "lr_decay_epochs": "3.4",
    "mixed_precision": False,
    "eval_every_epochs": 2,
    "checkpoint_every_steps": 200,
    "log_every_steps": 50,
    "max_instances": 8,
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default="build/local-run",
                        help="where the /opt/ml tree and the dataset go (build/local-run)")
    parser.add_argument("--distribution", choices=hyperparameters.DISTRIBUTIONS, default="horovod",
                        help="how the job is distributed (horovod); tf.distribute strategies run "
                             "one process per host")
    parser.add_argument("--ranks", type=int, default=None,
                        help="horovod: processes started by mpirun (2 on one host, else one per "
                             "host); the strategies: one per host")
    parser.add_argument("--hosts", type=int, default=1,
                        help="hosts; more than 1 emulates them under the real SageMaker toolkit "
                             "(root only) (1)")
    parser.add_argument("--train-images", type=int, default=1600,
                        help="synthetic training images (1600)")
    parser.add_argument("--val-images", type=int, default=50,
                        help="synthetic validation images (50)")
    parser.add_argument("--image-size", type=int, default=128,
                        help="the model input size in pixels (128); the synthetic images' sizes "
                             "range from half to 4x it (--layout real)")
    parser.add_argument("--dataset", metavar="DIR",
                        help="train on your own data: a COCO export (CVAT's COCO 1.0, Label "
                        "Studio's COCO, one annotations file with its images, COCO 2017's layout, "
                        "or a .zip of one), converted as the staging job converts it; without "
                        "it, the synthetic set")
    parser.add_argument("--init-from", metavar="DIR",
                        help="fine-tune from a previous local run: its checkpoint directory "
                        "(<work dir>/opt_ml/checkpoints) or its model directory beside it; "
                        "the latest checkpoint and its run_info.json become the init channel")
    parser.add_argument("--val-fraction", type=float, default=0.2,
                        help="--dataset with one annotations file: the share of images for val")
    parser.add_argument("--split-seed", type=int, default=0, help="the seed of that split (0)")
    parser.add_argument("--crowd-as-instances", action="store_true",
                        help="--dataset: train crowd annotations (iscrowd=1) as instances (CVAT "
                        "marks every mask so)")
    parser.add_argument("--boxes-without-mask", choices=labeling.BOXES_WITHOUT_MASK_CHOICES,
                        default=labeling.REFUSE,
                        help="--dataset: annotations that are boxes without a mask (a rectangle "
                        "tool's, \"segmentation\": []): refuse the export (default), "
                        f"{labeling.LEAVE_OUT} (named in the notes), or {labeling.BOX_AS_MASK}")
    parser.add_argument("--difficulty", choices=("hard", "easy"), default="hard",
                        help="the synthetic set: hard (occlusion, crowds, textures, tiny objects, "
                             "6 look-alike classes) or easy (3 shapes that never overlap) (hard)")
    parser.add_argument("--layout", choices=("real", "square"), default="real",
                        help="the synthetic images' sizes: real (sizes, aspect ratios, grayscale, "
                             "PNG and EXIF-turned JPEGs as real exports hold them) or square "
                             "(every image --image-size x --image-size, RGB JPEG) (real)")
    parser.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE",
                        help="override a hyperparameter (repeatable); see training_code/README.md")
    parser.add_argument("--resume", action="store_true",
                        help="keep checkpoints/ of the previous run and resume from the latest")
    parser.add_argument("--timeout", type=int, default=3600,
                        help="seconds before the job is stopped (3600)")
    parser.add_argument("--program", default=TRAIN_PROGRAM,
                        help="the program each rank runs (training_code/train.py); on emulated "
                             "hosts it is copied into /opt/ml/code beside train.py")
    parser.add_argument("--no-model-expected", action="store_true",
                        help="the program exports no SavedModel on purpose (a timing program): "
                             "without this, a run that exits 0 having exported none fails")
    parser.add_argument("--container-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable of the emulated hosts' containers "
                             "(repeatable); one host passes its own environment on")
    parser.add_argument("--mlflow-tracking-uri", metavar="URI",
                        help="log the run to this MLflow tracking server, as a launch's request "
                        "names the deployment's (the job's MLFLOW_TRACKING_URI): an http(s):// "
                        "URL, or a SageMaker tracking server's ARN with AWS credentials; one "
                        "host only")
    parser.add_argument("--mlflow-experiment", metavar="NAME", default=LOCAL_EXPERIMENT,
                        help=f"the MLflow experiment of --mlflow-tracking-uri ({LOCAL_EXPERIMENT})")
    parser.add_argument("--draw", type=int, default=4, metavar="N",
                        help="after training, draw the model's predictions for N validation "
                             "images beside their ground truth into one PNG (4; 0: none)")
    parser.add_argument("--image-python", default=IMAGE_PYTHON,
                        help="the Python of the emulated hosts (.venv-image/bin/python)")
    args = parser.parse_args(argv)
    if args.ranks is None:
        args.ranks = 2 if args.distribution == "horovod" and args.hosts == 1 else args.hosts
    elif args.distribution != "horovod" and args.ranks != args.hosts:
        parser.error(f"--ranks {args.ranks} with --distribution {args.distribution}: the "
                     "strategies run one process per host; leave --ranks out or use --hosts")
    if args.hosts < 1 or args.ranks < 1:
        parser.error(f"--hosts {args.hosts} and --ranks {args.ranks} must be at least 1")
    if args.ranks % args.hosts:
        parser.error(f"--ranks {args.ranks} is not a multiple of --hosts {args.hosts}")
    for item in args.container_env:
        if "=" not in item:
            parser.error(f"--container-env {item!r}: expected KEY=VALUE")
    if args.dataset is not None and not os.path.exists(args.dataset):
        parser.error(f"--dataset {args.dataset!r} does not exist: expected a COCO export's "
                     "directory or .zip")
    if args.init_from is not None:
        if args.hosts > 1:
            parser.error("--init-from: one host only (the emulated hosts get the train channel)")
        if _init_checkpoint_dir(args.init_from) is None:
            parser.error(f"--init-from {args.init_from!r}: no checkpoint (ckpt-N.index) in it or "
                         "in the checkpoints directory beside it")
    if args.mlflow_tracking_uri is not None:
        if args.hosts > 1:
            parser.error("--mlflow-tracking-uri: one host only (the emulated hosts reach no "
                         "server on this machine)")
        if not args.mlflow_tracking_uri.startswith(("http://", "https://")) and \
                not tracking.is_tracking_server_arn(args.mlflow_tracking_uri):
            parser.error(f"--mlflow-tracking-uri {args.mlflow_tracking_uri!r}: expected an "
                         "http(s):// URL or a SageMaker MLflow tracking server's ARN")
        for problem in tracking.experiment_name_problems(args.mlflow_experiment):
            parser.error(f"--mlflow-experiment: {problem}")
    if not 0.0 < args.val_fraction < 1.0:
        parser.error(f"--val-fraction {args.val_fraction}: expected a number between 0 and 1")
    return args


def _hyperparameters(args) -> dict:
    values = dict(LOCAL_HYPERPARAMETERS, image_size=args.image_size,
                  distribution=args.distribution)
    cores = os.cpu_count() or 1
    values["threads_per_rank"] = max(1, cores // args.ranks)
    for item in args.hp:
        if "=" not in item:
            raise SystemExit(f"--hp {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        if key == "distribution" and value != args.distribution:
            raise SystemExit(f"--hp distribution={value} contradicts --distribution "
                             f"{args.distribution}: use --distribution")
        values[key] = value
    if "batch_norm" not in values:
        # The job's default, frozen, needs a pretrained backbone, and there is none here. A
        # launch without one synchronizes (batch_norm_without_pretrained); here, one core per
        # rank, sync's allreduce per layer doubles the step (docs/batch-norm.md, "Local runs").
        values["batch_norm"] = LOCAL_BATCH_NORM
        print(f"batch_norm: {LOCAL_BATCH_NORM} (the default, frozen, needs a pretrained backbone "
              "checkpoint, and this run has none; sync doubles a step on this machine's CPUs: "
              "docs/batch-norm.md, \"Local runs\")", flush=True)
    hyperparameters.parse(values)  # fail here, before any work, on a bad name or value
    # SageMaker hands every hyperparameter to the container as a string.
    return {k: hyperparameters.as_sent(v) for k, v in values.items()}


def _saved_model_dir(model_dir: str) -> str:
    return os.path.join(model_dir, SAVED_MODEL_VERSION)


def _exported(model_dir: str) -> bool:
    return os.path.isfile(os.path.join(_saved_model_dir(model_dir), SAVED_MODEL_FILE))


def _write_json(path, payload):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1)


def _already_converted(channel: str, stamp_file: str, stamp: dict) -> bool:
    """True (and says so) when `channel` holds a conversion of exactly `stamp`'s inputs."""
    if os.path.exists(stamp_file):
        with open(stamp_file, encoding="utf-8") as f:
            if json.load(f) == stamp:
                print(f"dataset: reusing {channel}")
                return True
    return False


def _convert_export(args, work_dir: str, channel: str) -> None:
    """--dataset: the export -> TFRecords into the train channel by the staging job's converter,
    unless this export was converted so already (its path, size and time, the split's options)."""
    from maskrcnn_job.data import coco_to_tfrecord

    path = os.path.abspath(args.dataset)
    stamp = {"dataset": path, "modified": os.path.getmtime(path),
             "val_fraction": args.val_fraction, "split_seed": args.split_seed,
             "crowd_as_instances": args.crowd_as_instances,
             "boxes_without_mask": args.boxes_without_mask}
    stamp_file = os.path.join(channel, "export.json")
    if _already_converted(channel, stamp_file, stamp):
        return
    shutil.rmtree(channel, ignore_errors=True)
    started = time.time()
    try:
        coco_to_tfrecord.convert_export(
            path, channel, name=os.path.basename(path.rstrip("/")), val_fraction=args.val_fraction,
            seed=args.split_seed, crowd_as_instances=args.crowd_as_instances, workers=1,
            work_dir=os.path.join(work_dir, "export"), boxes_without_mask=args.boxes_without_mask)
    except coco_to_tfrecord.ConversionError as error:
        print(f"error: --dataset {args.dataset}: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    _write_json(stamp_file, stamp)
    for note in layout.Channel(channel).read_info().notes:
        print(f"dataset note: {note}")
    print(f"dataset: {args.dataset} converted in {time.time() - started:.0f} s -> {channel}")


def _prepare_dataset(args, work_dir: str, channel: str) -> None:
    """Synthetic COCO (or the export of --dataset) -> TFRecords into the train channel, unless
    already there."""
    if args.dataset:
        _convert_export(args, work_dir, channel)
        return
    from maskrcnn_local import synthetic_coco

    stamp = {"train": args.train_images, "val": args.val_images, "size": args.image_size,
             "seed": 0, "difficulty": args.difficulty, "layout": args.layout,
             "generator": synthetic_coco.VERSION}
    stamp_file = os.path.join(channel, "synthetic.json")
    if _already_converted(channel, stamp_file, stamp):
        return
    from maskrcnn_job.data import coco_to_tfrecord

    coco_dir = os.path.join(work_dir, "coco-synthetic")
    shutil.rmtree(coco_dir, ignore_errors=True)
    shutil.rmtree(channel, ignore_errors=True)
    started = time.time()
    synthetic_coco.generate(coco_dir, args.train_images, args.val_images, args.image_size,
                            difficulty=args.difficulty, layout=args.layout)
    coco_to_tfrecord.convert_coco_dir(coco_dir, channel, workers=1)
    _write_json(stamp_file, stamp)
    print(f"dataset: generated and converted in {time.time() - started:.0f} s -> {channel}")


def _init_checkpoint_dir(path: str):
    """A local run's checkpoint directory: `path`, or the checkpoints beside its model dir."""
    for directory in (path, os.path.join(os.path.dirname(os.path.abspath(path)), "checkpoints")):
        if glob.glob(os.path.join(directory, "ckpt-*.index")):
            return directory
    return None


def _copy_init_channel(source: str, channel: str) -> None:
    """The latest checkpoint of `source` and its run_info.json, copied (the next run of the same
    work directory clears its checkpoints) into the init channel."""
    from maskrcnn_job.training.trainer import checkpoints_newest_first

    latest = checkpoints_newest_first(source)[0]
    shutil.rmtree(channel, ignore_errors=True)
    os.makedirs(channel)
    for path in glob.glob(latest + ".*") + [os.path.join(source, job_io.RUN_INFO)]:
        if os.path.isfile(path):
            shutil.copy(path, channel)
    print(f"init: {latest} -> {channel}")


def prepare_layout(args, work_dir: str) -> dict:
    """The one host's /opt/ml tree; returns the SM_* environment its ranks get."""
    hps = _hyperparameters(args)
    train = job_io.TRAIN_CHANNEL
    opt_ml = os.path.join(work_dir, "opt_ml")
    config = os.path.join(opt_ml, "input", "config")
    init = os.path.join(opt_ml, "input", "data", job_io.INIT_CHANNEL)
    if args.init_from:
        _copy_init_channel(_init_checkpoint_dir(args.init_from), init)
    else:
        shutil.rmtree(init, ignore_errors=True)
    for sub in ("model", "output") + (() if args.resume else ("checkpoints",)):
        shutil.rmtree(os.path.join(opt_ml, sub), ignore_errors=True)
    for sub in ("model", "output/data", "checkpoints"):
        os.makedirs(os.path.join(opt_ml, sub), exist_ok=True)
    _write_json(os.path.join(config, "hyperparameters.json"), hps)
    _write_json(os.path.join(config, "resourceconfig.json"), {
        "current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "lo"})
    _write_json(os.path.join(config, "inputdataconfig.json"), {
        name: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}
        for name in [train] + ([job_io.INIT_CHANNEL] if args.init_from else [])})
    channel = os.path.join(opt_ml, "input", "data", train)
    _prepare_dataset(args, work_dir, channel)
    return {
        "OPT_ML_ROOT": opt_ml,
        f"SM_CHANNEL_{train.upper()}": channel,
        "SM_MODEL_DIR": os.path.join(opt_ml, "model"),
        "SM_OUTPUT_DATA_DIR": os.path.join(opt_ml, "output", "data"),
        "SM_HOSTS": json.dumps(["algo-1"]),
        "SM_CURRENT_HOST": "algo-1",
        "SM_NUM_GPUS": "0",
        "SM_HPS": json.dumps(hps),
    }


def gpu_device() -> bool:
    """Whether this machine has an NVIDIA GPU device."""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def tensorflow_environment() -> dict:
    """What TensorFlow reads before it is imported, for this machine's processes: the job's (the
    ranks, the emulated hosts' containers) and this one's (the drawing). A value already in the
    environment wins. The job sets what also holds on SageMaker itself (maskrcnn_job/job.py)."""
    values = {
        # TensorFlow's C++ INFO and WARNING lines (and absl's, through job.quiet_tensorflow); its
        # ERROR lines stay.
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    if not gpu_device():
        # No GPU here: TensorFlow creates only its CPU device, instead of initializing CUDA and
        # logging the failed cuInit as an error. Only here: on SageMaker the GPUs are the point.
        values["TF_ENABLED_DEVICE_TYPES"] = "CPU"
    # No setting reaches the lines TensorFlow 2.21 logs through absl as its libraries load:
    # STARTUP_LINES drops them from what is printed here.
    return {name: os.environ.get(name, value) for name, value in values.items()}


# absl's prefix, as TensorFlow 2.21's libraries log before absl::InitializeLog() is called:
# severity, month and day, time, thread id ("I0000 00:00:1796647229.044019    9904 ").
_ABSL = r"[IWE]\d{4} \d\d:\d\d:[\d.]+ +\d+ "
# What TensorFlow prints in every process that no setting removes: the first three twice as it is
# imported, through absl, which TF_CPP_MIN_LOG_LEVEL does not reach, even at 3
# (tensorflow/tensorflow#100442); the last once, at the first step or prediction, an ERROR line,
# which the job's own setting of absl's level (job.quiet_tensorflow) keeps as it should. Exact
# lines, each safe to drop for the reason beside it; `_stream` drops these and echoes every other
# line (docs/local-runs.md, "TensorFlow's start-up lines"), and so does the drawing's stderr. The
# emulated hosts' logs keep every line.
STARTUP_LINES = {
    # Says that the absl lines after it go to stderr, where they go anyway: nothing about the job.
    "absl notice": r"WARNING: All log messages before absl::InitializeLog\(\) is called are "
                   r"written to STDERR",
    # oneDNN's CPU kernels are on, TensorFlow's default on x86 Linux; the round-off it warns of
    # is in every run's figures here (docs/benchmarks.md's spread was measured with it on).
    # TF_ENABLE_ONEDNN_OPTS=0 removes the line by turning oneDNN off: another computation.
    "oneDNN on": _ABSL + r"port\.cc:\d+\] oneDNN custom operations are on\. You may see slightly "
                 r"different numerical results due to floating-point round-off errors from "
                 r"different computation orders\. To turn them off, set the environment variable "
                 r"`TF_ENABLE_ONEDNN_OPTS=0`\.",
    # Where there is no GPU device (only there: startup_line), TensorFlow runs on the CPU, as the
    # demo means to; TF_ENABLED_DEVICE_TYPES=CPU does not stop the CUDA stub's probe.
    "no CUDA driver": _ABSL + r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your "
                      r"machine, GPU will not be used\.",
    # Once a process, for the first op of a type oneDNN has no kernels for (DT_BOOL here; the
    # line names AVX-512 whatever the CPU: TensorFlow's util.cc, DataTypeUnsupportedWarning):
    # TensorFlow runs its own Eigen kernel, as for any op oneDNN does not take. ERROR by its
    # level only; an op without an Eigen kernel fails on lines of its own.
    "oneDNN fallback": _ABSL + r"util\.cc:\d+\] oneDNN supports DT_[A-Z0-9]+ only on platforms "
                       r"with AVX-512\. Falling back to the default Eigen-based implementation "
                       r"if present\.",
}
# Where the job's lines may come from, in front of them: an emulated host ("[algo-1] ") and its
# toolkit's mpirun --tag-output ("[1,0]<stderr>:").
_SOURCE = r"(?:\[[\w.-]+\] )?(?:\[\d+,\d+\]<std(?:err|out)>:)?"


@functools.lru_cache(maxsize=2)
def _startup_pattern(gpu: bool) -> re.Pattern:
    known = [p for name, p in STARTUP_LINES.items() if not (gpu and name == "no CUDA driver")]
    return re.compile(_SOURCE + "(?:" + "|".join(known) + ")")


def startup_line(line: str, gpu: bool | None = None) -> bool:
    """Whether `line` is one of STARTUP_LINES, whole; "no CUDA driver" only where there is no GPU
    device (`gpu`, by default whether this machine has one): with one, it is news."""
    return _startup_pattern(gpu_device() if gpu is None else gpu).fullmatch(
        line.rstrip("\r\n")) is not None


@contextlib.contextmanager
def startup_lines_dropped_from_stderr():
    """This process's own stderr, while the block runs, without STARTUP_LINES: the file
    descriptor (TensorFlow's C++ code writes to it) goes to a temporary file, echoed after the
    block without them. For a short block: its stderr comes when it ends."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                captured.seek(0)
                for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True):
                    if not startup_line(line):
                        sys.stderr.write(line)
                sys.stderr.flush()
    finally:
        os.close(saved)


def mpirun_command(ranks: int, host_env: dict, program: str) -> list:
    """mpirun with the options the SageMaker toolkit passes, on this one host."""
    command = ["mpirun", "--bind-to", "none", "-np", str(ranks),
               "-mca", "orte_abort_on_non_zero_status", "1", "-mca", "btl_tcp_if_include", "lo"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    if ranks > (os.cpu_count() or 1):
        # Only when needed: oversubscribed, Open MPI yields the CPU while it waits, which
        # doubled the step time of 2 ranks on 2 cores (benchmarks/cpu_scaling.py).
        command.append("--oversubscribe")
    for name, value in sorted({**tensorflow_environment(), **host_env}.items()):
        command += ["-x", f"{name}={value}"]
    command += ["-x", "PYTHONUNBUFFERED=1",
                "-x", "HOROVOD_CYCLE_TIME="
                + os.environ.get("HOROVOD_CYCLE_TIME", DEFAULT_HOROVOD_CYCLE_TIME),
                sys.executable, program]
    return command


def _stream(lines, final: dict) -> None:
    """Echoes the job's output but TensorFlow's STARTUP_LINES and keeps the last value of each
    metric in it."""
    gpu = gpu_device()
    for line in lines:
        if startup_line(line, gpu):
            continue
        sys.stdout.write(line)
        final.update(metrics.last_values(line))


def run_one_host(args, work_dir: str, final: dict) -> tuple:
    """Returns (exit status, [(host, failure text)], model dir)."""
    metrics_file = os.path.join(work_dir, METRICS_FILE)
    if not args.resume and os.path.exists(metrics_file):
        os.remove(metrics_file)
    host_env = dict(prepare_layout(args, work_dir), **{metrics.METRICS_FILE_ENV: metrics_file})
    # As SageMaker names every job's container: the run's MLflow name.
    host_env[job_io.TRAINING_JOB_NAME_ENV] = "local-run-" + time.strftime("%Y%m%d%H%M%S",
                                                                         time.gmtime())
    if args.mlflow_tracking_uri:  # as a launch's request Environment carries them
        host_env.update({tracking.TRACKING_URI_ENV: args.mlflow_tracking_uri,
                         tracking.EXPERIMENT_ENV: args.mlflow_experiment})
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.distribution == "horovod":
        command = mpirun_command(args.ranks, host_env, os.path.abspath(args.program))
    else:  # the toolkit's process runner: the program once, in the host's environment
        env.update(host_env)
        command = [sys.executable, os.path.abspath(args.program)]
    print("running:", " ".join(command), flush=True)
    print(f"metric lines (train/* at each log step, eval/* at each evaluation): {metrics_file}",
          flush=True)
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, bufsize=1)
    # A watchdog, not a check per line: a hung job prints nothing.
    watchdog = threading.Timer(args.timeout, process.kill)
    watchdog.start()
    try:
        _stream(process.stdout, final)
        status = process.wait()
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        watchdog.cancel()
    if os.path.exists(metrics_file):
        with open(metrics_file, encoding="utf-8") as f:
            final.update(metrics.last_values(f.read()))
    failures = []
    failure = os.path.join(host_env["OPT_ML_ROOT"], "output", "failure")
    if os.path.exists(failure):
        with open(failure, encoding="utf-8") as f:
            failures.append(("algo-1", f.read()))
    return status, failures, host_env["SM_MODEL_DIR"]


class _LineEcho:
    """Feeds the emulated hosts' prefixed output lines to _stream."""

    def __init__(self, final: dict):
        self.final = final

    def write(self, text: str) -> None:
        _stream([text], self.final)

    def flush(self) -> None:
        sys.stdout.flush()


def emulated_host_environment() -> dict:
    """What the emulated hosts' containers get from this machine (over the image's ENV): the
    TensorFlow settings of tensorflow_environment and Horovod's cycle time for a CPU (module
    docstring)."""
    return {"HOROVOD_CYCLE_TIME": os.environ.get("HOROVOD_CYCLE_TIME", DEFAULT_HOROVOD_CYCLE_TIME),
            **tensorflow_environment()}


def run_emulated_hosts(args, work_dir: str, final: dict) -> tuple:
    """Returns (exit status, [(host, failure text)], the hosts' model dirs aggregated)."""
    from maskrcnn_local import emulated_hosts, sagemaker_job

    emulated_hosts.check_available(args.image_python)
    channel = os.path.join(work_dir, "dataset", job_io.TRAIN_CHANNEL)
    _prepare_dataset(args, work_dir, channel)
    hps = _hyperparameters(args)
    # As the launcher sends them.
    hps.update(job_io.distribution_hyperparameters(args.distribution, args.ranks // args.hosts))
    environment = emulated_host_environment()
    environment.update(item.split("=", 1) for item in args.container_env)
    extra_code = []
    if os.path.abspath(args.program) != TRAIN_PROGRAM:
        extra_code.append(os.path.abspath(args.program))
        environment[job_io.PROGRAM_ENV] = os.path.basename(args.program)
    cluster = emulated_hosts.Cluster(
        work_dir, args.hosts, args.image_python, REPO, hps, {job_io.TRAIN_CHANNEL: channel},
        environment=environment, extra_code=extra_code, keep_checkpoints=args.resume)
    print(f"running the SageMaker training toolkit on {args.hosts} emulated hosts "
          f"({args.image_python})", flush=True)
    with cluster:
        result = cluster.run(timeout=args.timeout, echo=_LineEcho(final))
    for host in result.hosts:
        print(f"{host.name}: exit status {host.exit_code}, log {host.log_file}")
    failures = [(h.name, text) for h in result.hosts if (text := h.failure())]
    if result.failure_reason:
        failures.insert(0, ("job failure reason", result.failure_reason))
    status = 0 if result.succeeded else 1
    model_dir = os.path.join(work_dir, "model")
    if status == 0:
        try:  # what SageMaker would pack into model.tar.gz
            sagemaker_job.merge_model_dirs(
                {host.name: os.path.join(host.opt_ml, "model") for host in result.hosts},
                model_dir)
        except sagemaker_job.ModelClash as clash:
            status = 1
            failures.append(("model.tar.gz", str(clash)))
    return status, failures, model_dir


def main(argv=None) -> int:
    args = parse_args(argv)
    # Before anything here imports TensorFlow (the drawing); the job's processes get the same.
    os.environ.update(tensorflow_environment())
    job.ignore_library_notices()
    started = time.time()
    work_dir = os.path.abspath(args.work_dir)
    final: dict = {}
    run = run_one_host if args.hosts == 1 else run_emulated_hosts
    status, failures, model_dir = run(args, work_dir, final)
    if time.time() - started >= args.timeout:
        print(f"local run stopped: it ran past --timeout {args.timeout} s")
    sys.stdout.flush()
    print(f"\nlocal run finished in {time.time() - started:.0f} s with exit status {status}")
    if status != 0:
        for where, text in failures:
            print(f"failure ({where}):\n{text}")
        return status or 1
    if not args.no_model_expected and not _exported(model_dir):
        print(f"failure (local run): the program exited 0 but exported no SavedModel: no "
              f"{SAVED_MODEL_FILE} in {_saved_model_dir(model_dir)}. The training job exports "
              "one there at its end; a program that exports none on purpose runs with "
              "--no-model-expected")
        return 1
    if args.dataset and args.draw:
        # The drawing pairs the synthetic set's val images with their ground truth by file name.
        print("--dataset: no predictions drawn; draw them with `python -m "
              f"maskrcnn_local.predict {model_dir} IMAGES...`")
    report(work_dir, model_dir, final, 0 if args.dataset else args.draw)
    return 0


def report(work_dir: str, model_dir: str, final: dict, draw: int) -> None:
    """How a successful run ends: the SavedModel's path, the predictions for `draw` validation
    images of <work_dir>/coco-synthetic drawn beside their ground truth, the per-class table of
    the job's last evaluation report and its confusion matrix picture's path, then the final
    metrics of `final` and, last, the predictions picture's path."""
    saved_model = _saved_model_dir(model_dir)
    exported = _exported(model_dir)
    print(f"SavedModel: {saved_model}" if exported
          else f"no SavedModel in {model_dir}: the program exported none")
    drawn = _draw_predictions(work_dir, model_dir, draw) if exported and draw > 0 else None
    _print_evaluation_report(model_dir)
    # Last, after what the drawing prints: the final metrics, then the picture.
    for name in FINAL_METRICS:
        if name in final:
            print(metrics.format_line(name, final[name]))
    if drawn:
        print(f"predictions drawn (ground truth left, predicted right): {drawn}")
    sys.stdout.flush()


def _print_evaluation_report(model_dir: str) -> None:
    """The job's last evaluation report, as it lies beside the model (docs/evaluation.md): the
    per-class table and the most confused classes, then the confusion matrix picture's path."""
    from maskrcnn_job.evaluation import report as evaluation_report

    directory = os.path.join(model_dir, evaluation_report.MODEL_REPORT_DIR)
    if not os.path.isfile(os.path.join(directory, evaluation_report.REPORT_FILE)):
        return
    found = evaluation_report.read(directory)
    print(f"\nper-class evaluation of {found['images']} validation images at step {found['step']} "
          f"({found['evaluator']}): {os.path.join(directory, evaluation_report.REPORT_FILE)}")
    for line in evaluation_report.table(found):
        print(line)
    for kind, label in (("segm_confusion_matrix", "masks"), ("bbox_confusion_matrix", "boxes")):
        if kind in found.get("files", {}):
            print(f"confusion matrix ({label}): {os.path.join(directory, found['files'][kind])}")
            break


def _draw_predictions(work_dir: str, model_dir: str, count: int) -> str:
    """The first `count` validation images through the SavedModel, ground truth beside; returns
    the picture's path. This process's stderr, meanwhile, without TensorFlow's STARTUP_LINES (as
    it is imported here, and its oneDNN fallback at the first prediction)."""
    with startup_lines_dropped_from_stderr():
        from maskrcnn_local import predict

        coco_dir = os.path.join(work_dir, "coco-synthetic")
        val_dir = os.path.join(coco_dir, "val2017")
        images = sorted(os.path.join(val_dir, n) for n in os.listdir(val_dir))[:count]
        written = predict.predict(
            model_dir, images, os.path.join(work_dir, "predictions"),
            annotations=os.path.join(coco_dir, "annotations", "instances_val2017.json"),
            compare=count)
    return written["comparison"]


if __name__ == "__main__":
    sys.exit(main())
