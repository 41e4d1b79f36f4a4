"""COCO evaluation beyond its 12 summary numbers: the evaluation report (report.py: per-class AP,
precision-recall curves, a confusion matrix, score thresholds; plots.py: its pictures) and the
COCOeval implementations that compute it (coco.py). Documented in docs/evaluation.md."""
