"""The evaluation report as a job run writes it and the local tools show it, read back.

One short one-host run (`local_run`, `make demo`'s path: one /opt/ml tree, mpirun, 1 rank, 4
steps, an evaluation at step 2 and the final one at step 4, 2 images drawn): the report of each
evaluation under <SM_OUTPUT_DATA_DIR>/evaluation/step-<N>/, the final one beside the model
(<SM_MODEL_DIR>/code/evaluation/), its TensorBoard summaries and metric lines, what local_run
prints, and predict --annotations' report of its images, whose per-class figures are held to
pycocotools' COCOeval restricted to each class on the model's own detections. Its own run (~3 min
here): test_job.py's end-to-end run on 2 emulated hosts writes the same report through the same
code, on the chief. The run is started through benchmarks/demo_accuracy.py, and the other
benchmark scripts of `make bench` run their --smoke paths beside it, rendered by report.py: a
broken benchmark fails here, not first in `make bench`.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from PIL import Image

from maskrcnn_contract import metrics

from maskrcnn_job.evaluation import report

RUN = ["--ranks", "1", "--train-images", "16", "--val-images", "8", "--image-size", "64",
       "--hp", "max_steps=4", "--hp", "eval_every_epochs=0.25", "--hp", "log_every_steps=2",
       "--hp", "checkpoint_every_steps=100", "--hp", "warmup_steps=2", "--hp", "lr_decay_epochs=",
       "--hp", "base_learning_rate=0.01", "--draw", "2"]


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benchmarks")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run, started as `make bench` starts the demo's (benchmarks/demo_accuracy.py, once,
    with this run's arguments): its smoke run too."""
    work = tmp_path_factory.mktemp("evaluation-run")
    results = work / "bench-results"
    command = [sys.executable, os.path.join(BENCH, "demo_accuracy.py"), "--repeats", "1",
               "--work-dir", str(work), "--results-dir", str(results), "--", *RUN,
               "--timeout", "870"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=960)
    log, errors = work / "local_run.log", work / "local_run.stderr.log"
    assert done.returncode == 0, (done.stdout[-3000:] + done.stderr[-3000:]
                                  + (log.read_text()[-5000:] if log.exists() else "")
                                  + (errors.read_text()[-3000:] if errors.exists() else ""))
    # What local_run printed on stdout (demo_accuracy.py keeps it in local_run.log).
    return {"work": work, "stdout": log.read_text(), "opt_ml": work / "opt_ml",
            "results": results}


def test_each_evaluation_writes_its_report_and_the_last_lies_beside_the_model(run):
    reports = run["opt_ml"] / "output" / "data" / report.OUTPUT_REPORT_DIR
    assert sorted(os.listdir(reports)) == ["step-2", "step-4"]
    final = report.read(str(reports / "step-4"))
    assert report.read(str(reports / "step-2"))["step"] == 2 and final["step"] == 4
    beside = run["opt_ml"] / "model" / report.MODEL_REPORT_DIR
    assert report.read(str(beside)) == final
    assert sorted(os.listdir(beside)) == sorted(os.listdir(reports / "step-4"))
    # The model's layout is unchanged for serving: the SavedModel and code/ with its handler.
    assert sorted(os.listdir(run["opt_ml"] / "model")) == ["1", "code"]
    assert {"inference.py", "categories.json"} <= set(os.listdir(run["opt_ml"] / "model" / "code"))
    assert final["images"] == 8 and [c["name"] for c in final["categories"]] == [
        "circle", "square", "triangle", "ellipse", "rectangle", "star"]
    assert final["evaluator"].split()[0] in ("pycocotools", "faster-coco-eval")
    assert set(final["timing"]) >= {"inference_s", "coco_eval_s", "report_s", "pictures_s"}
    for task in ("bbox", "segm"):
        rows = final["tasks"][task]["per_class"]
        assert [row["name"] for row in rows] == [c["name"] for c in final["categories"]]
        assert sum(row["instances"] for row in rows) > 0
        matrix = final["tasks"][task]["confusion"]["matrix"]
        assert len(matrix) == 7 and all(len(row) == 7 for row in matrix)
    for name in final["files"].values():
        with Image.open(beside / name) as image:
            assert image.format == "PNG" and min(image.size) >= 400


