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
import sys
import tarfile
import time

import pytest
from maskrcnn_contract.evaluation_report import MODEL_REPORT_DIR, REPORT_FILE

from maskrcnn_local import sagemaker_job
from tests.training import playback
from tests.training.playback import TINY
from tests.paths import REPO

TRAIN = os.path.join(REPO, "training_code", "train.py")
FAILING_TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "failing_train.py")


def _local_run(work_dir, *args, env=None, timeout=900):
    command = [sys.executable, "-m", "maskrcnn_local.local_run", "--work-dir", str(work_dir),
               *TINY, *args,
               "--timeout", str(timeout - 30)]
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                            env=dict(os.environ, **(env or {})))
    result.seconds = time.time() - started
    result.finished_at = time.time()
    return result


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
# What the learning bounds tell apart (issue 33). Measured 2026-11-24 on the module runs: the loss
# fell by 25% and 29% (Horovod, two runs), 33% (MultiWorkerMirroredStrategy) and 35% (parameter
# servers) from the first logged window to the last over their 20-40 steps; the Horovod run at a
# learning rate 100 times too low (base_learning_rate=0.0001) fell by 13%.
# Measured 2026-11-27 on this 2-core machine, loaded (make bench's demo training on both cores,
# other sessions' tests), two runs at the tests' rate, one of each break: one-host local runs of
# TINY, 20 steps, 2 Horovod ranks on one host (the module run's global batch, rate and threads
# per rank, on one /opt/ml tree instead of 2 emulated hosts), components from the metric lines:
#   run                              loss drop  rpn_score_loss drop  final bbox/segm AP
#   base_learning_rate=0.01, run 1     22.3%          46.6%            0.0003 / 0.0000
#   base_learning_rate=0.01, run 2     22.5%          47.9%            0.0000 / 0.0000
#   0.001 (10 times too low)           42.6%           6.5%            0.0018 / 0.0000
#   0.01, train labels shuffled        24.4%          44.9%            0.0007 / 0.0001
#   0.01, later runs (a tuning          27.5%, 24.2%   46.5%, 46.2%
#   candidate, validation losses off)
# (shuffled: the train split's category ids permuted across its 65 non-crowd annotations, 53 of
# them changed; the validation split true.)
# - MIN_LOSS_DROP fails a far too low rate (100x: 13%; 15% lies between it and the healthy
#   runs' 22.3-27.5%, which vary run to run: CI failed this test once without printing the
#   figure, so the bound keeps room below them), but not a 10 times too low one, whose
#   loss falls further than a healthy run's: a healthy rate's first window already holds much of
#   the fall of the second stage's classifier (frcnn_cls_loss 1.38-1.51 there, 1.94 at 10x
#   low), and its better RPN then hands the second stage more foreground proposals, whose box
#   loss rises (frcnn_box_loss 0.27-0.28 -> 0.51-0.53; 0.25 -> 0.25 at 10x low). The total mixes
#   opposite movements.
# - MIN_RPN_SCORE_LOSS_DROP fails the 10 times too low rate: the RPN's objectness loss starts at
#   ln 2 whatever the labels and falls only as the RPN learns (0.684 -> 0.356-0.365 healthy,
#   0.692 -> 0.647 at 10x low); 25% lies between 6.5% and 44.9-47.9%.
# - Shuffled labels: nothing these runs log tells them apart. After 20 steps the second stage has
#   learned object against background, not which class (frcnn_cls_loss ends at 1.04-1.15
#   healthy, 1.09 shuffled), the RPN is class-agnostic, and the AP is about 0 for every run: no
#   AP floor exists at this length, so the AP is only checked to lie in [0, 1]. An AP floor needs
#   a run long enough to have an AP (the demo's, which make bench runs, not the tests).
MIN_LOSS_DROP = {"horovod": 0.15, "multi_worker_mirrored": 0.18, "parameter_server": 0.18}
# Horovod's only: the strategies' runs have not been measured for it (their module runs print the
# figure, "measured <distribution>: rpn_score_loss drop", once they call the helper).
MIN_RPN_SCORE_LOSS_DROP = {"horovod": 0.25}


