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

# pycocotools' 12 summary numbers, for bbox and for segm.
COCO_STATS = ("AP", "AP50", "AP75", "APs", "APm", "APl",
              "ARmax1", "ARmax10", "ARmax100", "ARs", "ARm", "ARl")
EVAL_METRICS = tuple(f"eval/{kind}_{stat}" for kind in ("bbox", "segm") for stat in COCO_STATS)

# From the evaluation report (docs/evaluation.md): the lowest per-class AP, bbox and segm. Which
# class it is, and every other class's figures, are in the report.
PER_CLASS_METRICS = ("eval/bbox_AP_worst_class", "eval/segm_AP_worst_class")

ALL_METRICS = TRAIN_METRICS + EVAL_METRICS + PER_CLASS_METRICS

# SageMaker takes at most 40 metric definitions per training job (CreateTrainingJob,
# AlgorithmSpecification.MetricDefinitions).
MAX_METRIC_DEFINITIONS = 40

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
        raise KeyError(f"undeclared metric {name!r}: add it to maskrcnn_contract/metrics.py so SageMaker reads it")
    return f"{name}: {value:.6g}"


# Unset on SageMaker, where the metric lines must be in the job's log (stdout) for the regexes.
METRICS_FILE_ENV = "MASKRCNN_METRICS_FILE"


def emit(values: Dict[str, float], stream=None) -> None:
    """Writes metric lines, one per line, and flushes so the log shows them at once: to `stream`,
    else appended to the file METRICS_FILE_ENV names, else to stdout."""
    path = os.environ.get(METRICS_FILE_ENV) if stream is None else None
    if path:
        with open(path, "a", encoding="utf-8") as f:
            emit(values, f)
        return
    stream = stream or sys.stdout
    for name, value in values.items():
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
