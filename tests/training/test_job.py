"""The training job end to end: real mpirun + Horovod ranks, Model Garden Mask R-CNN, COCO eval.

One module-scoped run serves most assertions: the launcher's Horovod request on the S3 data
source (tiny config, 20 steps), played on 2 emulated hosts x 1 rank as SageMaker starts it, under
the real SageMaker training toolkit (tests/training/playback.py), its hosts' /opt/ml/model
aggregated into the model.tar.gz SageMaker uploads, then local_run's drawing of predictions as
`make demo` ends. Its checkpoints are then resumed by a local run that fails on purpose after the
resume (its latest checkpoint truncated first; a rank on the worker host failing): it checks both
what it resumed from and the failure, without paying for an evaluation and an export. The one-host
failure and bad-input runs are separate; the one-host failure is also `make demo`'s path (one
/opt/ml tree, plain mpirun), whose evaluation, export and drawing are the module run's code.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest
from maskrcnn_contract.evaluation_report import MODEL_REPORT_DIR, REPORT_FILE

from maskrcnn_local import sagemaker_job
from tests import trained_runs
from tests.launcher import cli as launcher_cli
from tests.paths import SERVING_PYTHON
from tests.training import coco_oracle, easy_images, job_runs, playback
from tests.training.job_runs import FAILING_TRAIN, measured
from tests.training.learning import assert_the_loss_falls, assert_the_rpn_learns

# Starts training runs (make check leaves it to make test).
pytestmark = pytest.mark.end_to_end



# What a newcomer must not read past (make demo on a CPU machine): TensorFlow's CUDA probe where
# there is no GPU, its deprecation notices and grappler's cost-estimator warnings, Google's
# FutureWarning about this Python version. (What no setting reaches: local_run.py,
# tensorflow_environment.)
# COCO's progress lines and summary table (pycocotools and faster-coco-eval print them).
NOISE = ("cuInit", "PredictCost", "FutureWarning", "deprecat", "loading annotations",
         "index created", "Average Precision", "COCOeval_opt")


def _noise(run, shown=()):
    output = run.stdout + run.stderr
    return [line for line in output.splitlines()
            if any(p in line for p in NOISE if p not in shown)]


# Bounds set from measurements (`pytest -rP` prints them as "measured ..."), 2026-11-24, on this
# 2-core machine with three other test sessions running: from a rank's failure to the job's end
# 1.5 s (one host) and 5.4 s (2 hosts); the bound leaves a margin of more than 5x for a slower
# machine, and stays far below the minutes a hung job would take.
FAILURE_TO_END_SECONDS = {"one host": 30, "2 hosts": 30}
def _own_checkpoints(work, request):
    """Where the module run, a tuning job's candidate, keeps its checkpoints on algo-1: below its
    training job's name in the directory SageMaker syncs (docs/aws-rules.md TUN-6)."""
    return job_runs.opt_ml(work, "algo-1") / "checkpoints" / request["TrainingJobName"]


# The module run stops early on a plateau, as MultiWorkerMirroredStrategy's does
# (test_strategies.py): 16 images, 4 steps an epoch (2 ranks x 2), an evaluation every 5 steps
# (1.25 epochs) of 25 planned, and an early_stopping_min_delta no AP can gain with a patience
# of 3: the best at step 5, no improvement at 10, 15 and 20, both ranks stop at step 20 (as many
# steps as the run trained before, for its loss bound and checkpoints), and the export restores
# the best evaluation's checkpoint (step 5) over the last weights on rank 0 and broadcasts it.
EARLY_STOP = {"early_stopping_min_delta": "1", "eval_every_epochs": "1.25",
              "early_stopping_patience": "3"}
MAX_STEPS, STEPS, BEST = 25, 20, 5


@pytest.fixture(scope="module")
def runs(tmp_path_factory, launcher_deployment):
    work = tmp_path_factory.mktemp("job")
    # A candidate of the launcher's tuning job (its base_learning_rate searched), as SageMaker
    # starts it: the launch's request but for the name and TensorBoard's upload, and the
    # objective's name among its hyperparameters. It keeps its checkpoints below its name.
    first = playback.play_training(launcher_deployment, work, "horovod", "s3",
                                   max_steps=MAX_STEPS, tuning_candidate=True,
                                   hyperparameters=EARLY_STOP)
    own = _own_checkpoints(work, first.request)
    snapshot = {
        "algo-1 checkpoint dir": job_runs.files(job_runs.opt_ml(work, "algo-1") / "checkpoints"),
        "algo-1 checkpoints": job_runs.files(own),
        "algo-1 best": job_runs.files(own / "best"),
        "algo-2 checkpoints": job_runs.files(job_runs.opt_ml(work, "algo-2") / "checkpoints"),
        "algo-1 model": job_runs.files(job_runs.opt_ml(work, "algo-1") / "model"),
        "algo-2 model": job_runs.files(job_runs.opt_ml(work, "algo-2") / "model"),
        "tensorboard": glob.glob(
            str(job_runs.opt_ml(work, "algo-1") / "output" / "tensorboard" / "*")),
    }
    assert first.played.succeeded, first.stdout[-5000:]
    # The model.tar.gz as uploaded, and the evaluation report in it, copied out.
    archive = work / "uploaded" / "model.tar.gz"
    archive.parent.mkdir()
    launcher_deployment.client("s3").download_file(
        launcher_deployment.bucket, sagemaker_job.model_s3_uri(first.request).split("/", 3)[3],
        str(archive))
    with tarfile.open(archive) as tar:
        snapshot["archive members"] = [m.name[2:] if m.name.startswith("./") else m.name
                                       for m in tar.getmembers() if m.isfile()]
        for member in tar.getmembers():
            if member.isfile() and os.path.dirname(member.name).endswith(MODEL_REPORT_DIR):
                (archive.parent / os.path.basename(member.name)).write_bytes(
                    tar.extractfile(member).read())
    snapshot["archive"], snapshot["report"] = archive, archive.parent / REPORT_FILE
    # Before the resume below truncates ckpt-20: the export must hold the best's values.
    snapshot["weights"] = job_runs.exported_values(
        first.played.model_dir, own / "best" / f"ckpt-{BEST}", own / f"ckpt-{STEPS}")
    # What local_run prints at the end of a run on emulated hosts, without the drawing: drawing
    # the predictions is the shared trained model's (test_the_drawing_...).
    first.stdout += playback.report(first, work, draw=0)
    return {"work": work, "first": first, "snapshot": snapshot, "fake": launcher_deployment}


