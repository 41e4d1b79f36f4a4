"""The training job's hyperparameters: names, types, defaults and documentation in one place.

Part of the job-launcher contract: the job parses its hyperparameters with this module, and the
launcher validates a user's hyperparameters with the same module before it starts a job.
SageMaker passes every hyperparameter as a string (hyperparameters.json) or as JSON (SM_HPS);
`parse` accepts both, converts to the declared type and rejects unknown names and bad
values with a message naming the hyperparameter.
"""

import dataclasses
import json
import math
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from maskrcnn_contract import job_io, metrics

BACKBONES = ("resnet18", "resnet34", "resnet50", "resnet101")
MODEL_PRESETS = ("standard", "compact")
BATCH_NORMS = ("frozen", "sync", "per_rank")
DISTRIBUTIONS = ("horovod", "multi_worker_mirrored", "parameter_server")

# Hyperparameters that SageMaker and its training toolkit add themselves; they are not ours to
# validate, and the toolkit's MPI runner consumes them before our program starts.
PLATFORM_PREFIXES = ("sagemaker_", job_io.TUNING_OBJECTIVE_METRIC)


class HyperparameterError(ValueError):
    """A hyperparameter is unknown or its value is malformed."""


def _field(default, doc, **checks):
    return dataclasses.field(default=default, metadata={"doc": doc, **checks})


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    """Everything a training run can be configured with. Defaults suit COCO 2017 on 8 GPUs."""

    backbone: str = _field("resnet50", "ResNet depth of the FPN backbone.", choices=BACKBONES)
    model_preset: str = _field(
        "standard",
        "Head sizes, anchors and sampling. `standard`: Model Garden's COCO Mask R-CNN. `compact`: "
        "small heads, 4 px base anchors, few ROIs: for small images and CPU runs.",
        choices=MODEL_PRESETS)
    batch_norm: str = _field(
        "frozen",
        "Batch norm statistics. `frozen`: the backbone keeps its pretrained ones (needs the "
        "`pretrained` channel), the FPN and heads use `sync`. `sync`: every layer normalizes over "
        "the global batch (all ranks). `per_rank`: over each rank's own images.",
        choices=BATCH_NORMS)
    distribution: str = _field(
        "horovod",
        "How the ranks share the work (training_code/README.md, \"Distribution\"). `horovod`: "
        "synchronous allreduce over MPI, one rank per GPU. `multi_worker_mirrored`: TensorFlow's "
        "MultiWorkerMirroredStrategy, synchronous, one process per host using all its GPUs. "
        "`parameter_server`: TensorFlow's ParameterServerStrategy, asynchronous, a worker and a "
        "parameter server per host, the coordinator on the first (2 or more hosts).",
        choices=DISTRIBUTIONS)
    image_size: int = _field(1024, "Square input size in pixels (images are resized and padded).",
                             minimum=64)
    images_per_gpu: int = _field(2, "Images per rank (one rank per GPU) and step.", minimum=1)
    base_learning_rate: float = _field(
        0.0025, "Learning rate of ONE rank; the peak rate is this times the number of ranks.",
        above=0.0)
    warmup_steps: int = _field(
        500, "Steps of linear warmup from a third of the peak learning rate to the peak; fewer "
        "than the run's steps (refused otherwise, naming the run's length), unless `max_steps` "
        "cuts the run shorter: then the warmup is cut to it, with a warning.", minimum=0)
    epochs: float = _field(12.0, "Length of training in passes over the training set.",
                           above=0.0)
    lr_decay_epochs: str = _field(
        "8,11", "Comma-separated epochs, before `epochs`, at which the learning rate drops by 10x; "
        "empty: constant. With `max_steps`, each drop comes at the same fraction of the steps.")
    max_steps: int = _field(0, "Stop after this many steps if > 0 (overrides `epochs`).",
                            minimum=0)
    weight_decay: float = _field(4e-5, "L2 weight decay.", minimum=0.0)
    momentum: float = _field(0.9, "SGD momentum.", minimum=0.0)
    mixed_precision: bool = _field(True, "float16 compute with loss scaling (GPUs only).")
    fp16_allreduce: bool = _field(
        False, "Compress gradients to float16 for Horovod's allreduce (`distribution=horovod` "
        "only; refused with the others).")
    eval_every_epochs: float = _field(
        1.0, "COCO evaluation period in epochs, at least one step (refused below, naming the "
        "steps per epoch); 0: only at the end.", minimum=0.0)
    eval_max_images: int = _field(0, "Evaluate on at most this many val images; 0: all.",
                                  minimum=0)
    validation_losses: bool = _field(
        True, "At each evaluation, also the training losses on the val images (the eval/*loss "
        "metric lines): a second pass over them, in training mode without a gradient. false: "
        "the AP only; refused with an `objective_metric` that is a loss.")
    checkpoint_every_steps: int = _field(
        1000, "Checkpoint period in steps: a spot interruption loses at most this much work.",
        minimum=1)
    objective_metric: str = _field(
        "eval/segm_AP",
        "The evaluation figure that picks the best checkpoint, which the job exports, and that "
        "early stopping watches: one of the eval/ metric lines; the validation losses "
        "(eval/*loss) are minimized, the others maximized (docs/evaluation.md, "
        "\"The best checkpoint and early stopping\").", choices=metrics.OBJECTIVE_METRICS)
    early_stopping_patience: int = _field(
        0, "Stop once `objective_metric` has not improved for this many evaluations in a row; "
        "the best checkpoint is exported as always. 0: never stop early. Refused when the run "
        "evaluates too rarely for it ever to stop before its end.", minimum=0)
    early_stopping_min_delta: float = _field(
        0.0, "How much better than the best so far an evaluation's `objective_metric` must be to "
        "count as an improvement (a new best checkpoint, patience starting over).", minimum=0.0)
    log_every_steps: int = _field(50, "Period of train/* metric lines in steps.", minimum=1)
    max_instances: int = _field(100, "Instances kept per training image.", minimum=1)
    threads_per_rank: int = _field(
        0, "TensorFlow intra-op threads per rank; 0: TensorFlow's default.", minimum=0)
    seed: int = _field(0, "Seed of shuffling and augmentation.")
    stall_timeout_minutes: float = _field(
        10.0, "A rank that finishes no step for this long fails the job; the failure reason names "
        "it, its host, the phase and the last step (docs/operations.md, \"A hung job\"). 0: no "
        "stall watchdog.", minimum=0.0)
    stall_timeout_slow_phases_minutes: float = _field(
        30.0, "The same for the phases without steps: start-up and the first step (which traces "
        "the graph), checkpoints, evaluation (the chief's COCOeval while the others wait) and "
        "export. 0: those phases are not watched.", minimum=0.0)
    freeze_backbone: bool = _field(
        False, "Train the FPN and the heads only; the backbone keeps the weights it starts from "
        "(the `init` or `pretrained` channel's, which it needs).")

    @property
    def lr_decay_epoch_list(self) -> Tuple[float, ...]:
        return tuple(float(x) for x in self.lr_decay_epochs.split(",") if x.strip())


