"""Datasets by name against the local AWS: each data source's `train` channel, the refusals of a
dataset that is not staged (with the command that stages it), and the CLI's upload-export,
stage-dataset, datasets and launch --dataset; nothing sent when refused."""

import json

import pytest

from maskrcnn_contract import job_io, labeling
from maskrcnn_launcher.data import staging
from maskrcnn_launcher.training import jobs
from maskrcnn_launcher.training.options import LaunchRequestError

from tests.launcher.conftest import BUCKET, FSX_MOUNT_NAME, shared_boto_session
from tests.launcher.fake_aws import STAGED_INFO
from tests.launcher.cli import cli
from tests.launcher.test_validation import sent


def stage(s3_client, dataset: str, info: dict = None) -> None:
    """What the staging job leaves for `dataset`: its records, dataset_info.json last."""
    prefix = f"datasets/{dataset}/"
    s3_client.put_object(Bucket=BUCKET, Key=prefix + "tfrecords/train-00000-of-00001.tfrecord",
                         Body=b"records")
    s3_client.put_object(Bucket=BUCKET, Key=prefix + job_io.DATASET_COMPLETE_MARKER,
                         Body=json.dumps(info or STAGED_INFO).encode())


@pytest.mark.parametrize("data_source, expected", [
    ("s3", {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/datasets/parts/",
                             "S3DataDistributionType": "FullyReplicated"}}),
    ("efs", {"FileSystemDataSource": {"FileSystemId": "EFS", "FileSystemType": "EFS",
                                      "FileSystemAccessMode": "ro",
                                      "DirectoryPath": "/datasets/parts"}}),
    ("fsx", {"FileSystemDataSource": {"FileSystemId": "FSX", "FileSystemType": "FSxLustre",
                                      "FileSystemAccessMode": "ro",
                                      "DirectoryPath": f"/{FSX_MOUNT_NAME}/datasets/parts"}}),
])
def test_a_dataset_by_name_is_the_train_channel_of_every_data_source(
        fake_aws, deployment, data_source, expected):
    stage(fake_aws.client("s3"), "parts")
    before = len(fake_aws.requests_since(0))
    request = sent(deployment, data_source=data_source, dataset="parts")
    channels = {c["ChannelName"]: c["DataSource"] for c in request["InputDataConfig"]}
    assert set(channels) == {job_io.TRAIN_CHANNEL, job_io.PRETRAINED_CHANNEL}
    source = channels[job_io.TRAIN_CHANNEL].get("FileSystemDataSource")
    if source:  # the file system's id, from the deployment
        source["FileSystemId"] = {"EFS": "EFS", "FSxLustre": "FSX"}[source["FileSystemType"]]
        assert (deployment.efs_id if data_source == "efs" else deployment.fsx_id) \
            in json.dumps(request["InputDataConfig"])
    assert channels[job_io.TRAIN_CHANNEL] == expected
    # The backbone is the same for every dataset.
    assert "pretrained/resnet50" in json.dumps(channels[job_io.PRETRAINED_CHANNEL])
    assert jobs.describe_inputs(request)[0].startswith("dataset:      ")
    assert jobs.describe_inputs(request)[0].endswith("datasets/parts" + (
        "/" if data_source == "s3" else ""))
    assert fake_aws.requests_since(before) == []


def test_a_dataset_not_staged_is_refused_naming_what_stages_it(fake_aws, deployment):
    s3 = fake_aws.client("s3")
    before = len(fake_aws.requests_since(0))
    with pytest.raises(LaunchRequestError) as refused:
        sent(deployment, data_source="fsx", dataset="bolts")
    message = str(refused.value)
    # Nothing uploaded: where the export goes, then the command that converts it.
    assert f"s3://{BUCKET}/datasets/bolts/dataset_info.json" in message
    assert f"to s3://{BUCKET}/imports/bolts/" in message
    assert "stage-dataset --dataset bolts --wait" in message
    # Uploaded and not converted yet: the command that stages it.
    s3.put_object(Bucket=BUCKET, Key="imports/bolts/result.json", Body=b"{}")
    with pytest.raises(LaunchRequestError) as refused:
        sent(deployment, data_source="s3", dataset="bolts")
    message = str(refused.value)
    assert "dataset 'bolts' is not staged" in message
    assert "imports/bolts/" not in message
    assert "DATASET = 'bolts'" in message and "stage-dataset --dataset bolts --wait" in message
    with pytest.raises(LaunchRequestError, match=r"dataset name 'Bolts 2'.*\(--dataset, dataset\)"):
        sent(deployment, dataset="Bolts 2")
    assert fake_aws.requests_since(before) == []