def measured(name: str, value: float) -> float:
    """A figure a bound below was set from, printed (`pytest -rP` shows them) for recalibration."""
    print(f"measured {name}: {value:.3f}")
    return value


def _losses(output, name="loss"):
    """The logged values of train/<name> (the total loss, or a component: rpn_score_loss, ...)."""
    return [float(v) for v in re.findall(rf"train/{name}: (\S+)$", output, re.M)]


def assert_the_loss_falls(distribution: str, losses) -> None:
    """The last logged loss (the mean of the last log window, over the ranks) is below the first
    by at least MIN_LOSS_DROP[distribution] of the first."""
    drop = measured(f"{distribution}: loss drop, first to last logged", 1 - losses[-1] / losses[0])
    assert drop >= MIN_LOSS_DROP[distribution], \
        f"{distribution}: the loss fell by {drop:.1%} ({losses}), less than " \
        f"{MIN_LOSS_DROP[distribution]:.0%}"


def assert_the_rpn_learns(distribution: str, rpn_score_losses) -> None:
    """The RPN's objectness loss (train/rpn_score_loss, the mean of a log window over the ranks)
    falls from the first logged window to the last by at least
    MIN_RPN_SCORE_LOSS_DROP[distribution] of the first: a rate 10 times too low fails it, which
    the total loss's bound lets pass (MIN_LOSS_DROP's comment)."""
    drop = measured(f"{distribution}: rpn_score_loss drop, first to last logged",
                    1 - rpn_score_losses[-1] / rpn_score_losses[0])
    assert distribution in MIN_RPN_SCORE_LOSS_DROP, \
        f"{distribution}: no MIN_RPN_SCORE_LOSS_DROP measured yet; this run's drop: {drop:.1%}"
    assert drop >= MIN_RPN_SCORE_LOSS_DROP[distribution], \
        f"{distribution}: the RPN's objectness loss fell by {drop:.1%} ({rpn_score_losses}), " \
        f"less than {MIN_RPN_SCORE_LOSS_DROP[distribution]:.0%}: is the learning rate too low?"


def _fingerprints(output):
    """{rank: fingerprint of the weights that rank holds}, from rank 0's one summary line."""
    line, = re.findall(r"final weights fingerprints by rank: ([0-9a-f ]+) \(", output)
    return {str(rank): fingerprint for rank, fingerprint in enumerate(line.split())}


def _model_values(prefix) -> dict:
    """{object path: SHA-256 of the value} of every model variable in the TensorFlow checkpoint
    `prefix`: a training checkpoint (tf.train.Checkpoint(model=..., optimizer=...): the optimizer's
    slots left out) or a SavedModel's variables (<version>/variables/variables, whose root holds
    the model as `model` too: serving/export.py). A path names the same variable in both."""
    import hashlib

    import tensorflow as tf

    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    reader = tf.train.load_checkpoint(str(prefix))
    return {key[:-len(suffix)]: hashlib.sha256(reader.get_tensor(key).tobytes()).hexdigest()
            for key in reader.get_variable_to_shape_map()
            if key.startswith("model/") and key.endswith(suffix) and ".OPTIMIZER_SLOT" not in key}


def _exported_and_checkpointed(model_dir, checkpoints, last: int, earlier: int) -> dict:
    """The model values of the SavedModel in `model_dir` and of checkpoints ckpt-`last` (the
    run's end) and ckpt-`earlier`, for _assert_exports_the_trained_weights."""
    return {"export": _model_values(os.path.join(model_dir, "1", "variables", "variables")),
            "last": _model_values(os.path.join(checkpoints, f"ckpt-{last}")),
            "earlier": _model_values(os.path.join(checkpoints, f"ckpt-{earlier}"))}


