"""The evaluation report's pictures (matplotlib, Agg: no display, and pyplot's global state
untouched): per task, the classes' precision-recall curves and the confusion matrix."""

import math
from typing import Dict

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

TASK_TITLES = {"bbox": "boxes", "segm": "masks"}
MAX_ANNOTATED_CLASSES = 30  # counts written in the matrix's cells up to this many classes


def _save(figure: Figure, path: str) -> None:
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=100)


def pr_curves(report: Dict, task: str, path: str) -> None:
    """One panel per class: COCO's interpolated precision against recall at IoU 0.5 and 0.75,
    and the point of best F1 (IoU 0.5)."""
    data = report["tasks"][task]
    recall = np.array(data["recall_thresholds"])
    rows = data["per_class"]
    columns = min(4, max(1, len(rows)))
    lines = max(1, math.ceil(len(rows) / columns))
    figure = Figure(figsize=(3.2 * columns, 2.9 * lines + 0.6), layout="constrained")
    figure.suptitle(f"Precision-recall per class, {TASK_TITLES.get(task, task)} "
                    f"({report['images']} images" + (f", step {report['step']})"
                                                       if report.get("step") is not None else ")"))
    for index, row in enumerate(rows):
        axes = figure.add_subplot(lines, columns, index + 1)
        for iou, style in (("0.50", "-"), ("0.75", "--")):
            curve = row["pr_curves"].get(iou)
            if curve is not None:
                axes.plot(recall, curve["precision"], style, label=f"IoU {iou}")
        best = row["best_f1"]
        if best["score_threshold"] is not None:
            axes.plot([best["recall"]], [best["precision"]], "o", color="black",
                      label=f"best F1 at {best['score_threshold']:.2f}")
        ap50, ap75 = (("-" if row[k] is None else f"{row[k]:.2f}") for k in ("AP50", "AP75"))
        axes.set_title(f"{row['name']} (AP50 {ap50}, AP75 {ap75})", fontsize=9)
        axes.set_xlim(0, 1)
        axes.set_ylim(0, 1.02)
        axes.set_xlabel("recall", fontsize=8)
        axes.set_ylabel("precision", fontsize=8)
        axes.tick_params(labelsize=7)
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:  # a class with no ground truth has no curve
            axes.legend(fontsize=6, loc="lower left")
    _save(figure, path)


def confusion_matrix(report: Dict, task: str, path: str) -> None:
    """The matrix as a heatmap: colour by share of each row (true class), counts in the cells."""
    data = report["tasks"][task]["confusion"]
    matrix = np.array(data["matrix"], float)
    labels = data["labels"]
    totals = matrix.sum(axis=1, keepdims=True)
    shares = np.divide(matrix, totals, out=np.zeros_like(matrix), where=totals > 0)
    side = max(4.5, 0.55 * len(labels) + 2.5)
    figure = Figure(figsize=(side + 1.2, side), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    figure.colorbar(image, ax=axes, label="share of the row (true class)", shrink=0.8)
    axes.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
    axes.set_yticks(range(len(labels)), labels, fontsize=8)
    axes.set_xlabel("predicted (background: missed)")
    axes.set_ylabel("ground truth (background: false detection)")
    axes.set_title(f"Confusion, {TASK_TITLES.get(task, task)}: score >= "
                   f"{data['score_threshold']:g}, IoU >= {data['iou']:g}, "
                   f"{report['images']} images", fontsize=9)
    if len(labels) <= MAX_ANNOTATED_CLASSES + 1:
        for i in range(len(labels)):
            for j in range(len(labels)):
                if matrix[i, j]:
                    axes.text(j, i, f"{int(matrix[i, j])}", ha="center", va="center", fontsize=7,
                              color="white" if shares[i, j] > 0.5 else "black")
    _save(figure, path)
