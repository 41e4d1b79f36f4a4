"""--init-from against the local AWS: an earlier run named by its training job (DescribeTrainingJob
CheckpointConfig) or by its checkpoint URI becomes the `init` channel, from S3 whatever the data
source, in place of the pretrained backbone; every refusal (a job that does not exist or kept no
checkpoints, a staging job, a URI outside the checkpoint prefix, no checkpoint, no RUN_INFO, another
backbone or preset, the run's own checkpoints) sends nothing."""

import json
import uuid

import pytest

from maskrcnn_contract import job_io
from maskrcnn_launcher.training import init_from
from maskrcnn_launcher.training.options import LaunchRequestError

from tests.launcher.conftest import BUCKET, JOB_PREFIX, completed_training_job
from tests.launcher.cli import cli
from tests.launcher.test_datasets import stage
from tests.launcher.test_validation import sent

COCO_RUN_INFO = {"backbone": "resnet50", "model_preset": "standard", "image_size": 1024,
                 "dataset": "coco2017",
                 "categories": [{"id": 1, "name": "person", "source_id": 1},
                                {"id": 2, "name": "bicycle", "source_id": 2}]}


def earlier_run(fake_aws, run_info=COCO_RUN_INFO, checkpoint=True) -> str:
    """An earlier run's checkpoint prefix as its chief leaves it; returns its s3:// URI."""
    prefix = f"checkpoints/{JOB_PREFIX}-coco-{uuid.uuid4().hex[:6]}/"
    s3 = fake_aws.client("s3")
    names = ["checkpoint"]
    if checkpoint:
        names += ["ckpt-90000.index", "ckpt-90000.data-00000-of-00001"]
    for name in names:
        s3.put_object(Bucket=BUCKET, Key=prefix + name, Body=b"x")
    if run_info is not None:
        s3.put_object(Bucket=BUCKET, Key=prefix + job_io.RUN_INFO,
                      Body=json.dumps(run_info).encode())
    return f"s3://{BUCKET}/{prefix}"


def channels_of(request) -> dict:
    return {c["ChannelName"]: c["DataSource"] for c in request["InputDataConfig"]}


