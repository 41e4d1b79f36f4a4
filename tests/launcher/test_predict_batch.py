"""Batch predictions against the local AWS: images below the samples prefix -> a model and a Batch
Transform of a finished training job -> the transform's answers -> predictions.json and
images.json (COCO), the labeling tools' pre-annotations, the ranking and its contact sheet, written
and uploaded. The requests are checked as sent (docs/aws-rules.md BT-1..BT-6); every refusal
happens before anything is created. The transform itself is played by the fake (fake_aws.py,
`transform_answer`); tests/training/test_job.py plays it with the trained model and the handler."""

import io
import json

import pytest

from maskrcnn_launcher.labeling import batch_plan, predictions

from tests.launcher.cli import cli
from tests.launcher.conftest import BUCKET, INFERENCE_IMAGES, JOB_PREFIX, completed_training_job
from tests.launcher.fake_aws import INVOCATION_ANSWER

INPUT = f"s3://{BUCKET}/samples/round2/"


@pytest.fixture(autouse=True)
def _samples_left_as_found(fake_aws):
    """The images these tests upload are removed again: other tests (inference.ipynb's) send
    every image below the samples prefix."""
    s3 = fake_aws.client("s3")
    before = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="samples/").get(
        "Contents", [])}
    yield
    for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="samples/").get("Contents", []):
        if item["Key"] not in before:
            s3.delete_object(Bucket=BUCKET, Key=item["Key"])


def _image(size, fmt="JPEG") -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, (30, 120, 200)).save(out, fmt)
    return out.getvalue()


def _upload(fake_aws, objects: dict, prefix: str = "samples/round2/") -> None:
    s3 = fake_aws.client("s3")
    for key, body in objects.items():
        s3.put_object(Bucket=BUCKET, Key=prefix + key, Body=body)


def _created(fake_aws):
    models = [p for op, p in fake_aws.serving_requests if op == "CreateModel"]
    return len(models), len(fake_aws.create_transform_job_requests)


def test_predict_batch_sends_the_transform_and_writes_coco_files_pre_annotations_and_a_ranking(
        fake_aws, tmp_path):
    job = completed_training_job(fake_aws, "predict")
    images = {"a/one.jpg": _image((64, 48)), "a/two.jpg": _image((80, 60)),
              "three.png": _image((32, 40), "PNG")}
    _upload(fake_aws, dict(images, **{"broken.jpg": b"not an image"}))
    name = f"{JOB_PREFIX}-predict-round2"
    before = len(fake_aws.create_transform_job_requests)
    done = cli(fake_aws, "predict-batch", "--input", INPUT, "--job", job, "--name", name,
               "--score-threshold", "0.25", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    request, = fake_aws.create_transform_job_requests[before:]
    params = fake_aws.parameters
    largest = max(len(b) for b in list(images.values()) + [b"not an image"])
    assert request == {
        "TransformJobName": name, "ModelName": name,
        "BatchStrategy": "SingleRecord", "MaxConcurrentTransforms": 1,
        "MaxPayloadInMB": batch_plan.payload_mb(largest),
        "ModelClientConfig": {"InvocationsTimeoutInSeconds": 600, "InvocationsMaxRetries": 1},
        "Environment": {"MASKRCNN_SCORE_THRESHOLD": "0.25"},
        "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix",
                                                           "S3Uri": INPUT}},
                           "ContentType": "application/x-image", "SplitType": "None",
                           "CompressionType": "None"},
        "TransformOutput": {"S3OutputPath": f"s3://{BUCKET}/jobs/predictions/{name}/transform/",
                            "Accept": "application/json", "AssembleWith": "None",
                            "KmsKeyId": params["kms-key-arn"]},
        # g4dn: local NVMe storage, no volume key (BT-6)
        "TransformResources": {"InstanceType": "ml.g4dn.xlarge", "InstanceCount": 1}}
    model = [p for op, p in fake_aws.serving_requests if op == "CreateModel"][-1]
    assert model == {"ModelName": name, "ExecutionRoleArn": params["model-role-arn"],
                     "PrimaryContainer": {"Image": INFERENCE_IMAGES["gpu"],
                                          "ModelDataUrl": f"s3://{BUCKET}/jobs/{job}/output/model.tar.gz"},
                     "VpcConfig": {"Subnets": params["subnet-ids"].split(","),
                                   "SecurityGroupIds": [params["security-group-ids"]]}}

    # The COCO files: pycocotools loads the results against the images file.
    from pycocotools.coco import COCO

    run_dir = tmp_path / "run"
    coco = COCO(str(run_dir / predictions.IMAGES_FILE))
    loaded = coco.loadRes(str(run_dir / predictions.PREDICTIONS_FILE))
    by_name = {image["file_name"]: image for image in coco.dataset["images"]}
    assert sorted(by_name) == ["a/one.jpg", "a/two.jpg", "three.png"]
    assert (by_name["a/two.jpg"]["width"], by_name["a/two.jpg"]["height"]) == (80, 60)
    assert coco.dataset["categories"] == [{"id": 1, "name": "person"}, {"id": 2, "name": "bicycle"}]
    for file_name, image in by_name.items():
        answer = dict(INVOCATION_ANSWER, image_size=[image["height"], image["width"]])
        expected = predictions.results_of(answer, image["id"])
        got = loaded.loadAnns(loaded.getAnnIds(imgIds=[image["id"]]))
        assert [(r["category_id"], r["bbox"], r["score"], r["segmentation"]) for r in expected] \
            == [(r["category_id"], r["bbox"], r["score"], r["segmentation"]) for r in got]
    summary = json.loads((run_dir / predictions.SUMMARY_FILE).read_text())
    assert summary["images"] == 4 and summary["images_predicted"] == 3
    assert summary["detections_per_class"] == {"person": 3, "bicycle": 0}
    assert [f["file_name"] for f in summary["failed_images"]] == ["broken.jpg"]
    assert summary["score_threshold"] == 0.25

    # Everything written is uploaded beside the transform's answers; the answers are encrypted.
    s3 = fake_aws.client("s3")
    listed = {o["Key"] for o in s3.list_objects_v2(
        Bucket=BUCKET, Prefix=f"jobs/predictions/{name}/")["Contents"]}
    written = {f"jobs/predictions/{name}/{f}" for f in (
        "predictions.json", "images.json", "summary.json", "label-studio-tasks.json",
        "label-studio-config.xml", "cvat-coco.json", "ranking.json", "ranking.csv",
        "contact_sheet.jpg")}
    answers = {f"jobs/predictions/{name}/transform/{k}.out" for k in images}
    assert listed == written | answers
    head = s3.head_object(Bucket=BUCKET, Key=f"jobs/predictions/{name}/transform/a/one.jpg.out")
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"] == params["kms-key-arn"]

    printed = json.loads(done.stdout)
    assert printed["predictions"] == f"s3://{BUCKET}/jobs/predictions/{name}/"
    assert "broken.jpg: no answer: the transform failed on it" in done.stderr
    assert f"{name}: Failed, 3/4 images answered" in done.stderr
    assert "Label Studio (label-studio-tasks.json, label-studio-config.xml):" in done.stderr
    assert "Label next (ranking.csv, most uncertain first" in done.stderr