def _assert_exports_the_trained_weights(values: dict) -> None:
    """The SavedModel holds the values the run ended with (its last checkpoint's, variable by
    variable), and those are trained ones: most differ from an earlier checkpoint's. A stale
    export (the values before training, or an inference copy not refreshed) fails it."""
    export, last, earlier = values["export"], values["last"], values["earlier"]
    assert set(export) == set(last), sorted(set(export) ^ set(last))[:5]
    differing = sorted(k for k in last if export[k] != last[k])
    assert not differing, f"{len(differing)} of {len(last)} exported variables are not the " \
                          f"last checkpoint's: {differing[:5]}"
    moved = [k for k in last if last[k] != earlier[k]]
    assert len(moved) > 0.9 * len(last), f"{len(moved)} of {len(last)} variables moved"


def _opt_ml(work, host):
    return work / "hosts" / host / "opt_ml"


def _files(directory):
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def _own_checkpoints(work, request):
    """Where the module run, a tuning job's candidate, keeps its checkpoints on algo-1: below its
    training job's name in the directory SageMaker syncs (docs/aws-rules.md TUN-6)."""
    return _opt_ml(work, "algo-1") / "checkpoints" / request["TrainingJobName"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, launcher_deployment):
    work = tmp_path_factory.mktemp("job")
    # A candidate of the launcher's tuning job (its base_learning_rate searched), as SageMaker
    # starts it: the launch's request but for the name and TensorBoard's upload, and the
    # objective's name among its hyperparameters. It keeps its checkpoints below its name.
    first = playback.play_training(launcher_deployment, work, "horovod", "s3", max_steps=20,
                                   tuning_candidate=True)
    own = _own_checkpoints(work, first.request)
    snapshot = {
        "algo-1 checkpoint dir": _files(_opt_ml(work, "algo-1") / "checkpoints"),
        "algo-1 checkpoints": _files(own),
        "algo-1 best": _files(own / "best"),
        "algo-2 checkpoints": _files(_opt_ml(work, "algo-2") / "checkpoints"),
        "algo-1 model": _files(_opt_ml(work, "algo-1") / "model"),
        "algo-2 model": _files(_opt_ml(work, "algo-2") / "model"),
        "tensorboard": glob.glob(
            str(_opt_ml(work, "algo-1") / "output" / "tensorboard" / "*")),
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
    # Before the resume below truncates ckpt-20.
    snapshot["weights"] = _exported_and_checkpointed(first.played.model_dir, own, 20, 10)
    first.stdout += playback.report(first, work, draw=4)
    return {"work": work, "first": first, "snapshot": snapshot, "fake": launcher_deployment}


def test_loss_decreases(runs):
    output = runs["first"].stdout
    logged = "\n".join(line for line in output.splitlines() if "train/" in line)
    losses = _losses(output)
    assert len(losses) == 4, logged  # steps 5, 10, 15, 20
    assert_the_loss_falls("horovod", losses)
    rpn_score_losses = _losses(output, "rpn_score_loss")
    assert len(rpn_score_losses) == 4, logged
    assert_the_rpn_learns("horovod", rpn_score_losses)


def test_weights_identical_on_every_rank(runs):
    fingerprints = _fingerprints(runs["first"].stdout)
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
    _assert_exports_the_trained_weights(snapshot["weights"])  # ckpt-20's values, not ckpt-10's
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
        config = _opt_ml(work, host) / "input" / "config"
        assert json.loads((config / "hyperparameters.json").read_text()) \
            == request["HyperParameters"]
        assert json.loads((config / "inputdataconfig.json").read_text()) == {"train": {
            "TrainingInputMode": mode, "RecordWrapperType": "None",
            "S3DistributionType": "FullyReplicated"}}
        resources = json.loads((config / "resourceconfig.json").read_text())
        assert resources["current_host"] == host and resources["hosts"] == ["algo-1", "algo-2"]
        assert resources["current_instance_type"] == request["ResourceConfig"]["InstanceType"]
    channel = work / "channels" / "train"
    assert sorted(_files(channel)) == sorted(_files(work / "dataset" / "train"))
    key = sagemaker_job.model_s3_uri(request).split("/", 3)[3]
    assert key == f"jobs/{request['TrainingJobName']}/output/model.tar.gz"
    assert key in runs["fake"].keys("jobs/")


def test_a_tuning_candidate_trains_as_sagemaker_starts_it_and_reports_its_objective(runs):
    """TUN-3, TUN-4: the module run is a candidate of the launcher's tuning job, named and
    given its hyperparameters as SageMaker does (static + the tried value +
    _tuning_objective_metric, which the job's parser passes over); it prints the objective's
    metric line, which the tuning job's definition reads, at its evaluation."""
    from maskrcnn_contract import metrics

    request, output = runs["first"].request, runs["first"].stdout
    assert re.fullmatch(r"maskrcnn-[a-z0-9-]+-s3-horovod-001-[0-9a-f]{8}",
                        request["TrainingJobName"]), request["TrainingJobName"]
    hps = json.loads((_opt_ml(runs["work"], "algo-1") / "input" / "config" /
                      "hyperparameters.json").read_text())
    assert hps["_tuning_objective_metric"] == metrics.BEST_OBJECTIVE
    assert hps["base_learning_rate"] == "0.01"  # the value this candidate tries
    # The launch's checkpoints, the run's prefix that every candidate shares (TUN-6); no
    # TensorBoard upload.
    tuning_job = re.sub(r"-\d{3}-[0-9a-f]{8}$", "", request["TrainingJobName"])
    assert request["CheckpointConfig"] == {
        "S3Uri": f"s3://{runs['fake'].bucket}/checkpoints/{tuning_job}/",
        "LocalPath": "/opt/ml/checkpoints"}
    assert "TensorBoardOutputConfig" not in request
    objective = hps["_tuning_objective_metric"]
    definition, = [d for d in request["AlgorithmSpecification"]["MetricDefinitions"]
                   if d["Name"] == objective]
    values = [float(v) for v in re.findall(definition["Regex"], output)]
    assert values and 0.0 <= values[-1] <= 1.0, objective


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


def test_the_endpoint_answers_an_image_with_detections_as_the_container_would(runs):
    import tensorflow as tf
    from PIL import Image

    from maskrcnn_local import batch_transform

    model_dir = runs["work"] / "model"  # the hosts' model directories, aggregated
    served = batch_transform.serve(str(model_dir))  # once: loading takes seconds
    saved_model = served.saved_model
    image_file = sorted(glob.glob(str(runs["work"] / "coco-synthetic" / "val2017" / "*.jpg")))[0]
    with open(image_file, "rb") as f:
        encoded = f.read()
    body, content_type = batch_transform.answer(served, encoded, "image/jpeg", "score_threshold=0")
    assert content_type == "application/json"
    answer = json.loads(body)
    width, height = Image.open(image_file).size
    assert answer["image_size"] == [height, width]
    categories = json.loads((model_dir / "code" / "categories.json").read_text())
    names = {c["id"]: c["name"] for c in categories}
    # As many as the SavedModel itself returns (20 steps of training may score none above the
    # detection generator's own 0.05 cut; tests/training/test_serving.py converts made-up ones).
    raw = saved_model.signatures["serving_bytes"](inputs=tf.constant([encoded]))
    assert len(answer["detections"]) == int(raw["num_detections"][0])
    for detection in answer["detections"]:
        x, y, w, h = detection["bbox"]
        assert -1 <= x and -1 <= y and w >= 0 and h >= 0
        assert x + w <= width + 1 and y + h <= height + 1
        assert detection["category_name"] == names[detection["category_id"]]
        assert 0 <= detection["score"] <= 1
        mask = detection["mask"]
        assert len(mask) == 28 and all(len(row) == 28 for row in mask)
        assert all(0 <= p <= 1 for row in mask for p in row)
    scores = [d["score"] for d in answer["detections"]]
    assert scores == sorted(scores, reverse=True)
    # The default threshold keeps only the confident ones.
    body, _ = batch_transform.answer(served, encoded, "image/jpeg")
    assert all(d["score"] >= 0.3 for d in json.loads(body)["detections"])
    with pytest.raises(ValueError, match="unsupported content type 'text/csv'"):
        batch_transform.answer(served, encoded, "text/csv")


SERVING_PYTHON = os.path.join(REPO, ".venv-serving", "bin", "python")


def test_the_serving_images_tensorflow_loads_the_model_and_answers_as_training_does(runs, tmp_path):
    """docs/serving.md, "The serving image": the endpoint's TensorFlow Serving 2.20 runs
    TensorFlow 2.20's runtime, one release older than the TF 2.21 that exported the model. TF 2.20
    (.venv-serving) loads the SavedModel as TensorFlow Serving does (every op must be registered)
    and answers an image through `serving_bytes` as TF 2.21 answers it."""
    import numpy as np
    import tensorflow as tf

    version_dir = runs["work"] / "model" / "1"
    image_file = sorted(glob.glob(str(runs["work"] / "coco-synthetic" / "val2017" / "*.jpg")))[0]
    out = tmp_path / "served.npz"
    probe = subprocess.run([SERVING_PYTHON, os.path.join(os.path.dirname(__file__), "serving_probe.py"),
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
    assert int(served["num_detections"][0]) == count
    for key, tolerance in (("detection_classes", 0), ("detection_boxes", 1e-2),
                           ("detection_scores", 1e-4), ("detection_masks", 1e-3)):
        np.testing.assert_allclose(served[key][0][:count], exported[key].numpy()[0][:count],
                                   atol=tolerance, err_msg=key)


def test_the_run_ends_with_its_predictions_drawn_beside_the_ground_truth(runs):
    """What `make demo` ends with (local_run.report): the first validation images drawn through
    the SavedModel SageMaker would upload (the hosts' model directories, aggregated)."""
    from PIL import Image
    from pycocotools.coco import COCO

    from maskrcnn_local import predict

    output, work = runs["first"].stdout, runs["work"]
    model = work / "model" / "1"
    assert f"SavedModel: {model}" in output
    # The run's last lines: the final metrics, then the picture.
    last = output.splitlines()[-5:]
    assert [line.split(": ")[0] for line in last[:4]] == [
        "eval/bbox_AP", "eval/bbox_AP50", "eval/segm_AP", "eval/segm_AP50"]
    comparison, = re.findall(r"^predictions drawn \(ground truth left, predicted right\): (\S+)$",
                             last[4], re.M)
    assert comparison == str(work / "predictions" / predict.COMPARISON_FILE)
    grid = Image.open(comparison)
    assert grid.height > 4 * 384 and grid.width > 2 * 384  # 4 rows (--draw 4), 2 columns
    images = sorted(glob.glob(str(work / "coco-synthetic" / "val2017" / "*.jpg")))[:4]
    for image in images:
        assert Image.open(work / "predictions" / (os.path.basename(image)[:-4] + ".png")).width >= 384
    annotations = COCO(str(work / "coco-synthetic" / "annotations" / "instances_val2017.json"))
    results = json.loads((work / "predictions" / predict.RESULTS_FILE).read_text())
    # Whatever the 20-step model found; pycocotools reading such a file: test_serving.py.
    assert isinstance(results, list)
    assert {r["image_id"] for r in results} <= set(annotations.getImgIds())
    for result in results:
        assert set(result) == {"image_id", "category_id", "bbox", "score", "segmentation"}


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


def test_the_uploaded_model_holds_the_final_evaluations_report(runs):
    """The model.tar.gz SageMaker uploads holds, beside the SavedModel and the endpoint's code,
    the final evaluation's report (code/evaluation/report.json: step 20, the 8 val images) and
    every picture it names (docs/evaluation.md)."""
    from maskrcnn_contract import evaluation_report

    members = runs["snapshot"]["archive members"]
    assert "1/saved_model.pb" in members and "code/inference.py" in members
    assert f"{MODEL_REPORT_DIR}/{REPORT_FILE}" in members, sorted(members)
    report = evaluation_report.read(str(runs["snapshot"]["report"]))
    assert (report["step"], report["images"]) == (20, 8)
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
    result = subprocess.run([sys.executable, "-m", "maskrcnn_launcher", "report", job, "--out",
                             str(out)], cwd=os.path.join(REPO, "notebooks"), capture_output=True,
                            text=True, timeout=120, env=dict(environment, **fake.environment()))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (out / REPORT_FILE).read_bytes() == snapshot["report"].read_bytes()
    report = evaluation_report.read(str(out))
    lines = result.stdout.splitlines()
    assert lines[0] == (f"evaluation report of {job} (step 20, 8 images, {report['detections']} "
                        f"detections, {report['evaluator']}): {out / REPORT_FILE}")
    pictures = evaluation_report.picture_names(report)
    assert lines[1:] == evaluation_report.table(report) + [
        f"{kind}: {out / name}" for kind, name in pictures.items()]
    assert sorted(os.listdir(out)) == sorted([REPORT_FILE] + list(pictures.values()))


def test_failing_rank_fails_the_job_fast_with_its_cause(tmp_path):
    # Rank 1 fails at step 6, once step 5 is logged, while rank 0 waits in step 6's allreduce. (A
    # failure on a worker host: the resumed run below.)
    run = _local_run(tmp_path, "--hp", "max_steps=50", "--program", FAILING_TRAIN,
                     env={"INJECT_FAILURE": "1:6"}, timeout=600)
    assert run.returncode != 0
    # `make demo`'s path: one /opt/ml tree, plain mpirun, no emulated hosts; no pretrained
    # backbone, so batch norm is synchronized instead of frozen.
    assert "emulated hosts" not in run.stdout and "running: mpirun " in run.stdout
    assert "batch_norm: sync" in run.stdout
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
    _truncate(checkpoints / "ckpt-20.data-00000-of-00001")
    objective = json.loads((_opt_ml(work, "algo-1") / "input" / "config" /
                            "hyperparameters.json").read_text())["_tuning_objective_metric"]
    run = _local_run(work, "--hosts", "2", "--ranks", "2", "--hp", "max_steps=30", "--resume",
                     "--hp", f"_tuning_objective_metric={objective}",
                     "--container-env", f"TRAINING_JOB_NAME={job}",
                     "--program", FAILING_TRAIN, "--container-env", "INJECT_FAILURE=1:13",
                     timeout=600)
    assert run.returncode != 0, run.stdout[-3000:]
    assert re.search(rf"checkpoint /opt/ml/checkpoints/{job}/ckpt-20 does not restore",
                     run.stdout), run.stdout[-4000:]
    assert re.search(rf"resumed from /opt/ml/checkpoints/{job}/ckpt-10 at step 10", run.stdout)
    cause = "rank 1 on algo-2: RuntimeError: injected failure at step 13"
    worker_failure = _opt_ml(work, "algo-2") / "output" / "failure"
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
    assert "ckpt-30.index" not in _files(checkpoints)


def test_a_run_whose_program_exported_no_model_fails_naming_the_directory(tmp_path):
    """A program that exits 0 without a SavedModel: the run fails, naming where the model should
    be, unless the caller says its program exports none (benchmarks/step_timing.py's runs)."""
    program = tmp_path / "exports_nothing.py"
    program.write_text("print('trained nothing, exported nothing')\n")
    work = tmp_path / "work"
    # One process, no mpirun: the check is local_run's, after any distribution.
    run = _local_run(work, "--distribution", "multi_worker_mirrored", "--program", str(program),
                     timeout=300)
    assert run.returncode == 1, run.stdout[-3000:]
    model = work / "opt_ml" / "model" / "1"
    assert (f"the program exited 0 but exported no SavedModel: no saved_model.pb in {model}"
            in run.stdout), run.stdout[-3000:]
    assert "--no-model-expected" in run.stdout
    run = _local_run(work, "--distribution", "multi_worker_mirrored", "--program", str(program),
                     "--no-model-expected", timeout=300)
    assert run.returncode == 0, run.stdout[-3000:]
    assert f"no SavedModel in {model.parent}: the program exported none" in run.stdout


def _single_rank_layout(tmp_path, hyperparameters, channels):
    opt_ml = tmp_path / "opt_ml"
    config = opt_ml / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    (config / "inputdataconfig.json").write_text(json.dumps({c: {} for c in channels}))
    for name, source in channels.items():
        (opt_ml / "input" / "data").mkdir(parents=True, exist_ok=True)
        if source:
            shutil.copytree(source, opt_ml / "input" / "data" / name)
    return opt_ml


def _train_single_rank(opt_ml, timeout=600, program=TRAIN, env=None):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "OMPI_"))}
    return subprocess.run([sys.executable, program], capture_output=True, text=True,
                          timeout=timeout,
                          env=dict(environment, OPT_ML_ROOT=str(opt_ml), **(env or {})))