@pytest.fixture(scope="module")
def trained():
    """The shared trained model (tests/trained_runs.py): one that detects."""
    return trained_runs.get("shapes")


def test_loss_decreases(runs):
    output = runs["first"].stdout
    logged = "\n".join(line for line in output.splitlines() if "train/" in line)
    losses = job_runs.losses(output)
    assert len(losses) == 4, logged  # steps 5, 10, 15, 20
    assert_the_loss_falls("horovod", losses)
    rpn_score_losses = job_runs.losses(output, "rpn_score_loss")
    assert len(rpn_score_losses) == 4, logged
    assert_the_rpn_learns("horovod", rpn_score_losses)


def test_both_ranks_stop_early_at_the_same_step_and_the_best_evaluation_is_exported(runs):
    """Early stopping under Horovod: rank 0 decides, every rank stops at the same step (a rank
    that trained on would wait in its allreduce until the job's end), and the export restores
    the best evaluation's checkpoint (its weights: test_rank_0_writes_checkpoints_...)."""
    from maskrcnn_contract import metrics

    output = runs["first"].stdout
    job = "\n".join(line for line in output.splitlines() if line.startswith("[algo-"))
    assert job.count("evaluated 8 images") == STEPS // BEST  # at steps 5, 10, 15 and 20
    assert len(re.findall(metrics.regex_for("eval/segm_AP"), job)) == STEPS // BEST
    assert re.search(rf"early stopping at step {STEPS}: eval/segm_AP has not improved on step "
                     rf"{BEST} \(eval/segm_AP \S+\) for 3 evaluations "
                     r"\(early_stopping_patience=3, early_stopping_min_delta=1(\.0)?\)", output), \
        output[-3000:]
    assert f"step {STEPS + 1}/{MAX_STEPS}" not in output
    assert re.search(rf"exporting the best evaluation, step {BEST} \(eval/segm_AP \S+\); "
                     rf"the last, step {STEPS}", output)
    # Both ranks stopped at that step: rank 0 logged none after it, and the weights both hold at
    # the end are the same (a rank that trained on would hold others, or wait in its allreduce
    # until the job's timeout instead of both hosts ending).
    logged = [int(step) for step in re.findall(rf"\bstep (\d+)/{MAX_STEPS} ", output)]
    assert logged and logged[-1] == STEPS, logged
    assert len(set(job_runs.fingerprints(output).values())) == 1
    assert [host.exit_code for host in runs["first"].played.job.hosts] == [0, 0]


def test_weights_identical_on_every_rank(runs):
    """The ranks' fingerprints of their final weights, which rank 0 prints once the job's own
    check found them equal: that check compares what each rank holds and fails on a divergence
    (test_batch_norm.py's test_the_final_weights_check_...)."""
    fingerprints = job_runs.fingerprints(runs["first"].stdout)
    assert set(fingerprints) == {"0", "1"}
    assert fingerprints["0"] == fingerprints["1"]


def test_rank_0_writes_checkpoints_and_the_model_and_no_other_rank_writes_either(runs):
    snapshot = runs["snapshot"]
    assert "ckpt-10.index" in snapshot["algo-1 checkpoints"]
    assert "ckpt-20.index" in snapshot["algo-1 checkpoints"]
    assert snapshot["algo-2 checkpoints"] == []  # rank 1 runs on algo-2
    # SageMaker aggregates every host's /opt/ml/model into one model.tar.gz, and a name two hosts
    # write clashes (docs/aws-rules.md SM-10): the model and its serving code (the layout the
    # TensorFlow Serving container deploys: <version>/ and code/) come from rank 0 alone.
    assert snapshot["algo-1 model"] == ["1", "code"]
    assert snapshot["algo-2 model"] == []
    # The best evaluation's (best/ckpt-5) values, not the last checkpoint's (ckpt-20).
    job_runs.assert_exports_the_trained_weights(snapshot["weights"])
    assert snapshot["tensorboard"], "rank 0 writes TensorBoard summaries"
    output = runs["first"].stdout
    assert "rank 0 exported SavedModel to /opt/ml/model/1" in output
    assert "rank 1 exported" not in output