def fields() -> Tuple[dataclasses.Field, ...]:
    return dataclasses.fields(Hyperparameters)


def _convert(field: dataclasses.Field, raw: Any) -> Any:
    """Converts one raw value (string from SageMaker, or JSON-typed) to the field's type."""
    kind = field.type
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise HyperparameterError(f"hyperparameter {field.name}={raw!r}: expected true or false")
    if kind is int:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise HyperparameterError(f"hyperparameter {field.name}={raw!r}: expected an integer")
        try:
            return int(raw) if isinstance(raw, (int, float)) else int(str(raw).strip())
        except ValueError:
            raise HyperparameterError(
                f"hyperparameter {field.name}={raw!r}: expected an integer") from None
    if kind is float:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise HyperparameterError(
                f"hyperparameter {field.name}={raw!r}: expected a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise HyperparameterError(f"hyperparameter {field.name}={raw!r}: not a finite number")
        return value
    return str(raw)


def _check(field: dataclasses.Field, value: Any) -> None:
    meta = field.metadata
    if "choices" in meta and value not in meta["choices"]:
        raise HyperparameterError(
            f"hyperparameter {field.name}={value!r}: expected one of {', '.join(meta['choices'])}")
    if "minimum" in meta and value < meta["minimum"]:
        raise HyperparameterError(
            f"hyperparameter {field.name}={value!r}: must be >= {meta['minimum']}")
    if "above" in meta and value <= meta["above"]:
        raise HyperparameterError(
            f"hyperparameter {field.name}={value!r}: must be > {meta['above']}")


def parse(raw: Mapping[str, Any]) -> Hyperparameters:
    """Validates and converts raw hyperparameters; missing ones take their defaults."""
    known = {f.name: f for f in fields()}
    unknown = sorted(k for k in raw if k not in known and not k.startswith(PLATFORM_PREFIXES))
    if unknown:
        raise HyperparameterError(
            f"unknown hyperparameter(s): {', '.join(unknown)}; known: {', '.join(known)}")
    values: Dict[str, Any] = {}
    for name, value in raw.items():
        if name in known:
            values[name] = _convert(known[name], value)
            _check(known[name], values[name])
    hps = Hyperparameters(**values)
    try:
        decay = hps.lr_decay_epoch_list
    except ValueError:
        raise HyperparameterError(
            f"hyperparameter lr_decay_epochs={hps.lr_decay_epochs!r}: expected comma-separated "
            "numbers such as 8,11") from None
    if list(decay) != sorted(decay) or any(e <= 0 for e in decay):
        raise HyperparameterError(
            f"hyperparameter lr_decay_epochs={hps.lr_decay_epochs!r}: epochs must be positive "
            "and increasing")
    if not hps.validation_losses and hps.objective_metric in metrics.VALIDATION_LOSS_METRICS:
        raise HyperparameterError(
            f"hyperparameter objective_metric={hps.objective_metric!r} is a validation loss, and "
            "validation_losses=false computes none: set validation_losses=true or pick an AP")
    if decay and decay[-1] >= hps.epochs:
        # A drop at or past the end of training would never happen (with max_steps, the drops
        # are placed at their fraction of `epochs`, so the same rule holds).
        raise HyperparameterError(
            f"hyperparameter lr_decay_epochs={hps.lr_decay_epochs!r}: every drop must come "
            f"before the end of training, epochs={hps.epochs:g}; lower them, raise epochs, or "
            "set lr_decay_epochs= (empty) for a constant rate")
    return hps


def check_pretrained_channel(hps: Hyperparameters, has_pretrained: bool,
                             has_init: bool = False) -> None:
    """What the hyperparameters ask of the `pretrained` channel, or of the `init` channel, whose
    earlier run's backbone stands for it: the job checks it at start, a launcher can check it
    before it sends the job."""
    if has_init:
        return
    if hps.batch_norm == "frozen" and not has_pretrained:
        raise HyperparameterError(
            "batch_norm=frozen keeps the backbone's pretrained batch-norm statistics, but the job "
            "has no `pretrained` channel: stage the backbone's ImageNet checkpoint and send it as "
            "the `pretrained` channel, or choose batch_norm=sync (every batch norm then learns "
            "its statistics, over all ranks)")
    if hps.freeze_backbone and not has_pretrained:
        raise HyperparameterError(
            "freeze_backbone=true keeps the backbone's weights as they start, and this job's "
            "start from random values (no `pretrained` or `init` channel): fine-tune from an "
            "earlier run (init_from), send the pretrained backbone, or set freeze_backbone=false")


# What an earlier run must share with a job that starts from its checkpoint: the weights of another
# backbone or preset have other shapes and meanings (the image size changes no weight's shape).
INIT_MUST_MATCH = ("backbone", "model_preset")


def init_run_problems(hps: Hyperparameters, run_info: Mapping[str, Any],
                      where: str = "the init checkpoint") -> list:
    """Why a job with `hps` cannot start from the run that `run_info` (job_io.RUN_INFO) describes;
    empty when it can. The job checks at start, a launcher before it sends."""
    problems = []
    for name in INIT_MUST_MATCH:
        theirs, ours = run_info.get(name), getattr(hps, name)
        if theirs != ours:
            problems.append(
                f"{where} is of a run with {name}={theirs}, and this job has {name}={ours}: its "
                "weights do not fit this model; fine-tune from a run of the same "
                f"{', '.join(INIT_MUST_MATCH)}, or set {name}={theirs}")
    return problems


def batch_norm_without_pretrained(distribution: str) -> str:
    """The batch-norm mode of a run with no pretrained backbone whose user chose none: `frozen`,
    the default, keeps pretrained statistics, so there must be some. `sync` normalizes over the
    global batch; parameter servers have no synchronous step to do that over, so `per_rank`."""
    return "per_rank" if distribution == "parameter_server" else "sync"


def same_classes(run_info: Mapping[str, Any], categories: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a job training `categories` (its dataset_info.json's) keeps the class-specific
    layers of the earlier run that `run_info` (job_io.RUN_INFO) describes: the same classes in
    the same order (the contiguous ids 1..K follow it), each by its name and its annotation
    file's id (`source_id`; a dataset staged before the ids were numbered has only `id`). A run
    that recorded no classes shares none. The one rule: the job decides with it which layers to
    re-initialize, the launcher says with it what the job will do."""
    def key(found):
        return [(c.get("name"), c.get("source_id", c.get("id"))) for c in found]
    theirs = run_info.get("categories")
    return bool(theirs) and key(theirs) == key(categories)


def check_distribution(hps: Hyperparameters) -> None:
    """What the distribution allows of the other hyperparameters (the job checks at start, the
    launcher before it sends); every problem at once."""
    problems = []
    if hps.distribution == "parameter_server" and hps.batch_norm == "sync":
        problems.append(
            "batch_norm=sync normalizes over the global batch of a synchronous step, and "
            "distribution=parameter_server has none (each worker updates on its own): choose "
            "batch_norm=frozen (with the pretrained backbone) or batch_norm=per_rank")
    if hps.fp16_allreduce and hps.distribution != "horovod":
        # Refused rather than ignored: only Horovod's allreduce compresses, and a comparison of
        # strategies would credit or blame a compression that did not happen.
        problems.append(
            f"fp16_allreduce=true compresses Horovod's allreduce; distribution={hps.distribution} "
            "has none to compress (" + (
                "TensorFlow's collectives reduce the gradients in their own type"
                if hps.distribution == "multi_worker_mirrored" else
                "the workers send their gradients to the parameter servers")
            + "): remove it, or choose distribution=horovod")
    if problems:
        raise HyperparameterError("; ".join(problems))


@dataclasses.dataclass(frozen=True)
class RunLength:
    """A run's length in steps, for its training images and the replicas of one step (the job's
    backend size: every rank under horovod and multi_worker_mirrored, one worker's under
    parameter_server). The one arithmetic of the job's schedule and of the launcher's check."""

    num_train_images: int
    num_replicas: int
    global_batch: int
    steps_per_epoch: int
    total_steps: int

    def describe(self, hps: Hyperparameters) -> str:
        how = (f"max_steps={hps.max_steps}; an epoch is {self.steps_per_epoch} steps"
               if hps.max_steps else
               f"epochs={hps.epochs:g} x {self.steps_per_epoch} "
               f"step{'s' if self.steps_per_epoch != 1 else ''} per epoch")
        return (f"this run is {self.total_steps} steps ({how}, for {self.num_train_images} "
                f"training images in global batches of {self.global_batch}: images_per_gpu="
                f"{hps.images_per_gpu} x {self.num_replicas} replicas)")


def run_length(hps: Hyperparameters, num_train_images: int, num_replicas: int) -> RunLength:
    global_batch = hps.images_per_gpu * num_replicas
    steps_per_epoch = max(1, math.ceil(num_train_images / global_batch))
    total = hps.max_steps or max(1, round(hps.epochs * steps_per_epoch))
    return RunLength(num_train_images, num_replicas, global_batch, steps_per_epoch, total)


def warmup_steps_used(hps: Hyperparameters, length: RunLength) -> int:
    """The warmup the job runs: `warmup_steps`, or the whole run when `max_steps` cuts it
    shorter (run_length_warnings says so)."""
    return min(hps.warmup_steps, length.total_steps)


def eval_every_steps(hps: Hyperparameters, length: RunLength) -> int:
    """The evaluation period in steps; 0: only at the end."""
    return round(hps.eval_every_epochs * length.steps_per_epoch)


def evaluations_before_the_end(hps: Hyperparameters, length: RunLength) -> int:
    """The evaluations a run makes before its last step (the last one's comes after it)."""
    every = eval_every_steps(hps, length)
    return (length.total_steps - 1) // every if every else 0


def run_length_problems(hps: Hyperparameters, length: RunLength) -> List[str]:
    """What this run's length would silently turn into something else: a warmup that outlasts a
    run of `epochs`, an evaluation period under one step (it would round to 0, "only at the
    end"), an early stopping that could never stop the run. Empty when there is none. The job
    refuses them at start (Schedule.build), the launcher before it sends where it knows the
    dataset's size and the replicas."""
    problems = []
    total, per_epoch = length.total_steps, length.steps_per_epoch
    # With max_steps the run is cut short on purpose (a try, a smoke or timing run, the tests'
    # runs): it keeps the full run's warmup, cut to its length, and run_length_warnings says so
    # loudly; refusing would make every cut run restate warmup_steps. A run of `epochs` is the
    # run the user wants, and one that ends still warming up never trains at its peak rate.
    if not hps.max_steps and hps.warmup_steps >= total:
        problems.append(
            f"hyperparameter warmup_steps={hps.warmup_steps}: {length.describe(hps)}, so it would "
            "end still warming up and never train at its peak learning rate; allowed: "
            f"warmup_steps from 0 to {total - 1} for this run, or a longer one (at least "
            f"epochs={math.ceil((hps.warmup_steps + 1) / per_epoch)} for this warmup)")
    if hps.eval_every_epochs and hps.eval_every_epochs * per_epoch < 1 - 1e-9:
        problems.append(
            f"hyperparameter eval_every_epochs={hps.eval_every_epochs:g}: {length.describe(hps)}, "
            f"so that is every {hps.eval_every_epochs * per_epoch:.3g} steps, less than one, and "
            "the job would evaluate only at the end; allowed: 0 (only at the end) or at least "
            f"{1 / per_epoch:.4g} (one step)")
    # The earliest stop is at the evaluation `patience` after the first (the first is the first
    # best): it must come before the last step, whose evaluation ends the run anyway.
    before_the_end = evaluations_before_the_end(hps, length)
    if hps.early_stopping_patience and hps.early_stopping_patience >= before_the_end:
        problems.append(
            f"hyperparameter early_stopping_patience={hps.early_stopping_patience}: "
            f"{length.describe(hps)}, evaluated " + (
                f"every {eval_every_steps(hps, length)} steps (eval_every_epochs="
                f"{hps.eval_every_epochs:g}), {before_the_end} time(s) before its end"
                if hps.eval_every_epochs else "only at its end (eval_every_epochs=0)")
            + ", so it could never stop early; allowed: 0 (off)"
            + (f" or 1 to {before_the_end - 1} for this run" if before_the_end > 1 else "")
            + ", or evaluate more often (eval_every_epochs)")
    return problems


def run_length_warnings(hps: Hyperparameters, length: RunLength) -> List[str]:
    """What the job and the launcher print about the value they use (run_length_problems says
    why this is not refused)."""
    if hps.max_steps and hps.warmup_steps > length.total_steps:
        return [f"warning: warmup_steps={hps.warmup_steps} is longer than this run "
                f"(max_steps={hps.max_steps}): the learning rate warms up over all "
                f"{warmup_steps_used(hps, length)} steps instead (warmup_steps="
                f"{warmup_steps_used(hps, length)}) and reaches its peak only at the last step"]
    return []


def check_run_length(hps: Hyperparameters, length: RunLength) -> List[str]:
    """HyperparameterError naming every run_length_problems; else the warnings to print."""
    problems = run_length_problems(hps, length)
    if problems:
        raise HyperparameterError("; ".join(problems))
    return run_length_warnings(hps, length)


def as_sent(value: Any) -> str:
    """A hyperparameter's value as SageMaker hands it to the container: a string, booleans
    lowercase (what `parse` reads back as the same value)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def decode(raw: Mapping[str, Any]) -> Dict[str, Any]:
    """Hyperparameters as sent (every value a string, JSON-encoded by some SDK versions:
    '"resnet50"', '2', 'true') -> Python values that `parse` accepts."""
    decoded = {}
    for key, value in raw.items():
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        decoded[key] = value
    return decoded


def parse_json_file(path: str) -> Hyperparameters:
    """Reads SageMaker's /opt/ml/input/config/hyperparameters.json (all values are strings)."""
    with open(path, encoding="utf-8") as f:
        return parse(decode(json.load(f)))


def markdown_table() -> str:
    """The table in training_code/README.md is generated from (and tested against) this."""
    rows = ["| name | type | default | meaning |", "|---|---|---|---|"]
    for f in fields():
        # Every field's type is a class: the module has no string annotations.
        name = f.type.__name__  # type: ignore[union-attr]
        rows.append(f"| `{f.name}` | {name} | `{f.default}` | {f.metadata['doc']} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