def test_bad_hyperparameter_is_a_clear_error(tmp_path):
    opt_ml = _single_rank_layout(tmp_path, {"image_size": "big"}, {"train": None})
    result = _train_single_rank(opt_ml)
    assert result.returncode != 0
    assert ("HyperparameterError: hyperparameter image_size='big': expected an integer"
            in (opt_ml / "output" / "failure").read_text())


def test_missing_channel_is_a_clear_error(tmp_path):
    opt_ml = _single_rank_layout(tmp_path, {}, {})
    result = _train_single_rank(opt_ml)
    assert result.returncode != 0
    assert "input channel 'train' is missing" in (opt_ml / "output" / "failure").read_text()


def test_corrupt_tfrecord_is_a_clear_error(runs, tmp_path):
    channel = runs["work"] / "dataset" / "train"
    opt_ml = _single_rank_layout(tmp_path, {"backbone": "resnet18", "model_preset": "compact",
                                            "image_size": "64", "max_steps": "3",
                                            "lr_decay_epochs": "", "mixed_precision": "false",
                                            "batch_norm": "sync"},
                                {"train": channel})
    shard = sorted(glob.glob(str(opt_ml / "input" / "data" / "train" / "tfrecords" / "train-*")))[0]
    with open(shard, "r+b") as f:
        f.seek(os.path.getsize(shard) // 2)
        f.write(b"\xff" * 64)
    result = _train_single_rank(opt_ml)
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
    config = _opt_ml(runs["work"], "algo-1") / "input" / "config"
    hps = {k: v for k, v in json.loads((config / "hyperparameters.json").read_text()).items()
           if not k.startswith(("sagemaker_", "_tuning_objective_metric"))}
    hps.update(max_steps="30")
    opt_ml = _single_rank_layout(tmp_path, hps, {"train": runs["work"] / "dataset" / "train"})
    shutil.copytree(_own_checkpoints(runs["work"], runs["first"].request), opt_ml / "checkpoints")
    return opt_ml


def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def test_no_complete_checkpoint_is_a_clear_error(runs, tmp_path):
    opt_ml = _resume_layout(runs, tmp_path)
    for data in glob.glob(str(opt_ml / "checkpoints" / "ckpt-*.data-*")):
        _truncate(data)
    result = _train_single_rank(opt_ml)
    assert result.returncode != 0
    failure = (opt_ml / "output" / "failure").read_text()
    assert "CheckpointError: no checkpoint in" in failure and "restores" in failure
    assert "ckpt-20: " in failure and "ckpt-10: " in failure