def test_the_hosts_got_the_launchers_request_as_sagemaker_hands_it_over(runs):
    """SM-17: hyperparameters.json is the request's HyperParameters verbatim, inputdataconfig.json
    names its channels, the S3 channel's objects are below /opt/ml/input/data/train, and the
    aggregated model is at <S3OutputPath><job>/output/model.tar.gz."""
    from maskrcnn_local import sagemaker_job

    request, work = runs["first"].request, runs["work"]
    channel, = request["InputDataConfig"]
    assert channel["DataSource"]["S3DataSource"]["S3Uri"].startswith("s3://")
    mode = channel.get("InputMode") or request["AlgorithmSpecification"]["TrainingInputMode"]
    for host in ("algo-1", "algo-2"):
        config = job_runs.opt_ml(work, host) / "input" / "config"
        assert json.loads((config / "hyperparameters.json").read_text()) \
            == request["HyperParameters"]
        assert json.loads((config / "inputdataconfig.json").read_text()) == {"train": {
            "TrainingInputMode": mode, "RecordWrapperType": "None",
            "S3DistributionType": "FullyReplicated"}}
        resources = json.loads((config / "resourceconfig.json").read_text())
        assert resources["current_host"] == host and resources["hosts"] == ["algo-1", "algo-2"]
        assert resources["current_instance_type"] == request["ResourceConfig"]["InstanceType"]
    channel = work / "channels" / "train"
    assert sorted(job_runs.files(channel)) == sorted(job_runs.files(work / "dataset" / "train"))
    key = sagemaker_job.model_s3_uri(request).split("/", 3)[3]
    assert key == f"jobs/{request['TrainingJobName']}/output/model.tar.gz"
    assert key in runs["fake"].keys("jobs/")