@pytest.mark.parametrize("data_source", ["s3", "efs", "fsx"])
def test_a_job_named_is_the_init_channel_from_s3_in_place_of_the_backbone(
        fake_aws, deployment, data_source, capsys):
    stage(fake_aws.client("s3"), "parts")
    uri = earlier_run(fake_aws)
    job = completed_training_job(fake_aws, run="coco", checkpoint_s3_uri=uri)
    before = len(fake_aws.requests_since(0))
    request = sent(deployment, data_source=data_source, dataset="parts", init_from=job,
                   hyperparameters={"freeze_backbone": "true"})
    channels = channels_of(request)
    assert set(channels) == {job_io.TRAIN_CHANNEL, job_io.INIT_CHANNEL}
    assert channels[job_io.INIT_CHANNEL] == {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": uri, "S3DataDistributionType": "FullyReplicated"}}
    assert request["HyperParameters"]["freeze_backbone"] == "true"
    said = capsys.readouterr().out
    assert f"fine-tuning from {uri} (training job {job}, resnet50, standard, trained on " \
           "coco2017 with 2 classes)" in said
    assert "dataset 'parts' has 2 other classes (bolt, nut), so the classifier, the " \
           "class-specific box regression and the mask predictor are re-initialized" in said
    assert fake_aws.requests_since(before) == []


def test_a_checkpoint_uri_is_the_init_channel_and_the_same_classes_keep_their_layers(
        fake_aws, deployment, capsys):
    uri = earlier_run(fake_aws, dict(COCO_RUN_INFO, dataset="parts", categories=[
        {"id": 1, "name": "bolt", "source_id": 3}, {"id": 2, "name": "nut", "source_id": 17}]))
    stage(fake_aws.client("s3"), "parts")
    request = sent(deployment, data_source="s3", dataset="parts", init_from=uri.rstrip("/"))
    assert channels_of(request)[job_io.INIT_CHANNEL]["S3DataSource"]["S3Uri"] == uri
    assert "dataset 'parts' has the same classes, so the class-specific layers are kept" \
        in capsys.readouterr().out


def test_the_cli_sends_the_init_channel(fake_aws):
    uri = earlier_run(fake_aws)
    before = len(fake_aws.requests_since(0))
    result = cli(fake_aws, "launch", "--data-source", "fsx", "--init-from", uri,
                 "--run-name", "tune-1")
    assert result.returncode == 0, result.stderr
    request, = fake_aws.requests_since(before)
    assert channels_of(request)[job_io.INIT_CHANNEL]["S3DataSource"]["S3Uri"] == uri
    assert job_io.PRETRAINED_CHANNEL not in channels_of(request)


def _refusals(fake_aws):
    """(init_from, hyperparameters, message) of every refusal."""
    staging = completed_training_job(fake_aws, run="stage-parts", environment={
        job_io.PROGRAM_ENV: job_io.STAGING_PROGRAM}, hyperparameters={
        job_io.STAGING_S3_URI: f"s3://{BUCKET}/datasets/parts/"})
    no_checkpoints = completed_training_job(fake_aws, run="nockpt")
    empty = completed_training_job(fake_aws, run="empty",
                                   checkpoint_s3_uri=earlier_run(fake_aws, checkpoint=False))
    before_run_info = earlier_run(fake_aws, run_info=None)
    resnet101 = earlier_run(fake_aws, dict(COCO_RUN_INFO, backbone="resnet101"))
    compact = earlier_run(fake_aws, dict(COCO_RUN_INFO, model_preset="compact"))
    return [
        (f"{JOB_PREFIX}-nothing-20260101000000", {},
         f"training job '{JOB_PREFIX}-nothing-20260101000000' does not exist in eu-west-2"),
        ("someone-elses-job", {}, "is not this deployment's: its jobs start with maskrcnn-test-"),
        (staging, {}, f"{staging!r} is a staging job: it trains no model"),
        (no_checkpoints, {}, f"training job {no_checkpoints!r} kept no checkpoints"),
        (empty, {}, f"no checkpoint (.index and .data-*) in s3://{BUCKET}/checkpoints/"),
        (f"s3://{BUCKET}/jobs/whatever/", {}, "is not a run's checkpoints of this deployment: "
                                              f"they are below s3://{BUCKET}/checkpoints/<run>/"),
        (f"s3://{BUCKET}/checkpoints/", {}, "is not a run's checkpoints of this deployment"),
        ("s3://another-bucket/checkpoints/run/", {}, "is not a run's checkpoints"),
        (before_run_info, {}, f"has no {job_io.RUN_INFO}: the run was trained by a version"),
        (resnet101, {}, "is of a run with backbone=resnet101, and this job has backbone=resnet50"),
        (compact, {}, "is of a run with model_preset=compact, and this job has "
                      "model_preset=standard"),
        (resnet101, {"backbone": "resnet101", "model_preset": "compact"},
         "is of a run with model_preset=standard, and this job has model_preset=compact"),
        ("  ", {}, "init from '  ' (--init-from, init_from)"),
    ]


def test_every_refusal_names_the_problem_and_sends_nothing(fake_aws, deployment):
    refusals = _refusals(fake_aws)
    before = len(fake_aws.requests_since(0))
    for source, hps, message in refusals:
        with pytest.raises(LaunchRequestError) as refused:
            sent(deployment, data_source="fsx", init_from=source, hyperparameters=hps)
        assert message in str(refused.value), (source, str(refused.value))
    assert fake_aws.requests_since(before) == []


def test_a_run_cannot_fine_tune_from_its_own_checkpoints(fake_aws, deployment):
    own = deployment.checkpoint_s3_uri(f"{JOB_PREFIX}-tune-self")
    bucket_key = own[len(f"s3://{BUCKET}/"):]
    s3 = fake_aws.client("s3")
    for name in ("ckpt-1.index", "ckpt-1.data-00000-of-00001"):
        s3.put_object(Bucket=BUCKET, Key=bucket_key + name, Body=b"x")
    s3.put_object(Bucket=BUCKET, Key=bucket_key + job_io.RUN_INFO,
                  Body=json.dumps(COCO_RUN_INFO).encode())
    with pytest.raises(LaunchRequestError, match="holds the checkpoints of this run"):
        sent(deployment, init_from=own, run_name="tune-self")


def test_the_cli_refuses_an_unknown_job_with_exit_2_and_sends_nothing(fake_aws):
    before = len(fake_aws.requests_since(0))
    result = cli(fake_aws, "launch", "--init-from", f"{JOB_PREFIX}-nothing-20260101000000")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot fine-tune (--init-from, init_from): training job" in result.stderr
    assert result.stdout == ""
    assert fake_aws.requests_since(before) == []


def test_a_request_whose_init_channel_is_outside_the_checkpoint_prefix_is_refused(
        fake_aws, deployment):
    from maskrcnn_launcher.training import validation
    from tests.launcher.test_validation import problems_of

    request = sent(deployment, data_source="s3", init_from=earlier_run(fake_aws))
    init = next(c for c in request["InputDataConfig"] if c["ChannelName"] == job_io.INIT_CHANNEL)
    init["DataSource"]["S3DataSource"]["S3Uri"] = f"s3://{BUCKET}/datasets/coco2017/"
    assert "channel init: s3://" in problems_of(request, deployment, validation.TRAINING)


def test_the_description_says_what_is_kept():
    source = init_from.InitSource("s3://b/checkpoints/r/", COCO_RUN_INFO)
    assert init_from.describe(source, "parts", None).endswith("the optimizer starts anew")


def test_the_launch_notebook_fine_tunes_on_a_dataset_by_name(fake_aws):
    from tests.launcher.test_notebooks import execute

    stage(fake_aws.client("s3"), "parts")
    uri = earlier_run(fake_aws)
    job = completed_training_job(fake_aws, run="coco", checkpoint_s3_uri=uri)
    before = len(fake_aws.requests_since(0))
    output = execute("mask-rcnn-efs.ipynb", {"DATASET": "parts", "INIT_FROM": job})
    request, = fake_aws.requests_since(before)
    channels = channels_of(request)
    assert channels[job_io.TRAIN_CHANNEL]["FileSystemDataSource"]["DirectoryPath"] \
        == "/datasets/parts"
    assert channels[job_io.INIT_CHANNEL]["S3DataSource"]["S3Uri"] == uri
    assert job_io.PRETRAINED_CHANNEL not in channels
    assert f"fine-tuning from {uri} (training job {job}" in output
    with pytest.raises(Exception, match="cannot fine-tune .*does not exist in eu-west-2"):
        execute("mask-rcnn-efs.ipynb", {"INIT_FROM": f"{JOB_PREFIX}-nothing-20260101000000"})
    assert len(fake_aws.requests_since(before)) == 1


def test_a_candidate_is_fine_tuned_from_below_its_job_name_and_a_tuning_job_from_its_best(
        fake_aws, deployment, capsys):
    """TUN-6: a tuning job's candidates share its CheckpointConfig S3Uri and each keeps its
    checkpoints below its training job's name there. Named by its job, a candidate's are read
    there, not in the shared prefix (where a launch of the same run keeps its own, of another
    backbone here) nor another candidate's; named by the tuning job, its best candidate's."""
    from maskrcnn_launcher.runs import lookup
    from maskrcnn_launcher.training import tuning
    from maskrcnn_launcher.training.options import LaunchOptions

    from tests.launcher.conftest import shared_boto_session

    built = tuning.tuning_job(deployment, LaunchOptions(data_source="fsx", run_name="tune-ft"),
                              tuning.TuningOptions(), shared_boto_session(), echo=lambda line: None)
    name = tuning.send(built, deployment,
                       fake_aws.client("sagemaker"))["HyperParameterTuningJobName"]
    shared = f"checkpoints/{JOB_PREFIX}-tune-ft/"
    best = lookup.best_candidate(fake_aws.client("sagemaker").describe_hyper_parameter_tuning_job(
        HyperParameterTuningJobName=name), AssertionError)
    others = [c["TrainingJobName"] for c in fake_aws.tuning_candidates[name]
              if c["TrainingJobName"] != best]
    s3 = fake_aws.client("s3")
    for folder, run_info in ((f"{shared}{best}/", COCO_RUN_INFO),
                             (f"{shared}{others[0]}/", dict(COCO_RUN_INFO, model_preset="compact")),
                             (shared, dict(COCO_RUN_INFO, backbone="resnet101"))):
        for file in ("ckpt-900.index", "ckpt-900.data-00000-of-00001"):
            s3.put_object(Bucket=BUCKET, Key=folder + file, Body=b"x")
        s3.put_object(Bucket=BUCKET, Key=folder + job_io.RUN_INFO,
                      Body=json.dumps(run_info).encode())
    for source in (best, name):
        request = sent(deployment, data_source="fsx", init_from=source, run_name="from-best")
        assert channels_of(request)[job_io.INIT_CHANNEL]["S3DataSource"]["S3Uri"] == \
            f"s3://{BUCKET}/{shared}{best}/", source
        assert f"fine-tuning from s3://{BUCKET}/{shared}{best}/ (training job {best}, resnet50, " \
               "standard" in capsys.readouterr().out
