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
the model's own detections. The run logs to a real MLflow tracking server as a launch names the
deployment's (local_run --mlflow-tracking-uri; tests/training/mlflow_server.py), its artifact
store in the fake deployment's bucket on a moto server, and is read back: params, metric
history, report and SavedModel, and the job's S3 uploads evaluated against the training role.
Its own run (~3 min here): test_job.py's end-to-end run on 2 emulated hosts writes the same
report through the same code, on the chief. The run is started through benchmarks/demo_accuracy.py, and the other
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

from maskrcnn_contract import hyperparameters, metrics

from maskrcnn_job.evaluation import report
from tests.paths import REPO

# Starts training runs (make check leaves it to make test).
pytestmark = pytest.mark.end_to_end

# 8 steps per epoch (16 images, 2 per step); the drops at epochs 0.5, 1, 1.5 of 2 fall at steps
# 1, 2, 3 of max_steps=4 (schedule.py): 0.01 for step 1, then 1e-3, 1e-4, 1e-5.
RUN = ["--ranks", "1", "--train-images", "16", "--val-images", "8", "--image-size", "64",
       "--hp", "max_steps=4", "--hp", "eval_every_epochs=0.125", "--hp", "log_every_steps=2",
       "--hp", "checkpoint_every_steps=100", "--hp", "warmup_steps=0", "--hp", "epochs=2",
       "--hp", "lr_decay_epochs=0.5,1,1.5", "--hp", "momentum=0", "--hp", "base_learning_rate=0.01",
       "--hp", "early_stopping_patience=1", "--hp", "early_stopping_min_delta=0.05",
       "--draw", "2"]
BEST_STEP, STOP_STEP = 1, 2


BENCH = os.path.join(REPO, "benchmarks")
# The run's MLflow experiment, and where the tracking server keeps its artifacts: the
# deployment's artifact store (stacks/experiments.py), in the fake deployment's bucket.
EXPERIMENT = "evaluation-run"
ARTIFACT_PREFIX = "mlflow/"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run, started as `make bench` starts the demo's (benchmarks/demo_accuracy.py, once,
    with this run's arguments): its smoke run too. It logs to a real MLflow server, whose
    artifact store is the fake deployment's bucket in a moto server; the job's AWS calls are
    recorded to be evaluated against the training role."""
    from tests.iam.plugin import PlayedJob
    from tests.training import fake_deployment, mlflow_server

    work = tmp_path_factory.mktemp("evaluation-run")
    results = work / "bench-results"
    with fake_deployment.running() as deployment:
        # The job's S3 client as on SageMaker (no AWS_ENDPOINT_URL), pointed at moto by MLflow's
        # own setting; the server gets the same, as the managed one has its role.
        s3 = {**fake_deployment.CREDENTIALS, "AWS_DEFAULT_REGION": deployment.region,
              "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
              "MLFLOW_S3_ENDPOINT_URL": deployment.endpoint}
        with mlflow_server.running(str(work / "mlflow"), f"s3://{deployment.bucket}/"
                                   f"{ARTIFACT_PREFIX}", s3) as server:
            recording = PlayedJob({"TrainingJobName": "local-run",
                                   "RoleArn": deployment.parameters["training-role-arn"]},
                                  str(work), deployment.iam_published)
            command = [sys.executable, os.path.join(BENCH, "demo_accuracy.py"), "--repeats", "1",
                       "--work-dir", str(work), "--results-dir", str(results), "--", *RUN,
                       "--mlflow-tracking-uri", server.uri, "--mlflow-experiment", EXPERIMENT,
                       "--timeout", "1400"]  # past a hang, not past make test's load (901 s seen)
            done = subprocess.run(command, capture_output=True, text=True, timeout=1500,
                                  env=recording.environment({**os.environ, **s3}))
            log, errors = work / "local_run.log", work / "local_run.stderr.log"
            assert done.returncode == 0, (
                done.stdout[-3000:] + done.stderr[-3000:]
                + (log.read_text()[-5000:] if log.exists() else "")
                + (errors.read_text()[-3000:] if errors.exists() else ""))
            # What local_run printed on stdout (demo_accuracy.py keeps it in local_run.log).
            yield {"work": work, "stdout": log.read_text(), "opt_ml": work / "opt_ml",
                   "results": results, "stderr": errors.read_text(), "mlflow": server,
                   "job_calls": server.calls(), "iam": recording, "deployment": deployment,
                   "s3": s3}


def test_a_run_with_early_stopping_stops_on_a_plateau_and_exports_its_best_checkpoint(run):
    """Stopped after the evaluation of step 2 of 4, saying why; the SavedModel holds the best
    checkpoint's weights (step 1), not those the run stopped with (its rolling checkpoint of step
    2), and the log says which step it exports, the last one's figure beside it."""
    from tests.training.job_runs import model_values

    stdout = run["stdout"]
    assert re.search(rf"early stopping at step {STOP_STEP}: eval/segm_AP has not improved on step "
                     rf"{BEST_STEP} \(eval/segm_AP \S+\) for 1 evaluations "
                     r"\(early_stopping_patience=1, early_stopping_min_delta=0.05\)", stdout), \
        stdout[-3000:]
    assert re.search(rf"exporting the best evaluation, step {BEST_STEP} \(eval/segm_AP \S+\); "
                     rf"the last, step {STOP_STEP}: eval/segm_AP \S+", stdout)
    assert not re.search(r"^step [34]/4 ", stdout, re.M)  # no step after the stop
    checkpoints = run["opt_ml"] / "checkpoints"
    exported = model_values(run["opt_ml"] / "model" / "1" / "variables" / "variables")
    best = model_values(checkpoints / "best" / f"ckpt-{BEST_STEP}")
    last = model_values(checkpoints / f"ckpt-{STOP_STEP}")
    assert exported == best
    assert sum(best[k] != last[k] for k in best) > 0  # the stop step's weights are others
    # The best is kept apart from the rolling checkpoints, with what a resumed job reads back.
    assert sorted(os.listdir(checkpoints / "best")) == [
        "best.json", "checkpoint", f"ckpt-{BEST_STEP}.data-00000-of-00001",
        f"ckpt-{BEST_STEP}.index", "evaluation"]
    state = json.loads((checkpoints / "best" / "best.json").read_text())
    assert (state["metric"], state["step"], state["not_improved"]) == (
        "eval/segm_AP", BEST_STEP, [STOP_STEP])