def test_staging_an_export_that_is_not_uploaded_is_refused_and_sends_nothing(fake_aws):
    from tests.launcher.conftest import shared_boto_session
    from maskrcnn_launcher.deployment import settings

    deployment = settings.load(fake_aws.client("ssm"), "/maskrcnn-test")
    before = len(fake_aws.requests_since(0))
    with pytest.raises(LaunchRequestError, match="to s3://.*/imports/nothing-here/"):
        staging.stage_dataset(shared_boto_session(), deployment, "nothing-here")
    assert fake_aws.requests_since(before) == []


def test_from_an_export_on_disk_to_a_launch_from_the_command_line(fake_aws, tmp_path):
    """upload-export, datasets, stage-dataset (the fake staging job writes the dataset: its
    classes are fake_aws.STAGED_INFO's), launch --dataset."""
    export = tmp_path / "export"
    (export / "images" / "line-1").mkdir(parents=True)
    (export / "images" / "line-1" / "a.jpg").write_bytes(b"jpeg")
    (export / "result.json").write_text("{}")
    result = cli(fake_aws, "upload-export", "--dataset", "gears", str(export))
    assert result.returncode == 0, result.stderr
    assert f"uploaded 2 file(s) to s3://{BUCKET}/imports/gears/" in result.stderr
    keys = [o["Key"] for o in fake_aws.client("s3").list_objects_v2(
        Bucket=BUCKET, Prefix="imports/gears/")["Contents"]]
    assert sorted(keys) == ["imports/gears/images/line-1/a.jpg", "imports/gears/result.json"]

    listed = {d["dataset"]: d for d in json.loads(cli(fake_aws, "datasets").stdout)}
    assert listed["gears"] == {"dataset": "gears", "staged": False, "export_uploaded": True}
    assert listed["coco2017"]["staged"] is True

    before = len(fake_aws.requests_since(0))
    launch = cli(fake_aws, "launch", "--dataset", "gears", "--dry-run")
    assert launch.returncode == 2, launch.stdout + launch.stderr
    assert "stage-dataset --dataset gears --wait" in launch.stderr
    assert fake_aws.requests_since(before) == []

    result = cli(fake_aws, "stage-dataset", "--dataset", "gears", "--val-fraction", "0.25",
                 "--split-seed", "7", "--crowd-as-instances", "--boxes-without-mask", "leave_out",
                 "--no-backbone", "--wait")
    assert result.returncode == 0, result.stderr
    staging, = fake_aws.requests_since(before)
    hps = staging["HyperParameters"]
    assert hps[job_io.STAGING_DATASET] == "gears"
    assert hps[job_io.STAGING_S3_URI] == f"s3://{BUCKET}/datasets/gears/"
    assert hps[job_io.STAGING_IMPORT_S3_URI] == f"s3://{BUCKET}/imports/gears/"
    assert (hps[job_io.STAGING_VAL_FRACTION], hps[job_io.STAGING_SPLIT_SEED],
            hps[job_io.STAGING_CROWD_AS_INSTANCES]) == ("0.25", "7", "true")
    assert hps[labeling.BOXES_WITHOUT_MASK] == labeling.LEAVE_OUT
    assert job_io.STAGING_PRETRAINED_S3_URI not in hps  # --no-backbone
    assert staging["TrainingJobName"].startswith("maskrcnn-test-stage-gears-")

    listed = {d["dataset"]: d for d in json.loads(cli(fake_aws, "datasets").stdout)}
    assert listed["gears"] == {"dataset": "gears", "staged": True, "export_uploaded": True,
                               "classes": ["bolt", "nut"], "images": {"train": 4000, "val": 500}}
    before = len(fake_aws.requests_since(0))
    launch = cli(fake_aws, "launch", "--data-source", "efs", "--dataset", "gears")
    assert launch.returncode == 0, launch.stderr
    train = next(c for c in fake_aws.requests_since(before)[0]["InputDataConfig"]
                 if c["ChannelName"] == job_io.TRAIN_CHANNEL)
    assert train["DataSource"]["FileSystemDataSource"]["DirectoryPath"] == "/datasets/gears"


