"""The evaluation report's file, where it lies and how it is printed: what the training job
writes (maskrcnn_job/evaluation/report.py builds it) and what the launcher and the notebooks read
back from a finished job's model.tar.gz (maskrcnn_launcher/runs/evaluation_report.py). Pure Python:
the report is JSON, its table needs no numpy. Every field: docs/evaluation.md.
"""

import json
import os
from typing import Dict, List, Optional

SCHEMA = "maskrcnn-evaluation-report/1"
REPORT_FILE = "report.json"
# Where the job writes reports: under SM_OUTPUT_DATA_DIR (uploaded with the job's output.tar.gz)
# one step-<N>/ per evaluation; the last one under SM_MODEL_DIR (model.tar.gz), beside the
# endpoint's code: the serving container reads only code/inference.py, code/requirements.txt and
# code/lib/ there, and serves only <digits>/ SavedModels (docs/aws-rules.md EP-2).
OUTPUT_REPORT_DIR = "evaluation"
MODEL_REPORT_DIR = "code/evaluation"  # a tar member path: always '/'


def picture_names(report: Dict) -> Dict[str, str]:
    """{kind: file name} of the pictures written beside report.json."""
    names = {}
    for task in report["tasks"]:
        names[f"{task}_pr_curves"] = f"{task}_pr_curves.png"
        names[f"{task}_confusion_matrix"] = f"{task}_confusion_matrix.png"
    return names


def read(path: str) -> Dict:
    """A report.json, or the directory holding one; refuses another schema."""
    if os.path.isdir(path):
        path = os.path.join(path, REPORT_FILE)
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    if report.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {report.get('schema')!r}, expected {SCHEMA!r}")
    return report


def _cell(value: Optional[float], fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def table(report: Dict) -> List[str]:
    """The per-class table (mask and box AP, AP50; the mask threshold of best F1 with its
    precision and recall) and the most frequent confusions, as printed lines."""
    segm, bbox = report["tasks"].get("segm"), report["tasks"].get("bbox")
    primary = segm or bbox
    width = max([len("class")] + [len(c["name"]) for c in report["categories"]])
    kind = "mask" if segm else "box"
    lines = [f"{'class':<{width}}  inst  mask AP  AP50   box AP  AP50   best F1 ({kind}): "
             "score  precision  recall"]
    for k, category in enumerate(report["categories"]):
        s = segm["per_class"][k] if segm else {}
        b = bbox["per_class"][k] if bbox else {}
        best = primary["per_class"][k]["best_f1"]
        lines.append(
            f"{category['name']:<{width}}  {primary['per_class'][k]['instances']:>4}  "
            f"{_cell(s.get('AP')):>7}  {_cell(s.get('AP50')):>5}  {_cell(b.get('AP')):>7}  "
            f"{_cell(b.get('AP50')):>5}   {_cell(best['score_threshold'], '{:.2f}'):>18}  "
            f"{_cell(best['precision'], '{:.2f}'):>9}  {_cell(best['recall'], '{:.2f}'):>6}")
    overall = primary["best_f1_all_classes"]
    lines.append(f"{'all classes':<{width}}  {'':>4}  {'':>7}  {'':>5}  {'':>7}  {'':>5}   "
                 f"{_cell(overall['score_threshold'], '{:.2f}'):>18}  "
                 f"{_cell(overall['precision'], '{:.2f}'):>9}  "
                 f"{_cell(overall['recall'], '{:.2f}'):>6}")
    matrix = primary["confusion"]
    confused = ", ".join(f"{c['ground_truth']} as {c['predicted']} {c['count']} "
                         f"({c['share']:.0%})" for c in matrix["most_confused"]) or "none"
    lines.append(f"most confused ({kind}s scoring >= {matrix['score_threshold']:g}, "
                 f"IoU >= {matrix['iou']:g}): {confused}")
    return lines
