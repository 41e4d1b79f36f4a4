"""The evaluation report as a job run writes it and the local tools show it, read back.

One short one-host run (`local_run`, `make demo`'s path: one /opt/ml tree, mpirun, 1 rank, 2
images drawn) that also stops early on a plateau: 4 steps planned with an evaluation after each,
its learning rate falling 10x at each step (no momentum), early_stopping_patience=1 and
early_stopping_min_delta=0.05 on eval/segm_AP, which no step of this run can gain. It stops after
the evaluation of step 2, saying why, and exports the best evaluation's weights (step 1's); the
report of each evaluation under <SM_OUTPUT_DATA_DIR>/evaluation/step-<N>/, the best one beside
the model (<SM_MODEL_DIR>/code/evaluation/), its TensorBoard summaries and metric lines (the
validation losses among them), what local_run prints, and predict --annotations' report of its
images, whose per-class figures are held to pycocotools' COCOeval restricted to each class on
the model's own detections. Its own run (~3 min
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

# 8 steps per epoch (16 images, 2 per step); the drops at epochs 0.5, 1, 1.5 of 2 fall at steps
# 1, 2, 3 of max_steps=4 (schedule.py): 0.01 for step 1, then 1e-3, 1e-4, 1e-5.
RUN = ["--ranks", "1", "--train-images", "16", "--val-images", "8", "--image-size", "64",
       "--hp", "max_steps=4", "--hp", "eval_every_epochs=0.125", "--hp", "log_every_steps=2",
       "--hp", "checkpoint_every_steps=100", "--hp", "warmup_steps=0", "--hp", "epochs=2",
       "--hp", "lr_decay_epochs=0.5,1,1.5", "--hp", "momentum=0", "--hp", "base_learning_rate=0.01",
       "--hp", "early_stopping_patience=1", "--hp", "early_stopping_min_delta=0.05",
       "--draw", "2"]
BEST_STEP, STOP_STEP = 1, 2


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
               "--timeout", "1400"]  # past a hang, not past make test's load (901 s seen)
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500)
    log, errors = work / "local_run.log", work / "local_run.stderr.log"
    assert done.returncode == 0, (done.stdout[-3000:] + done.stderr[-3000:]
                                  + (log.read_text()[-5000:] if log.exists() else "")
                                  + (errors.read_text()[-3000:] if errors.exists() else ""))
    # What local_run printed on stdout (demo_accuracy.py keeps it in local_run.log).
    return {"work": work, "stdout": log.read_text(), "opt_ml": work / "opt_ml",
            "results": results}


def test_a_run_with_early_stopping_stops_on_a_plateau_and_exports_its_best_checkpoint(run):
    """Stopped after the evaluation of step 2 of 4, saying why; the SavedModel holds the best
    checkpoint's weights (step 1), not those the run stopped with (its rolling checkpoint of step
    2), and the log says which step it exports, the last one's figure beside it."""
    from tests.training.test_job import _model_values

    stdout = run["stdout"]
    assert re.search(rf"early stopping at step {STOP_STEP}: eval/segm_AP has not improved on step "
                     rf"{BEST_STEP} \(eval/segm_AP \S+\) for 1 evaluations "
                     r"\(early_stopping_patience=1, early_stopping_min_delta=0.05\)", stdout), \
        stdout[-3000:]
    assert re.search(rf"exporting the best evaluation, step {BEST_STEP} \(eval/segm_AP \S+\); "
                     rf"the last, step {STOP_STEP}: eval/segm_AP \S+", stdout)
    assert not re.search(r"^step [34]/4 ", stdout, re.M)  # no step after the stop
    checkpoints = run["opt_ml"] / "checkpoints"
    exported = _model_values(run["opt_ml"] / "model" / "1" / "variables" / "variables")
    best = _model_values(checkpoints / "best" / f"ckpt-{BEST_STEP}")
    last = _model_values(checkpoints / f"ckpt-{STOP_STEP}")
    assert exported == best
    assert sum(best[k] != last[k] for k in best) > 0  # the stop step's weights are others
    # The best is kept apart from the rolling checkpoints, with what a resumed job reads back.
    assert sorted(os.listdir(checkpoints / "best")) == [
        "best.json", "checkpoint", f"ckpt-{BEST_STEP}.data-00000-of-00001",
        f"ckpt-{BEST_STEP}.index", "evaluation"]
    state = json.loads((checkpoints / "best" / "best.json").read_text())
    assert (state["metric"], state["step"], state["not_improved"]) == (
        "eval/segm_AP", BEST_STEP, [STOP_STEP])