def test_a_tuning_candidate_trains_as_sagemaker_starts_it_and_reports_its_objective(runs):
    """TUN-3, TUN-4: the module run is a candidate of the launcher's tuning job. Its
    hyperparameters, as the hosts got them, are what SageMaker documents a candidate gets,
    derived here from the tuning job's request without the launcher's code: the definition's
    static hyperparameters, the value tried for the searched one and _tuning_objective_metric
    (the objective's metric name, which the job's parser passes over). Its name is the tuning
    job's with the candidate's number and a suffix. The objective's metric line, which the
    definition's regex reads, carries the exported (best) evaluation's mask AP, as its report
    in the uploaded model says."""
    from maskrcnn_contract import evaluation_report

    request, output = runs["first"].request, runs["first"].stdout
    tuning = runs["first"].tuning_request
    definition = tuning["TrainingJobDefinition"]
    objective = tuning["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]
    searched, = tuning["HyperParameterTuningJobConfig"]["ParameterRanges"][
        "ContinuousParameterRanges"]
    hps = json.loads((job_runs.opt_ml(runs["work"], "algo-1") / "input" / "config" /
                      "hyperparameters.json").read_text())
    assert searched["Name"] == "base_learning_rate"
    assert hps == {**definition["StaticHyperParameters"], "base_learning_rate": "0.01",
                   "_tuning_objective_metric": objective["MetricName"]}
    assert re.fullmatch(re.escape(tuning["HyperParameterTuningJobName"]) + r"-001-[0-9a-f]{8}",
                        request["TrainingJobName"]), request["TrainingJobName"]
    assert re.fullmatch(r"maskrcnn-[a-z0-9-]+-s3-horovod", tuning["HyperParameterTuningJobName"])
    # The launch's checkpoints, the run's prefix that every candidate shares (TUN-6); no
    # TensorBoard upload.
    assert request["CheckpointConfig"] == {
        "S3Uri": f"s3://{runs['fake'].bucket}/checkpoints/{tuning['HyperParameterTuningJobName']}/",
        "LocalPath": "/opt/ml/checkpoints"}
    assert "TensorBoardOutputConfig" not in request
    definition_regex, = [d["Regex"] for d in definition["AlgorithmSpecification"][
        "MetricDefinitions"] if d["Name"] == objective["MetricName"]]
    values = [float(v) for v in re.findall(definition_regex, output)]
    report = evaluation_report.read(str(runs["snapshot"]["report"]))
    assert values and values[-1] == pytest.approx(report["tasks"]["segm"]["summary"]["AP"],
                                                  abs=1e-6), (values, report["step"])


def test_a_tuning_candidate_keeps_its_checkpoints_below_its_job_name(runs):
    """TUN-6: the candidate's checkpoints, its best checkpoint with best.json and its run_info.json
    are in <checkpoint dir>/<its training job name>/, and nothing else of it is in the directory
    that SageMaker syncs with the tuning job's one CheckpointConfig, which every candidate
    shares. The resumed run below is this candidate restarted, resuming its own."""
    from maskrcnn_contract import job_io

    snapshot, job = runs["snapshot"], runs["first"].request["TrainingJobName"]
    assert snapshot["algo-1 checkpoint dir"] == [job]
    files = snapshot["algo-1 checkpoints"]
    assert {"ckpt-10.index", "ckpt-20.index", job_io.RUN_INFO, "best"} <= set(files), files
    assert "best.json" in snapshot["algo-1 best"], snapshot["algo-1 best"]
    assert f"a tuning job's candidate: its checkpoints are in /opt/ml/checkpoints/{job}, apart " \
           "from the other candidates' in /opt/ml/checkpoints" in runs["first"].stdout


def test_the_real_toolkit_ran_the_job_on_two_hosts(runs):
    output = runs["first"].stdout
    # The master's toolkit ran mpirun over both hosts; ranks report the host they run on.
    assert re.search(r"\[algo-1\].*mpirun --host algo-1,algo-2 -np 2", output)
    assert "-m mpi4py train.py" in output
    # The image keeps requirements.txt out of /opt/ml/code: the toolkit installs nothing.
    code = runs["work"] / "hosts" / "code"
    assert (code / "train.py").exists() and not (code / "requirements.txt").exists()
    assert "requirements.txt" not in output
    # The worker's toolkit hands its environment to sshd's sessions through /etc/environment.
    environment = (runs["work"] / "hosts" / "algo-2" / "etc" / "environment").read_text()
    assert "SM_CURRENT_HOST=algo-2" in environment
    # The ranks there know the job's name too (a candidate's checkpoint directory).
    assert f"TRAINING_JOB_NAME={runs['first'].request['TrainingJobName']}\n" in environment
    assert [host.exit_code for host in runs["first"].played.job.hosts] == [0, 0]


def test_coco_metrics_are_printed_for_sagemaker(runs):
    from maskrcnn_contract import metrics

    output = runs["first"].stdout
    for name in ("eval/bbox_AP", "eval/bbox_AP50", "eval/segm_AP", "eval/segm_AP50",
                 "train/learning_rate", "train/images_per_sec"):
        values = [float(v) for v in re.findall(metrics.regex_for(name), output)]
        assert values, name
        if name.startswith("eval/"):
            # A range, not a floor: after 20 steps every run's AP is about 0, whatever its rate
            # or labels (MIN_LOSS_DROP's comment).
            assert 0.0 <= values[-1] <= 1.0
    assert "evaluated 8 images" in output
    # The emulated hosts are SageMaker's: no metrics file, every metric line in the job's log.
    assert not (runs["work"] / "metrics.txt").exists()


def test_the_log_has_no_library_noise(runs):
    # But the cost estimator's: a TensorFlow warning, and SageMaker's TensorFlow toolkit sets
    # TF_CPP_MIN_LOG_LEVEL=1 (warnings shown) for the processes it starts. make demo's path shows
    # none (the one-host run below).
    assert _noise(runs["first"], shown=("PredictCost",)) == []


def test_the_endpoint_answers_an_image_with_detections_as_the_container_would(trained, tmp_path):
    """The handler as the TensorFlow Serving container runs it (maskrcnn_local/batch_transform.py)
    on the shared trained model, which detects: every detection's geometry (its box inside the
    image, a 28x28 mask of probabilities, its class among the model's, scores sorted), the
    default threshold, and on easy one-shape landscape and portrait images larger than the
    model's input, half of them EXIF-turned, the top detection on the object in the upright
    image's own pixels: its box IoU >= 0.5 with the ground-truth box, its mask pasted at full
    resolution IoU >= 0.5 with the ground truth's, both computed by pycocotools. (Boxes left in
    the resized image's pixels, as Model Garden's export leaves Mask R-CNN's: box IoU 0.02, 0,
    0, 0; 0.80-0.85 mapped back.)"""
    import tensorflow as tf
    from PIL import Image, ImageOps

    from maskrcnn_local import batch_transform

    served = batch_transform.serve(str(trained.model_dir))  # once: loading takes seconds
    categories = json.loads((trained.model_dir / "code" / "categories.json").read_text())
    names = {c["id"]: c["name"] for c in categories}
    size = json.loads((trained.opt_ml / "input" / "config" / "hyperparameters.json").read_text())
    images = easy_images.make(tmp_path / "easy", 4, int(size["image_size"]))
    answered, overlaps, mask_overlaps = 0, {}, {}
    for image_file, truth in images:
        with open(image_file, "rb") as f:
            encoded = f.read()
        body, content_type = batch_transform.answer(served, encoded, "image/jpeg",
                                                    "score_threshold=0")
        assert content_type == "application/json"
        answer = json.loads(body)
        width, height = ImageOps.exif_transpose(Image.open(image_file)).size  # as displayed
        assert answer["image_size"] == [height, width]
        # As many as the SavedModel itself returns above the detection generator's own cut.
        raw = served.saved_model.signatures["serving_bytes"](inputs=tf.constant([encoded]))
        detections = answer["detections"]
        assert len(detections) == int(raw["num_detections"][0])
        assert detections, f"the trained model detects nothing on {image_file}"
        answered += 1
        for detection in detections:
            x, y, w, h = detection["bbox"]
            assert -1 <= x and -1 <= y and w > 0 and h > 0
            assert x + w <= width + 1 and y + h <= height + 1
            assert detection["category_name"] == names[detection["category_id"]]
            assert 0 <= detection["score"] <= 1
            mask = detection["mask"]
            assert len(mask) == 28 and all(len(row) == 28 for row in mask)
            assert all(0 <= p <= 1 for row in mask for p in row)
        scores = [d["score"] for d in detections]
        assert scores == sorted(scores, reverse=True)
        top = detections[0]
        overlaps[os.path.basename(image_file)] = measured(
            f"top detection's box IoU with the ground truth, {os.path.basename(image_file)}",
            max(easy_images.box_iou(top["bbox"], a["bbox"]) for a in truth))
        mask_overlaps[os.path.basename(image_file)] = measured(
            f"top detection's mask IoU with the ground truth, {os.path.basename(image_file)}",
            easy_images.pasted_mask_iou(top, truth[0], height, width))
        # The default threshold keeps only the confident ones.
        body, _ = batch_transform.answer(served, encoded, "image/jpeg")
        assert all(d["score"] >= 0.3 for d in json.loads(body)["detections"])
    assert answered == len(images)
    assert min(overlaps.values()) >= 0.5, overlaps
    assert min(mask_overlaps.values()) >= 0.5, mask_overlaps
    with pytest.raises(ValueError, match="unsupported content type 'text/csv'"):
        batch_transform.answer(served, encoded, "text/csv")


def test_the_jobs_ap_is_pycocotools_on_the_detections_it_wrote_against_the_exports_own_file(
        trained):
    """The shared trained model's run evaluated its 8 validation images, real-shaped (several
    sizes, landscape and portrait, none of the model's input size): pycocotools' COCOeval of the
    detections the job wrote (in the images' own pixels, the export's ids) against the
    generator's annotation file, which no code of the job touched, gives the job's own bbox and
    segm AP (faster-coco-eval's), and the masks' AP50 is that of a model whose detections lie on
    their objects. (With the boxes left in the resized image's pixels both would agree on a
    figure near 0: the AP50 bound is what catches that.)"""
    from maskrcnn_contract import evaluation_report
    from maskrcnn_job.training.evaluation import DETECTIONS_FILE

    annotation_file = trained.dataset / "annotations" / "instances_val2017.json"
    export = json.loads(annotation_file.read_text())
    sizes = {(image["width"], image["height"]) for image in export["images"]}
    assert len(sizes) > 2 and any(w > h for w, h in sizes) and any(w < h for w, h in sizes), sizes
    found = glob.glob(str(trained.opt_ml / "output" / "data" / "evaluation" / "step-*" /
                          DETECTIONS_FILE))
    assert len(found) == 1, found  # the latest evaluation's only
    detections = coco_oracle.read_detections(found[0])
    report = evaluation_report.read(str(trained.model_dir / MODEL_REPORT_DIR))
    for kind in ("bbox", "segm"):
        reference = coco_oracle.stats(annotation_file, detections, kind)
        job_ap = report["tasks"][kind]["summary"]["AP"]
        assert reference[0] == pytest.approx(job_ap, abs=1e-6), kind
        if kind == "segm":
            assert measured("shared model: segm AP50 from its written detections",
                            reference[1]) >= 0.3


def test_the_serving_images_tensorflow_loads_the_model_and_answers_as_training_does(trained,
                                                                                     tmp_path):
    """docs/serving.md, "The serving image": the endpoint's TensorFlow Serving 2.20 runs
    TensorFlow 2.20's runtime, one release older than the TF 2.21 that exported the model. TF 2.20
    (.venv-serving) loads the SavedModel as TensorFlow Serving does (every op must be registered)
    and answers an image through `serving_bytes` as TF 2.21 answers it: the same detections (the
    shared trained model makes some), boxes, scores and masks."""
    import numpy as np
    import tensorflow as tf

    version_dir = trained.model_dir / "1"
    image_file = sorted(glob.glob(str(trained.dataset / "val2017" / "*.jpg")))[0]
    out = tmp_path / "served.npz"
    probe = subprocess.run([str(SERVING_PYTHON),
                            os.path.join(os.path.dirname(__file__), "serving_probe.py"),
                            str(version_dir), image_file, str(out)],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert probe.returncode == 0, probe.stderr[-3000:]
    loaded = json.loads(probe.stdout.strip().splitlines()[-1])
    assert loaded["tensorflow"] == "2.20.0" and tf.__version__ == "2.21.0"
    assert {"serving_default", "serving_bytes"} <= set(loaded["signatures"])
    served = np.load(out)
    with open(image_file, "rb") as f:
        exported = tf.saved_model.load(str(version_dir)).signatures["serving_bytes"](
            inputs=tf.constant([f.read()]))
    count = int(exported["num_detections"][0])
    assert count > 0, "nothing to compare: the shared trained model detects nothing here"
    assert int(served["num_detections"][0]) == count
    for key, tolerance in (("detection_classes", 0), ("detection_boxes", 1e-2),
                           ("detection_scores", 1e-4), ("detection_masks", 1e-3)):
        np.testing.assert_allclose(served[key][0][:count], exported[key].numpy()[0][:count],
                                   atol=tolerance, err_msg=key)


def test_the_aggregated_model_is_the_one_the_run_names(runs):
    """What local_run prints at the end of a run on emulated hosts: the hosts' model directories
    aggregated as SageMaker packs them, and the final metrics last."""
    output, work = runs["first"].stdout, runs["work"]
    assert f"SavedModel: {work / 'model' / '1'}" in output
    assert [line.split(": ")[0] for line in output.splitlines()[-4:]] == [
        "eval/bbox_AP", "eval/bbox_AP50", "eval/segm_AP", "eval/segm_AP50"]


def test_the_run_ends_with_its_predictions_drawn_beside_the_ground_truth(trained):
    """What `make demo` ends with (local_run.report), on the shared trained model's run: the first
    validation images drawn through its SavedModel, and the detections it drew written as COCO
    results that pycocotools reads."""
    from PIL import Image
    from pycocotools.coco import COCO

    from maskrcnn_local import predict

    output, work = trained.stdout, trained.work
    assert f"SavedModel: {trained.model_dir / '1'}" in output
    # The run's last lines: the final metrics, then the picture.
    last = output.splitlines()[-5:]
    assert [line.split(": ")[0] for line in last[:4]] == [
        "eval/bbox_AP", "eval/bbox_AP50", "eval/segm_AP", "eval/segm_AP50"]
    comparison, = re.findall(r"^predictions drawn \(ground truth left, predicted right\): (\S+)$",
                             last[4], re.M)
    assert comparison == str(work / "predictions" / predict.COMPARISON_FILE)
    grid = Image.open(comparison)
    assert grid.height > 4 * 384 and grid.width > 2 * 384  # 4 rows (--draw 4), 2 columns
    images = sorted(glob.glob(str(trained.dataset / "val2017" / "*")))[:4]  # JPEG and PNG
    for image in images:
        name = os.path.splitext(os.path.basename(image))[0]
        assert Image.open(work / "predictions" / (name + ".png")).width >= 384
    annotations = COCO(str(trained.dataset / "annotations" / "instances_val2017.json"))
    results = json.loads((work / "predictions" / predict.RESULTS_FILE).read_text())
    assert results, "the trained model drew no detection"
    assert {r["image_id"] for r in results} <= set(annotations.getImgIds())
    for result in results:
        assert set(result) == {"image_id", "category_id", "bbox", "score", "segmentation"}
    assert len(annotations.loadRes(results).anns) == len(results)


def test_predict_reads_the_model_tar_gz_sagemaker_uploads(runs, tmp_path):
    from maskrcnn_local import predict, sagemaker_job

    # Where SageMaker puts it, as the playback packed the hosts' /opt/ml/model: 1/, code/.
    fake, request = runs["fake"], runs["first"].request
    archive = tmp_path / "model.tar.gz"
    fake.client("s3").download_file(
        fake.bucket, sagemaker_job.model_s3_uri(request).split("/", 3)[3], str(archive))
    image = sorted(glob.glob(str(runs["work"] / "coco-synthetic" / "val2017" / "*.jpg")))[0]
    out = tmp_path / "out"
    assert predict.main([str(archive), image, "--out", str(out), "--score-threshold", "0.05"]) == 0
    assert (out / (os.path.basename(image)[:-4] + ".png")).exists()
    assert isinstance(json.loads((out / predict.RESULTS_FILE).read_text()), list)
    with pytest.raises(SystemExit):  # a bad argument: argparse's error, exit status 2
        predict.main([str(archive), image, "--out", str(out), "--compare", "1"])


def test_the_uploaded_model_holds_the_best_evaluations_report(runs):
    """The model.tar.gz SageMaker uploads holds, beside the SavedModel and the endpoint's code,
    the report of the evaluation it exports, the best (code/evaluation/report.json: step 5, the
    8 val images), and every picture it names (docs/evaluation.md)."""
    from maskrcnn_contract import evaluation_report

    members = runs["snapshot"]["archive members"]
    assert "1/saved_model.pb" in members and "code/inference.py" in members
    assert f"{MODEL_REPORT_DIR}/{REPORT_FILE}" in members, sorted(members)
    report = evaluation_report.read(str(runs["snapshot"]["report"]))
    assert (report["step"], report["images"]) == (BEST, 8)
    assert {f"{MODEL_REPORT_DIR}/{name}" for name in
            evaluation_report.picture_names(report).values()} <= set(members)
    assert f"evaluation report beside the model: /opt/ml/model/{MODEL_REPORT_DIR}" \
        in runs["first"].stdout


def _sent_with_its_model(fake, request: dict, snapshot: dict) -> None:
    """The played request itself, sent to the fake deployment (moto's jobs end Completed when
    created; the fake job writes a model of its own), with the model.tar.gz the run uploaded."""
    from botocore.exceptions import ClientError

    sagemaker = fake.client("sagemaker")
    try:
        sagemaker.describe_training_job(TrainingJobName=request["TrainingJobName"])
    except ClientError:
        sagemaker.create_training_job(**request)
    fake.client("s3").upload_file(str(snapshot["archive"]), fake.bucket,
                                  sagemaker_job.model_s3_uri(request).split("/", 3)[3])


def test_the_report_cli_prints_the_played_jobs_report(runs, tmp_path):
    """`python -m maskrcnn_launcher report <job>` on the played job, Completed in the fake
    deployment with the model.tar.gz the run uploaded: the report.json it writes is the one in
    the archive, byte for byte, and it prints its table and pictures."""
    from maskrcnn_contract import evaluation_report

    fake, request, snapshot = runs["fake"], runs["first"].request, runs["snapshot"]
    job = request["TrainingJobName"]
    _sent_with_its_model(fake, request, snapshot)
    out = tmp_path / "report"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    result = launcher_cli.run(dict(environment, **fake.environment()), "report", job, "--out",
                              str(out))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (out / REPORT_FILE).read_bytes() == snapshot["report"].read_bytes()
    report = evaluation_report.read(str(out))
    lines = result.stdout.splitlines()
    assert lines[0] == (f"evaluation report of {job} (step {BEST}, 8 images, {report['detections']} "
                        f"detections, {report['evaluator']}): {out / REPORT_FILE}")
    pictures = evaluation_report.picture_names(report)
    assert lines[1:] == evaluation_report.table(report) + [
        f"{kind}: {out / name}" for kind, name in pictures.items()]
    assert sorted(os.listdir(out)) == sorted([REPORT_FILE] + list(pictures.values()))


def test_failing_rank_fails_the_job_fast_with_its_cause(tmp_path):
    # Rank 1 fails at step 6, once step 5 is logged, while rank 0 waits in step 6's allreduce. (A
    # failure on a worker host: the resumed run below.)
    run = job_runs.run(tmp_path, "--hp", "max_steps=50", "--program", FAILING_TRAIN,
                     env={"INJECT_FAILURE": "1:6"}, timeout=600)
    assert run.returncode != 0
    # `make demo`'s path: one /opt/ml tree, plain mpirun, no emulated hosts; no pretrained
    # backbone, so batch norm is per rank instead of frozen (docs/batch-norm.md, "Local runs").
    assert "emulated hosts" not in run.stdout and "running: mpirun " in run.stdout
    assert "batch_norm: per_rank (" in run.stdout
    failure = tmp_path / "opt_ml" / "output" / "failure"
    text = failure.read_text()
    assert "rank 1 on algo-1: RuntimeError: injected failure at step 6" in text
    # From the failing rank's report to the whole job's end: well under a minute.
    seconds = measured("one host: failure to the job's end (s)",
                       run.finished_at - failure.stat().st_mtime)
    assert seconds < FAILURE_TO_END_SECONDS["one host"]
    assert "failure (algo-1):" in run.stdout
    # One progress line per log step on the console; the metric lines in the run's metrics file,
    # none past the failure.
    assert re.findall(r"^step \d+/50 ", run.stdout, re.M) == ["step 5/50 "]
    assert not re.search(r"^train/\w+: ", run.stdout, re.M)
    assert str(tmp_path / "metrics.txt") in run.stdout
    logged = (tmp_path / "metrics.txt").read_text()
    assert "train/step: 5\n" in logged and "train/step: 10" not in logged
    assert _noise(run) == []


def test_a_resumed_run_skips_a_truncated_checkpoint_and_its_failing_rank_fails_the_job(runs):
    """The module run, a tuning job's candidate, restarted as after a spot interruption (its
    name and hyperparameters' _tuning_objective_metric as before): it resumes its own
    checkpoints, not the newer ones another candidate and a launch of the same run keep in the
    directory they share (TUN-6). Its latest checkpoint (ckpt-20) is truncated, as by a job
    stopped while writing it: the resume warns and starts from ckpt-10. Then rank 1 (on algo-2)
    fails at step 13. Under the real toolkit the worker host's toolkit exits 0; the master's must
    carry the cause."""
    work, job = runs["work"], runs["first"].request["TrainingJobName"]
    checkpoints = _own_checkpoints(work, runs["first"].request)
    shared = checkpoints.parent
    # Another candidate's newer checkpoint, and a launch's of the same run (its layout: flat).
    other = shared / re.sub(r"-001-([0-9a-f]{8})$", r"-002-\1", job)
    other.mkdir()
    for folder in (other, shared):
        for suffix in (".index", ".data-00000-of-00001"):
            shutil.copy(checkpoints / f"ckpt-10{suffix}", folder / f"ckpt-40{suffix}")
    job_runs.truncate(checkpoints / "ckpt-20.data-00000-of-00001")
    objective = json.loads((job_runs.opt_ml(work, "algo-1") / "input" / "config" /
                            "hyperparameters.json").read_text())["_tuning_objective_metric"]
    run = job_runs.run(work, "--hosts", "2", "--ranks", "2", "--hp", "max_steps=30", "--resume",
                     "--hp", f"_tuning_objective_metric={objective}",
                     "--container-env", f"TRAINING_JOB_NAME={job}",
                     "--program", FAILING_TRAIN, "--container-env", "INJECT_FAILURE=1:13",
                     timeout=600)
    assert run.returncode != 0, run.stdout[-3000:]
    assert re.search(rf"checkpoint /opt/ml/checkpoints/{job}/ckpt-20 does not restore",
                     run.stdout), run.stdout[-4000:]
    assert re.search(rf"resumed from /opt/ml/checkpoints/{job}/ckpt-10 at step 10", run.stdout)
    cause = "rank 1 on algo-2: RuntimeError: injected failure at step 13"
    worker_failure = job_runs.opt_ml(work, "algo-2") / "output" / "failure"
    assert cause in worker_failure.read_text()
    # What DescribeTrainingJob would say: the master's failure file, first 1024 characters.
    reason = run.stdout.split("failure (job failure reason):\n", 1)[1]
    assert cause in reason[:1024], reason[:1500]
    assert "algo-1: exit status 1" in run.stdout
    # From the failing rank's report to the whole job's end: well under a minute.
    seconds = measured("2 hosts: failure to the job's end (s)",
                       run.finished_at - worker_failure.stat().st_mtime)
    assert seconds < FAILURE_TO_END_SECONDS["2 hosts"]
    assert "train/step: 15" not in run.stdout
    # Nothing past the failure was saved: the next resume starts from ckpt-10 again.
    assert "ckpt-30.index" not in job_runs.files(checkpoints)


def test_a_run_whose_program_exported_no_model_fails_naming_the_directory(tmp_path):
    """A program that exits 0 without a SavedModel: the run fails, naming where the model should
    be, unless the caller says its program exports none (benchmarks/step_timing.py's runs)."""
    program = tmp_path / "exports_nothing.py"
    program.write_text("print('trained nothing, exported nothing')\n")
    work = tmp_path / "work"
    # One process, no mpirun: the check is local_run's, after any distribution.
    run = job_runs.run(work, "--distribution", "multi_worker_mirrored", "--program", str(program),
                     timeout=300)
    assert run.returncode == 1, run.stdout[-3000:]
    model = work / "opt_ml" / "model" / "1"
    assert (f"the program exited 0 but exported no SavedModel: no saved_model.pb in {model}"
            in run.stdout), run.stdout[-3000:]
    assert "--no-model-expected" in run.stdout
    run = job_runs.run(work, "--distribution", "multi_worker_mirrored", "--program", str(program),
                     "--no-model-expected", timeout=300)
    assert run.returncode == 0, run.stdout[-3000:]
    assert f"no SavedModel in {model.parent}: the program exported none" in run.stdout


def test_bad_hyperparameter_is_a_clear_error(tmp_path):
    opt_ml = job_runs.single_rank_layout(tmp_path, {"image_size": "big"}, {"train": None})
    result = job_runs.train_single_rank(opt_ml)
    assert result.returncode != 0
    assert ("HyperparameterError: hyperparameter image_size='big': expected an integer"
            in (opt_ml / "output" / "failure").read_text())


def test_missing_channel_is_a_clear_error(tmp_path):
    opt_ml = job_runs.single_rank_layout(tmp_path, {}, {})
    result = job_runs.train_single_rank(opt_ml)
    assert result.returncode != 0
    assert "input channel 'train' is missing" in (opt_ml / "output" / "failure").read_text()


def test_corrupt_tfrecord_is_a_clear_error(runs, tmp_path):
    channel = runs["work"] / "dataset" / "train"
    opt_ml = job_runs.single_rank_layout(tmp_path, {"backbone": "resnet18", "model_preset": "compact",
                                            "image_size": "64", "max_steps": "3",
                                            "lr_decay_epochs": "", "mixed_precision": "false",
                                            "batch_norm": "sync"},
                                {"train": channel})
    shard = sorted(glob.glob(str(opt_ml / "input" / "data" / "train" / "tfrecords" / "train-*")))[0]
    with open(shard, "r+b") as f:
        f.seek(os.path.getsize(shard) // 2)
        f.write(b"\xff" * 64)
    result = job_runs.train_single_rank(opt_ml)
    assert result.returncode != 0
    failure = (opt_ml / "output" / "failure").read_text()
    # The shard and the record, not the pattern: where to look, and what to re-convert.
    assert f"corrupt training data in shard {shard}, record " in failure, failure
    assert re.search(r"record \d+ \(after image id \d+\)", failure), failure


def test_pretrained_channel_checkpoint_is_found_or_named_as_missing(tmp_path):
    from maskrcnn_job.job import pretrained_checkpoint
    from maskrcnn_job.sagemaker_env import ContractError

    nested = tmp_path / "resnet50_imagenet"
    nested.mkdir()
    for name in ("ckpt-28080.index", "ckpt-28080.data-00000-of-00001"):
        (nested / name).write_bytes(b"")
    assert pretrained_checkpoint(str(tmp_path)) == str(nested / "ckpt-28080")
    (nested / "ckpt-1.index").write_bytes(b"")
    with pytest.raises(ContractError, match="expected one TensorFlow checkpoint"):
        pretrained_checkpoint(str(tmp_path))


def _resume_layout(runs, tmp_path):
    """A single-rank launch (no tuning job's candidate: its checkpoints flat in the checkpoint
    directory) whose checkpoints are copies of the module run's (ckpt-10/20)."""
    config = job_runs.opt_ml(runs["work"], "algo-1") / "input" / "config"
    hps = {k: v for k, v in json.loads((config / "hyperparameters.json").read_text()).items()
           if not k.startswith(("sagemaker_", "_tuning_objective_metric"))}
    hps.update(max_steps="30")
    opt_ml = job_runs.single_rank_layout(tmp_path, hps, {"train": runs["work"] / "dataset" / "train"})
    shutil.copytree(_own_checkpoints(runs["work"], runs["first"].request), opt_ml / "checkpoints")
    return opt_ml


def test_no_complete_checkpoint_is_a_clear_error(runs, tmp_path):
    opt_ml = _resume_layout(runs, tmp_path)
    for data in glob.glob(str(opt_ml / "checkpoints" / "ckpt-*.data-*")):
        job_runs.truncate(data)
    result = job_runs.train_single_rank(opt_ml)
    assert result.returncode != 0
    failure = (opt_ml / "output" / "failure").read_text()
    assert "CheckpointError: no checkpoint in" in failure and "restores" in failure
    assert "ckpt-20: " in failure and "ckpt-10: " in failure