def test_no_wait_returns_and_predictions_collects_the_ended_run(fake_aws, tmp_path):
    job = completed_training_job(fake_aws, "predict")
    _upload(fake_aws, {"x.jpg": _image((40, 30))}, "samples/later/")
    name = f"{JOB_PREFIX}-predict-later"
    started = cli(fake_aws, "predict-batch", "--input", f"s3://{BUCKET}/samples/later/",
                  "--job", job, "--name", name, "--no-wait")
    assert started.returncode == 0, started.stderr[-2000:]
    assert f"python -m maskrcnn_launcher predictions {name}" in started.stderr
    assert not fake_aws.client("s3").list_objects_v2(
        Bucket=BUCKET, Prefix=f"jobs/predictions/{name}/predictions.json").get("Contents")
    collected = cli(fake_aws, "predictions", name, "--out", str(tmp_path / "later"), "--top", "1")
    assert collected.returncode == 0, collected.stderr[-2000:]
    assert json.loads(collected.stdout)["summary"]["images_predicted"] == 1
    unknown = cli(fake_aws, "predictions", f"{JOB_PREFIX}-predict-nothing")
    assert unknown.returncode == 2
    assert f"no transform job named '{JOB_PREFIX}-predict-nothing'" in unknown.stderr


@pytest.mark.parametrize("args, message", [
    (["--input", f"s3://{BUCKET}/datasets/coco/"], "the images must lie below "
                                                   f"s3://{BUCKET}/samples/"),
    (["--input", f"s3://{BUCKET}/samples/round2"], "name a prefix ending in '/'"),
    (["--input", f"s3://{BUCKET}/samples/empty/"], "no object below it"),
    (["--input", f"s3://{BUCKET}/samples/mixed/"], "1 object(s) are not JPEG or PNG images "
                                                   "(samples/mixed/notes.txt)"),
    (["--instance-type", "ml.x9.large"], "Batch Transform does not offer it"),
    (["--instance-type", "ml.m5.xlarge"], "has no GPU"),
    (["--score-threshold", "2"], "score threshold 2.0 (--score-threshold): expected a number "
                                 "from 0 to 1"),
    (["--instance-count", "0"], "instance count 0 (--instance-count)"),
    (["--top", "0"], "--top 0: expected at least 1"),
    (["--name", "other-predict"], f"must start with {JOB_PREFIX}-"),
    (["--job", f"{JOB_PREFIX}-no-such-job"], f"{JOB_PREFIX}-no-such-job"),
])
def test_bad_input_is_refused_by_name_before_anything_is_created(fake_aws, args, message):
    completed_training_job(fake_aws, "predict")
    _upload(fake_aws, {"x.jpg": _image((40, 30))})
    _upload(fake_aws, {"x.jpg": _image((40, 30)), "notes.txt": b"hello"}, "samples/mixed/")
    if "--input" not in args:
        args = ["--input", INPUT] + args
    before = _created(fake_aws)
    refused = cli(fake_aws, "predict-batch", *args)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert message in refused.stderr
    assert _created(fake_aws) == before