def test_each_evaluation_writes_its_report_and_the_best_lies_beside_the_model(run):
    reports = run["opt_ml"] / "output" / "data" / report.OUTPUT_REPORT_DIR
    assert sorted(os.listdir(reports)) == [f"step-{BEST_STEP}", f"step-{STOP_STEP}"]
    final = report.read(str(reports / f"step-{BEST_STEP}"))
    assert report.read(str(reports / f"step-{STOP_STEP}"))["step"] == STOP_STEP
    assert final["step"] == BEST_STEP
    beside = run["opt_ml"] / "model" / report.MODEL_REPORT_DIR
    assert report.read(str(beside)) == final
    assert sorted(os.listdir(beside)) == sorted(os.listdir(reports / f"step-{BEST_STEP}"))
    # The validation losses in the report, as the metric lines give them (6 significant digits).
    assert set(final["validation_losses"]) == {name[len("eval/"):]
                                               for name in metrics.VALIDATION_LOSS_METRICS}
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


def test_the_worst_class_and_the_validation_losses_are_metric_lines_and_in_tensorboard(run):
    import tensorflow as tf

    final = report.read(str(run["opt_ml"] / "model" / report.MODEL_REPORT_DIR))
    last = report.read(str(run["opt_ml"] / "output" / "data" / report.OUTPUT_REPORT_DIR
                           / f"step-{STOP_STEP}"))
    with open(run["work"] / "metrics.txt", encoding="utf-8") as f:
        text = f.read()
    values = metrics.last_values(text)  # the last evaluation's (step 2)
    for task in ("bbox", "segm"):
        assert values[f"eval/{task}_AP_worst_class"] == pytest.approx(
            min(row["AP"] for row in last["tasks"][task]["per_class"] if row["AP"] is not None),
            abs=1e-6)
    # At each evaluation: the validation losses, and the best objective so far (the best's).
    for name in metrics.VALIDATION_LOSS_METRICS:
        found = [float(v) for v in re.findall(metrics.regex_for(name), text)]
        assert len(found) == 2 and all(0 < v < 100 for v in found), (name, found)
        # The report rounds to 6 decimals, the metric line to 6 significant digits.
        assert found[-1] == pytest.approx(last["validation_losses"][name[len("eval/"):]],
                                          rel=1e-5, abs=1e-6)
    best = [float(v) for v in re.findall(metrics.regex_for(metrics.BEST_OBJECTIVE), text)]
    assert best == [pytest.approx(final["tasks"]["segm"]["summary"]["AP"], abs=1e-6)] * 2
    # The figures left out of the metric lines for SageMaker's 40 definitions are not printed.
    assert "ARmax10:" not in text and "ARmax1:" not in text
    tags = {}
    for path in glob.glob(str(run["opt_ml"] / "output" / "tensorboard" / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                tags.setdefault(value.tag, set()).add(event.step)
    for task in ("bbox", "segm"):
        assert {f"eval_per_class/{task}_AP/{c['name']}" for c in final["categories"]} <= set(tags)
        assert f"eval_report/{task}_confusion_matrix" in tags
        assert tags[f"eval/{task}_ARmax10"] == {BEST_STEP, STOP_STEP}
    for name in metrics.VALIDATION_LOSS_METRICS + (metrics.BEST_OBJECTIVE,):
        assert tags[name] == {BEST_STEP, STOP_STEP}, name


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
    assert (f"{BEST_STEP} steps" in doc.read_text()) and "circle" in doc.read_text()