def _artifacts(client, run_id, path):
    """{artifact path: size} of every file below `path` of the run."""
    found = {}
    for item in client.list_artifacts(run_id, path):
        found.update(_artifacts(client, run_id, item.path) if item.is_dir
                     else {item.path: item.file_size})
    return found


def _files(directory, prefix):
    return {f"{prefix}/{os.path.relpath(path, directory)}": os.path.getsize(path)
            for path in glob.glob(os.path.join(directory, "**"), recursive=True)
            if os.path.isfile(path)}


def test_the_run_is_logged_to_a_real_mlflow_server_and_read_back(run, iam_template, tmp_path):
    """The job's chief logged one run, named after the job, FINISHED: its params are the
    hyperparameters it parsed, each metric's history is its metric lines (names, values as
    printed, steps), the SavedModel and the report beside it are its artifacts in the
    deployment's artifact store. Its MLflow calls are exactly the actions the training role is
    granted on the tracking server, and its artifacts' upload is evaluated against that role
    (docs/aws-rules.md MLF-3)."""
    from mlflow.tracking import MlflowClient

    from maskrcnn_job.training import tracking
    from tests.infra.templates import statements_of

    stdout = run["stdout"]
    assert "MLflow tracking stopped" not in stdout, stdout[-3000:]
    assert "list index out of range" not in stdout + run["stderr"]
    client = MlflowClient(run["mlflow"].uri)
    (found,) = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    info, data = found.info, found.data
    assert info.status == "FINISHED"
    assert f"MLflow run {info.run_id} ended FINISHED" in stdout
    assert info.run_name.startswith("local-run-") and data.tags[tracking.JOB_TAG] == info.run_name
    assert info.artifact_uri == (f"s3://{run['deployment'].bucket}/{ARTIFACT_PREFIX}"
                                 f"{found.info.experiment_id}/{info.run_id}/artifacts")
    # The params, read by the job's own parser: the hyperparameters the job was given.
    given = run["opt_ml"] / "input" / "config" / "hyperparameters.json"
    assert set(data.params) == {field.name for field in hyperparameters.fields()}
    assert hyperparameters.parse(data.params) == hyperparameters.parse_json_file(str(given))
    # Each metric's history is its metric lines, in order, at the steps they were printed at.
    printed = {}
    for line in (run["work"] / "metrics.txt").read_text().splitlines():
        name, _, value = line.partition(": ")
        printed.setdefault(name, []).append(float(value))
    history = {name: sorted(client.get_metric_history(info.run_id, name),
                            key=lambda m: (m.step, m.timestamp)) for name in data.metrics}
    assert set(history) == set(printed)
    assert {name: [m.value for m in values] for name, values in history.items()} == printed
    assert [m.step for m in history["train/loss"]] == [int(v) for v in printed["train/step"]]
    assert [m.step for m in history["eval/segm_AP"]] == [BEST_STEP, STOP_STEP]
    # The SavedModel and the report beside it, file for file, as plain artifacts in S3.
    model = run["opt_ml"] / "model"
    from tests.training.fake_deployment import environment_set

    with environment_set(run["s3"]):  # the client reads the artifact store itself, as it wrote it
        assert _artifacts(client, info.run_id, tracking.MODEL_ARTIFACTS) == _files(
            model / "1", tracking.MODEL_ARTIFACTS)
        assert _artifacts(client, info.run_id, tracking.REPORT_ARTIFACTS) == _files(
            model / report.MODEL_REPORT_DIR, tracking.REPORT_ARTIFACTS)
        copy = client.download_artifacts(info.run_id, f"{tracking.REPORT_ARTIFACTS}/"
                                         f"{report.REPORT_FILE}", str(tmp_path))
    assert json.loads(open(copy, encoding="utf-8").read()) == report.read(
        str(model / report.MODEL_REPORT_DIR))
    stored = run["deployment"].keys(ARTIFACT_PREFIX)
    assert len(stored) == len(_files(model / "1", "")) + len(
        _files(model / report.MODEL_REPORT_DIR, ""))
    # What it called of MLflow is what the training role may call on the tracking server.
    calls = run["job_calls"]
    # Answered, but the look-up of the experiment the job then created (MLflow answers 404).
    assert calls[0][1].endswith("/experiments/get-by-name") and calls[0][2] == 404, calls
    assert calls[1:] and all(status == 200 for _, _, status in calls[1:]), calls
    granted = {action.split(":", 1)[1]
               for statement in statements_of(iam_template, "TrainingJobRole")
               for action in ([statement["Action"]] if isinstance(statement["Action"], str)
                              else statement["Action"]) if action.startswith("sagemaker-mlflow:")}
    assert set(run["mlflow"].actions(calls)) == granted
    # Its uploads, as the training role (IamDenied otherwise): S3 and the bucket's key.
    uploads = [c for c in run["iam"].check() if c["service"] == "s3"]
    assert uploads and {c["params"]["Key"].split("/")[0] + "/" for c in uploads} == {
        ARTIFACT_PREFIX}, uploads


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
    the path test_job.py and test_strategies.py play), converter_speed.py, large_images.py (one
    small image through each path, on the run's model), then report.py, with
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
    script("large_images.py", "--smoke", "--model", str(run["opt_ml"] / "model"),
           "--work-dir", str(tmp_path / "large"), "--results-dir", str(results))
    demo = json.loads((results / "demo_accuracy.json").read_text())
    assert demo["smoke"] and len(demo["runs"]) == 1
    assert demo["evaluation_report"] == report.read(str(run["opt_ml"] / "model" /
                                                        report.MODEL_REPORT_DIR))
    doc = tmp_path / "evaluation.md"
    shutil.copy(os.path.join(REPO, "docs", "evaluation.md"), doc)
    page = tmp_path / "benchmarks.md"
    script("report.py", str(results), "--out", str(page), "--evaluation-doc", str(doc))
    text = page.read_text()
    sections = 5 if os.geteuid() == 0 else 4
    assert text.count("Smoke run: it only checked that the path works") == sections
    assert "a smoke run: its figures mean nothing" in doc.read_text()
    assert (f"{BEST_STEP} steps" in doc.read_text()) and "circle" in doc.read_text()