def test_dry_run_prints_the_requests_and_creates_nothing(fake_aws):
    job = completed_training_job(fake_aws, "predict")
    _upload(fake_aws, {"x.jpg": _image((40, 30))})
    before = _created(fake_aws)
    shown = cli(fake_aws, "predict-batch", "--input", INPUT, "--job", job, "--dry-run",
                "--instance-type", "ml.p3.2xlarge")
    assert shown.returncode == 0, shown.stderr[-2000:]
    requests = json.loads(shown.stdout)
    assert set(requests) == {"CreateModel", "CreateTransformJob"}
    # p3: an EBS volume, encrypted with the deployment's key (BT-6)
    assert requests["CreateTransformJob"]["TransformResources"]["VolumeKmsKeyId"] \
        == fake_aws.parameters["kms-key-arn"]
    assert _created(fake_aws) == before
    assert "price class:" in shown.stderr


def test_the_payload_limit_holds_the_largest_image_and_refuses_one_above_100_mb():
    assert batch_plan.payload_mb(1) == 1
    assert batch_plan.payload_mb(2_500_000) == 3
    assert batch_plan.image_problems({"s/a.jpg": 10, "s/b.jpg": 100_000_001}, "s3://b/s/") == [
        "input 's3://b/s/': s/b.jpg exceed(s) 100 MB, Batch Transform's largest request (BT-2); "
        "downscale them"]


def test_the_fake_refuses_what_sagemaker_refuses_of_a_transform(fake_aws):
    """BT-2 and botocore's model, held by the fake as SageMaker holds them: the launcher's tests
    cannot pass a request AWS would refuse."""
    from botocore.exceptions import ClientError

    sagemaker = fake_aws.client("sagemaker")
    base = {"TransformJobName": f"{JOB_PREFIX}-predict-refused", "ModelName": "no-such-model",
            "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix",
                                                               "S3Uri": INPUT}}},
            "TransformOutput": {"S3OutputPath": f"s3://{BUCKET}/jobs/predictions/x/"},
            "TransformResources": {"InstanceType": "ml.g4dn.xlarge", "InstanceCount": 1}}
    for extra, message in (({"MaxPayloadInMB": 101}, "MaxPayloadInMB 101 is above 100"),
                           ({"MaxPayloadInMB": 60, "MaxConcurrentTransforms": 2},
                            "MaxConcurrentTransforms x MaxPayloadInMB is above 100"),
                           ({}, "Could not find model no-such-model")):
        with pytest.raises(ClientError, match=message):
            sagemaker.create_transform_job(**base, **extra)


@pytest.mark.iam_expect_denied(
    "sagemaker:CreateTransformJob", "the notebook role starts transforms whose answers are "
    "encrypted with the deployment's key only (BT-1): another key is denied by its condition")
@pytest.mark.iam_expect_denied(
    "kms:GenerateDataKey", "nor could the model role write the answers with another key")
def test_a_transform_encrypted_with_another_key_is_denied_to_the_notebook_role(fake_aws):
    import dataclasses

    from maskrcnn_launcher.deployment import settings
    from maskrcnn_launcher.labeling import batch_jobs
    from tests.launcher.conftest import SSM_PATH, shared_boto_session

    job = completed_training_job(fake_aws, "predict")
    _upload(fake_aws, {"x.jpg": _image((40, 30))})
    session = shared_boto_session()
    deployment = settings.load(session.client("ssm"), SSM_PATH)
    plan = batch_plan.plan(deployment, batch_plan.BatchOptions(input_uri=INPUT, job_name=job),
                           session)
    other_key = fake_aws.client("kms").create_key()["KeyMetadata"]["Arn"]
    request = json.loads(json.dumps(plan.create_transform_job))
    request["TransformOutput"]["KmsKeyId"] = other_key
    batch_jobs.send(dataclasses.replace(plan, create_transform_job=request), session,
                    echo=lambda line: None)