def test_the_worst_class_is_a_metric_line_and_the_classes_are_in_tensorboard(run):
    import tensorflow as tf

    final = report.read(str(run["opt_ml"] / "model" / report.MODEL_REPORT_DIR))
    with open(run["work"] / "metrics.txt", encoding="utf-8") as f:
        values = metrics.last_values(f.read())
    for task in ("bbox", "segm"):
        assert values[f"eval/{task}_AP_worst_class"] == pytest.approx(
            min(row["AP"] for row in final["tasks"][task]["per_class"] if row["AP"] is not None),
            abs=1e-6)
    tags = set()
    for path in glob.glob(str(run["opt_ml"] / "output" / "tensorboard" / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    for task in ("bbox", "segm"):
        assert {f"eval_per_class/{task}_AP/{c['name']}" for c in final["categories"]} <= tags
        assert f"eval_report/{task}_confusion_matrix" in tags


def test_the_run_prints_the_per_class_table_and_the_confusion_matrix_before_its_last_lines(run):
    lines = run["stdout"].splitlines()
    beside = run["opt_ml"] / "model" / report.MODEL_REPORT_DIR
    header = next(i for i, line in enumerate(lines) if line.startswith("per-class evaluation of"))
    assert lines[header].endswith(str(beside / report.REPORT_FILE))
    assert lines[header + 1].startswith("class ")
    assert [line.split()[0] for line in lines[header + 2:header + 8]] == [
        "circle", "square", "triangle", "ellipse", "rectangle", "star"]
    assert lines[header + 9].startswith("most confused (masks")
    assert lines[header + 10] == f"confusion matrix (masks): {beside / 'segm_confusion_matrix.png'}"
    # Then, as before, the final metrics and, last, the predictions picture.
    assert [line.split(": ")[0] for line in lines[-5:-1]] == [
        "eval/bbox_AP", "eval/bbox_AP50", "eval/segm_AP", "eval/segm_AP50"]
    assert lines[-1].startswith("predictions drawn (ground truth left, predicted right): ")


def test_predict_with_annotations_reports_its_images_as_cocoeval_per_class(run):
    """predict's report (local_run's drawing ran it on 2 validation images) against pycocotools'
    COCOeval, params.catIds = [c], on the model's own detections, for every class."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from maskrcnn_job.evaluation import coco as coco_evaluation
    from maskrcnn_local import predict

    out = run["work"] / "predictions"
    found = report.read(str(out / predict.REPORT_DIR))
    assert found["images"] == 2 and found["step"] is None
    results = json.loads((out / predict.RESULTS_FILE).read_text())
    annotations = str(run["work"] / "coco-synthetic" / "annotations" / "instances_val2017.json")
    ids = sorted({img["id"] for img in json.loads(open(annotations).read())["images"]})[:2]
    for task in ("bbox", "segm"):
        for row in found["tasks"][task]["per_class"]:
            gt = COCO(annotations)
            alone = COCOeval(gt, coco_evaluation.load_results(gt, results), task)
            alone.params.imgIds, alone.params.catIds = ids, [row["id"]]
            alone.evaluate()
            alone.accumulate()
            alone.summarize()
            expected = None if alone.stats[0] == -1 else alone.stats[0]
            assert row["AP"] == pytest.approx(expected, abs=1e-12), (task, row["name"])
    assert re.search(r"^most confused", "\n".join(report.table(found)), re.M)


def test_every_benchmark_script_runs_its_path_and_the_report_renders_them(run, tmp_path):
    """`make bench`'s chain on tiny inputs (figures that mean nothing): demo_accuracy.py (the
    run above), coco_eval_speed.py, cpu_scaling.py (one one-host run; its emulated-host runs are
    the path test_job.py and test_strategies.py play), converter_speed.py, then report.py, with
    docs/evaluation.md's example rewritten in a copy."""
    results = run["results"]

    def script(name, *args):
        done = subprocess.run([sys.executable, os.path.join(BENCH, name), *args], cwd=REPO,
                              capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        assert done.returncode == 0, f"{name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    script("coco_eval_speed.py", "--smoke", "--results-dir", str(results))
    if os.geteuid() == 0:  # cpu_scaling.py is root only (its emulated hosts)
        script("cpu_scaling.py", "--smoke", "--runs", "horovod-1x1", "--budget", "0",
               "--work-dir", str(tmp_path / "cpu"), "--results-dir", str(results))
    script("converter_speed.py", "--smoke", "--results-dir", str(results))
    demo = json.loads((results / "demo_accuracy.json").read_text())
    assert demo["smoke"] and len(demo["runs"]) == 1
    assert demo["evaluation_report"] == report.read(str(run["opt_ml"] / "model" /
                                                        report.MODEL_REPORT_DIR))
    doc = tmp_path / "evaluation.md"
    shutil.copy(os.path.join(REPO, "docs", "evaluation.md"), doc)
    page = tmp_path / "benchmarks.md"
    script("report.py", str(results), "--out", str(page), "--evaluation-doc", str(doc))
    text = page.read_text()
    sections = 4 if os.geteuid() == 0 else 3
    assert text.count("Smoke run: it only checked that the path works") == sections
    assert "a smoke run: its figures mean nothing" in doc.read_text()
    assert ("4 steps" in doc.read_text()) and "circle" in doc.read_text()
