"""Metric lines on stdout and the SageMaker metric definitions that read them back.

Part of the job-launcher contract: rank 0 prints one metric per line as `<name>: <value>`; the
launcher sends METRIC_DEFINITIONS with the job, and SageMaker applies each regex to its log lines.
A local run (maskrcnn_local.local_run, one host) names a file in METRICS_FILE_ENV instead: its
console then shows one progress line per log step, and the metric lines go to that file.
"""

import os
import re
import sys
from typing import Dict, List

TRAIN_METRICS = (
    "train/loss",  # total loss, mean over the last logging period
    "train/rpn_score_loss",
    "train/rpn_box_loss",
    "train/frcnn_cls_loss",
    "train/frcnn_box_loss",
    "train/mask_loss",
    "train/learning_rate",
    "train/images_per_sec",  # all ranks together
    "train/step",
    "train/epoch",
)

# pycocotools' 12 summary numbers, for bbox and for segm: the report's summary and TensorBoard.
COCO_STATS = ("AP", "AP50", "AP75", "APs", "APm", "APl",
              "ARmax1", "ARmax10", "ARmax100", "ARs", "ARm", "ARl")
# SageMaker takes at most 40 metric definitions per training job (CreateTrainingJob,
# AlgorithmSpecification.MetricDefinitions). The validation losses did not fit beside the 36
# figures before them: the recall at 1 and at 10 detections per image leave the metric lines
# (COCO's own headline recall is ARmax100, which stays; all 12 stay in the report and TensorBoard).
MAX_METRIC_DEFINITIONS = 40
NOT_METRIC_LINES = ("ARmax1", "ARmax10")
EVAL_METRICS = tuple(f"eval/{kind}_{stat}" for kind in ("bbox", "segm") for stat in COCO_STATS
                     if stat not in NOT_METRIC_LINES)

# From the evaluation report (docs/evaluation.md): the lowest per-class AP, bbox and segm. Which
# class it is, and every other class's figures, are in the report.
PER_CLASS_METRICS = ("eval/bbox_AP_worst_class", "eval/segm_AP_worst_class")

# The training losses on the validation split, at every evaluation (mean over its images): the
# train/ names under eval/, beside the AP in TensorBoard.
VALIDATION_LOSS_METRICS = tuple("eval/" + name[len("train/"):] for name in TRAIN_METRICS
                                if name.endswith("loss"))

# The best value of the run's objective (hyperparameter objective_metric) so far, at every
# evaluation: what the exported model scored. A tuning job whose objective is this line ranks a
# job by the model it exported (docs/evaluation.md, "The best checkpoint and early stopping").
BEST_OBJECTIVE = "eval/best_objective"

ALL_METRICS = (TRAIN_METRICS + EVAL_METRICS + PER_CLASS_METRICS + VALIDATION_LOSS_METRICS
               + (BEST_OBJECTIVE,))

# What the job may take as its objective: the figures of an evaluation that are metric lines.
OBJECTIVE_METRICS = EVAL_METRICS + PER_CLASS_METRICS + VALIDATION_LOSS_METRICS
MAXIMIZE, MINIMIZE = "Maximize", "Minimize"  # SageMaker's HyperParameterTuningJobObjective Type


def objective_direction(name: str) -> str:
    """Whether `name` (one of OBJECTIVE_METRICS) is better higher (AP, AR) or lower (losses):
    the one definition, for the job's best checkpoint and for a tuning job's objective Type."""
    if name not in OBJECTIVE_METRICS:
        raise KeyError(f"{name!r} is not an evaluation metric line: {', '.join(OBJECTIVE_METRICS)}")
    return MINIMIZE if name in VALIDATION_LOSS_METRICS else MAXIMIZE

_NUMBER = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def regex_for(name: str) -> str:
    """`name: ` ends at the colon, so eval/bbox_AP never matches an eval/bbox_AP50 line. Not
    anchored at the line start: mpirun may prefix lines with a rank tag."""
    return rf"{name}: {_NUMBER}"


METRIC_DEFINITIONS: List[Dict[str, str]] = [
    {"Name": name, "Regex": regex_for(name)} for name in ALL_METRICS
]


def format_line(name: str, value: float) -> str:
    if name not in ALL_METRICS:
        raise KeyError(f"undeclared metric {name!r}: add it to maskrcnn_contract/metrics.py so "
                       "SageMaker reads it")
    return f"{name}: {value:.6g}"


# Unset on SageMaker, where the metric lines must be in the job's log (stdout) for the regexes.
METRICS_FILE_ENV = "MASKRCNN_METRICS_FILE"


def left_out_of_metric_lines(name: str) -> bool:
    """An evaluation figure left out of the metric lines for the 40 definitions (NOT_METRIC_LINES),
    which the job still writes to TensorBoard and the report."""
    return name.startswith("eval/") and name.rsplit("_", 1)[-1] in NOT_METRIC_LINES


def emit(values: Dict[str, float], stream=None) -> None:
    """Writes metric lines, one per line, and flushes so the log shows them at once: to `stream`,
    else appended to the file METRICS_FILE_ENV names, else to stdout. The figures
    left_out_of_metric_lines are skipped; any other undeclared name raises (format_line)."""
    path = os.environ.get(METRICS_FILE_ENV) if stream is None else None
    if path:
        with open(path, "a", encoding="utf-8") as f:
            emit(values, f)
        return
    stream = stream or sys.stdout
    for name, value in values.items():
        if not left_out_of_metric_lines(name):
            stream.write(format_line(name, float(value)) + "\n")
    stream.flush()


def last_values(text: str) -> Dict[str, float]:
    """{name: value} of the last line of each declared metric in `text` (a job's log or a metrics
    file), read with METRIC_DEFINITIONS' regexes as SageMaker reads the log."""
    values = {}
    for name in ALL_METRICS:
        found = re.findall(regex_for(name), text)
        if found:
            values[name] = float(found[-1])
    return values