@pytest.mark.parametrize("args, message", [
    (["upload-export", "--dataset", "gears", "/nonexistent/export"],
     "export '/nonexistent/export' is neither a directory nor a file"),
    (["upload-export", "--dataset", "Gears!", "."], "dataset name 'Gears!'"),
    (["stage-dataset", "--dataset", "gears-"], "dataset name 'gears-'"),
    (["launch", "--dataset", "gears_2"], "dataset name 'gears_2'"),
])
def test_a_bad_export_or_dataset_name_exits_2_and_sends_nothing(fake_aws, args, message):
    before = len(fake_aws.requests_since(0))
    result = cli(fake_aws, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert fake_aws.requests_since(before) == []


def test_prepare_data_uploads_an_export_and_stages_it_by_name(fake_aws, tmp_path):
    from tests.launcher.test_notebooks import execute

    export = tmp_path / "cvat"
    (export / "annotations").mkdir(parents=True)
    (export / "images").mkdir()
    (export / "annotations" / "instances_default.json").write_text("{}")
    (export / "images" / "a.jpg").write_bytes(b"jpeg")
    before = len(fake_aws.requests_since(0))
    output = execute("prepare-data.ipynb", {"DATASET": "welds", "EXPORT": str(export),
                                            "VAL_FRACTION": 0.3, "SPLIT_SEED": 5,
                                            "CROWD_AS_INSTANCES": True,
                                            "BOXES_WITHOUT_MASK": "box_as_mask"})
    assert f"uploaded 2 file(s) to s3://{BUCKET}/imports/welds/" in output
    staging, = fake_aws.requests_since(before)
    hps = staging["HyperParameters"]
    assert (hps[job_io.STAGING_DATASET], hps[job_io.STAGING_IMPORT_S3_URI]) == (
        "welds", f"s3://{BUCKET}/imports/welds/")
    assert (hps[job_io.STAGING_VAL_FRACTION], hps[job_io.STAGING_SPLIT_SEED],
            hps[job_io.STAGING_CROWD_AS_INSTANCES]) == ("0.3", "5", "true")
    assert hps[labeling.BOXES_WITHOUT_MASK] == labeling.BOX_AS_MASK
    assert staging["TrainingJobName"].startswith("maskrcnn-test-stage-welds-")


def test_a_bad_boxes_without_mask_is_refused_by_name_before_anything_is_sent(fake_aws,
                                                                             deployment):
    """The CLI exits 2 naming the option and its values; the function raises naming them."""
    before = len(fake_aws.requests_since(0))
    result = cli(fake_aws, "stage-dataset", "--dataset", "gears", "--boxes-without-mask", "drop")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--boxes-without-mask: invalid choice: 'drop'" in result.stderr
    assert "refuse" in result.stderr and "leave_out" in result.stderr \
        and "box_as_mask" in result.stderr
    with pytest.raises(LaunchRequestError,
                       match=r"boxes_without_mask='drop': expected one of refuse, leave_out, "
                             "box_as_mask"):
        jobs.staging_job(deployment, shared_boto_session(), dataset="gears",
                         boxes_without_mask="drop")
    assert fake_aws.requests_since(before) == []
