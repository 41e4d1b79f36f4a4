"""The request playback (maskrcnn_local/sagemaker_job.py): what it hands the hosts, what it
refuses, the aggregation of the hosts' /opt/ml/model, and the launcher's staging request run to
completion on one emulated host as SageMaker would start it, the AWS calls the job makes there
evaluated against the staging role (tests/iam/plugin.py, PlayedJob).

The training requests (horovod from S3, multi_worker_mirrored from EFS, parameter_server from FSx)
are the module runs of test_job.py and test_strategies.py.
"""

import hashlib
import json
import os
import tarfile
import time
import zipfile

import pytest

from maskrcnn_local import emulated_hosts, local_run, sagemaker_job
from maskrcnn_local.sagemaker_job import FileSystem, Inputs, ModelClash, RequestError

from tests.iam.plugin import PlayedJob
from tests.training import backbone_checkpoints, fake_http
from tests.training.playback import Output
from tests.paths import REPO



def _cluster(tmp_path, environment=None, request_environment=None):
    return emulated_hosts.Cluster(str(tmp_path), 1, sagemaker_job.IMAGE_PYTHON, REPO, {}, {},
                                  environment=environment, job_name="maskrcnn-test-x-1",
                                  request_environment=request_environment)


def test_the_requests_environment_is_set_over_this_machines_and_the_images(tmp_path):
    """SM-14, SM-17: the container starts with the image's ENV; the request's Environment is set
    over it, and over this machine's settings. So the staging request's SAGEMAKER_PROGRAM wins
    over the image's train.py."""
    image_only = _cluster(tmp_path).container_environment()
    assert image_only["SAGEMAKER_PROGRAM"] == "train.py"  # training_code/Dockerfile
    assert image_only["SAGEMAKER_TRAINING_MODULE"].startswith("sagemaker_tensorflow_container")
    assert image_only["TRAINING_JOB_NAME"] == "maskrcnn-test-x-1"
    machine = {"HOROVOD_CYCLE_TIME": "10", "SAGEMAKER_PROGRAM": "machine.py"}
    with_machine = _cluster(tmp_path, machine).container_environment()
    assert with_machine["HOROVOD_CYCLE_TIME"] == "10"  # over the Dockerfile's 1
    environment = _cluster(tmp_path, machine, {"SAGEMAKER_PROGRAM": "stage_dataset.py",
                                               "HOROVOD_CYCLE_TIME": "5"}).container_environment()
    assert environment["SAGEMAKER_PROGRAM"] == "stage_dataset.py"
    assert environment["HOROVOD_CYCLE_TIME"] == "5"


def test_hyperparameters_json_is_the_requests_strings_and_nothing_else():
    request = {"HyperParameters": {"max_steps": "20", "lr_decay_epochs": ""}}
    assert sagemaker_job.hyperparameters_json(request) == request["HyperParameters"]
    with pytest.raises(RequestError, match="must be strings.*'max_steps': 20"):
        sagemaker_job.hyperparameters_json({"HyperParameters": {"max_steps": 20}})


def _request(*channels, mode="File"):
    return {"AlgorithmSpecification": {"TrainingInputMode": mode},
            "InputDataConfig": list(channels)}


def _s3_channel(uri, name="train"):
    return {"ChannelName": name, "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": uri, "S3DataDistributionType": "FullyReplicated"}}}


def _fs_channel(kind, system_id, path):
    return {"ChannelName": "train", "DataSource": {"FileSystemDataSource": {
        "FileSystemId": system_id, "FileSystemType": kind, "FileSystemAccessMode": "ro",
        "DirectoryPath": path}}}


def test_an_s3_channel_is_copied_below_its_prefix_and_an_empty_one_refused(
        launcher_deployment, tmp_path):
    s3, bucket = launcher_deployment.client("s3"), launcher_deployment.bucket
    for key in ("unit/prefix/dataset_info.json", "unit/prefix/tfrecords/train-0.tfrecord",
                "unit/prefix/", "unit/other/x.json"):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    directories, configs = sagemaker_job.materialize_channels(
        _request(_s3_channel(f"s3://{bucket}/unit/prefix/")), str(tmp_path), Inputs(s3=s3))
    channel = tmp_path / "channels" / "train"
    assert directories == {"train": str(channel)}
    assert sorted(os.path.relpath(os.path.join(d, f), channel)
                  for d, _, files in os.walk(channel) for f in files) == [
        "dataset_info.json", "tfrecords/train-0.tfrecord"]
    assert configs == {"train": {"TrainingInputMode": "File", "RecordWrapperType": "None",
                                 "S3DistributionType": "FullyReplicated"}}
    with pytest.raises(RequestError, match="No S3 objects found under S3 URL.*SM-12"):
        sagemaker_job.materialize_channels(_request(_s3_channel(f"s3://{bucket}/unit/none/")),
                                           str(tmp_path), Inputs(s3=s3))
    fast = _request(_s3_channel(f"s3://{bucket}/unit/prefix/"), mode="FastFile")
    _, configs = sagemaker_job.materialize_channels(fast, str(tmp_path), Inputs(s3=s3))
    assert configs["train"]["TrainingInputMode"] == "FastFile"
    with pytest.raises(RequestError, match="input mode Pipe"):
        sagemaker_job.materialize_channels(_request(_s3_channel(f"s3://{bucket}/unit/prefix/"),
                                                    mode="Pipe"), str(tmp_path), Inputs(s3=s3))


def test_file_system_channels_are_their_directories_fsx_below_its_mount_name(tmp_path):
    data = tmp_path / "root" / "datasets" / "coco2017"
    data.mkdir(parents=True)
    systems = {"fs-efs": FileSystem(str(tmp_path / "root")),
               "fs-fsx": FileSystem(str(tmp_path / "root"), mount_name="abcd1234")}
    for channel in (_fs_channel("EFS", "fs-efs", "/datasets/coco2017"),
                    _fs_channel("FSxLustre", "fs-fsx", "/abcd1234/datasets/coco2017")):
        directories, configs = sagemaker_job.materialize_channels(
            _request(channel), str(tmp_path), Inputs(file_systems=systems))
        assert directories == {"train": str(data)}
        assert configs == {"train": {"TrainingInputMode": "File", "RecordWrapperType": "None"}}
    with pytest.raises(RequestError, match="does not start with the file system's mount name, "
                                           "/abcd1234/ .FSX-4."):
        sagemaker_job.materialize_channels(
            _request(_fs_channel("FSxLustre", "fs-fsx", "/datasets/coco2017")), str(tmp_path),
            Inputs(file_systems=systems))
    with pytest.raises(RequestError, match="does not exist: the job would fail once its "
                                           "instances are up .SM-12."):
        sagemaker_job.materialize_channels(
            _request(_fs_channel("EFS", "fs-efs", "/datasets/coco2014")), str(tmp_path),
            Inputs(file_systems=systems))


def _write(path, text="x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_hosts_models_are_aggregated_into_one_archive_and_a_clash_fails(tmp_path):
    """SM-10: SageMaker aggregates every host's /opt/ml/model into one model.tar.gz, and names
    written on two hosts clash; that fails here, naming the outermost name and the hosts."""
    hosts = {h: tmp_path / h for h in ("algo-1", "algo-2", "algo-3")}
    _write(hosts["algo-1"] / "1" / "saved_model.pb")
    _write(hosts["algo-1"] / "1" / "variables" / "variables.index")
    _write(hosts["algo-2"] / "code" / "inference.py")
    hosts["algo-3"].mkdir()  # wrote nothing
    merged = sagemaker_job.merge_model_dirs({h: str(d) for h, d in hosts.items()},
                                            str(tmp_path / "model"))
    archive = sagemaker_job.pack_model(merged, str(tmp_path / "model.tar.gz"))
    with tarfile.open(archive) as tar:
        assert sorted(m.name for m in tar.getmembers() if m.isfile()) == [
            "1/saved_model.pb", "1/variables/variables.index", "code/inference.py"]
    _write(hosts["algo-3"] / "1" / "saved_model.pb")
    _write(hosts["algo-3"] / "code" / "inference.py")
    with pytest.raises(ModelClash) as clash:
        sagemaker_job.merge_model_dirs({h: str(d) for h, d in hosts.items()},
                                       str(tmp_path / "model"))
    assert str(clash.value).startswith("/opt/ml/model: 1 written on algo-1, algo-3; code "
                                       "written on algo-2, algo-3 (SageMaker aggregates")


def test_the_model_goes_where_sagemaker_puts_it():
    request = {"TrainingJobName": "maskrcnn-test-s3-1-20260101120000",
               "OutputDataConfig": {"S3OutputPath": "s3://bucket/jobs/"}}
    assert sagemaker_job.model_s3_uri(request) == (
        "s3://bucket/jobs/maskrcnn-test-s3-1-20260101120000/output/model.tar.gz")


# --- the staging request, run to completion -------------------------------------------------------

def _zip(source_dir, folder, archive):
    with zipfile.ZipFile(archive, "w") as zf:
        for directory, _, files in os.walk(os.path.join(source_dir, folder)):
            for name in sorted(files):
                path = os.path.join(directory, name)
                zf.write(path, os.path.relpath(path, source_dir))
    return archive


def test_the_staging_request_stages_coco_and_the_backbone_as_the_launcher_then_expects(
        launcher_deployment, small_coco, tmp_path):
    """The launcher's staging request, played as SageMaker starts it: one host, the image's ENV
    under the request's Environment, which names stage_dataset.py (SM-14; without it the toolkit
    would start the image's train.py), the staging hyperparameters. The internet is a local
    server, forwarded to the host: small COCO-like archives, a ResNet-50 checkpoint with Cloud
    Storage's hash headers, listed in the file MASKRCNN_STAGING_SOURCES names (the COCO archives'
    sizes and MD5s are pinned in the job: the one seam, training_code/README.md "Staging
    sources"); S3 is the fake deployment's bucket, reached through AWS_ENDPOINT_URL. Afterwards
    the launcher finds the dataset and the backbone staged and plans a pretrained launch."""
    from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER, PRETRAINED_COMPLETE_MARKER
    from maskrcnn_launcher.deployment import settings
    from maskrcnn_launcher.training import inputs, plan
    from maskrcnn_launcher.training.options import LaunchOptions

    from maskrcnn_job.staging import stage_coco
    from tests.iam.deployment import SSM_PATH

    fake = launcher_deployment
    s3 = fake.client("s3")
    for key in fake.keys("datasets/") + fake.keys("pretrained/"):  # as before staging
        s3.delete_object(Bucket=fake.bucket, Key=key)
    request = fake.staging_request()
    archives = {name: _zip(small_coco, folder, str(tmp_path / name)) for name, folder in (
        ("annotations_trainval2017.zip", "annotations"), ("val2017.zip", "val2017"),
        ("train2017.zip", "train2017"))}
    checkpoint = backbone_checkpoints.published(50, "ckpt-28080")
    files = {f"/coco/{name}": open(path, "rb").read() for name, path in archives.items()}
    files.update({f"/vision/resnet50_imagenet/{name}": data for name, data in checkpoint.items()})
    served = fake_http.Files(files)
    work = tmp_path / "job"
    with fake_http.serving(served) as base:
        port = int(base.rsplit(":", 1)[1])
        outside = f"http://{emulated_hosts.OUTSIDE}:{port}"
        sources = work / "staging-sources.json"
        _write(sources, json.dumps({
            "coco_archives": [
                {"url": f"{outside}/coco/{name}", "size": len(files[f"/coco/{name}"]),
                 "md5": hashlib.md5(files[f"/coco/{name}"]).hexdigest(),
                 "extracts_to": folder}
                for name, folder in (("annotations_trainval2017.zip", "annotations"),
                                     ("val2017.zip", "val2017"), ("train2017.zip", "train2017"))],
            "checkpoints": {"resnet50": {
                "url_prefix": f"{outside}/vision/resnet50_imagenet/ckpt-28080"}}}))
        # The staging job's own AWS calls, recorded on the host and evaluated against the role
        # its RoleArn names (tests/iam/plugin.py, PlayedJob).
        recording = PlayedJob(request, str(work), fake.iam_published)
        environment = recording.environment({
            **local_run.emulated_host_environment(),
            **sagemaker_job.aws_stand_ins(fake.port, fake.region),
            stage_coco.SOURCES_ENV: str(sources)})
        output = Output()
        started = time.time()
        played = sagemaker_job.play(request, str(work), Inputs(s3=s3), environment=environment,
                                    forwarded_ports=(fake.port, port), timeout=600, echo=output)
        seconds = time.time() - started
    log = output.text
    calls = recording.check()  # IamDenied: a request the staging role may not make
    assert played.succeeded, log[-6000:] + played.job.failure_reason
    # The recorder reached the job: its marker checks and uploads, as the staging role.
    assert request["RoleArn"] == fake.parameters["staging-role-arn"]
    assert {"ListObjectsV2", "PutObject"} <= {c["operation"] for c in calls}, calls
    # The toolkit started the program the request's Environment names, with its hyperparameters.
    assert "SAGEMAKER_PROGRAM=stage_dataset.py\n" in (work / "hosts" / "container.env").read_text()
    assert ("stage_dataset.py --backbones resnet50 --dataset coco2017 --pretrained_s3_uri"
            in log), log[-3000:]
    assert "train.py" not in log
    assert f"staging sources: {sources}" in log
    assert sorted(r for r in served.requests if r.startswith("GET")) == sorted(
        f"GET {path}" for path in files)
    # What the launcher checks before a launch, and a pretrained launch planned from it.
    deployment = settings.load(fake.client("ssm"), SSM_PATH)
    assert inputs.missing_training_inputs(s3, deployment, "coco2017", "resnet50") == []
    staged = fake.keys("datasets/coco2017/")
    assert {"datasets/coco2017/tfrecords/train-00000-of-00001.tfrecord",
            f"datasets/coco2017/{DATASET_COMPLETE_MARKER}"} <= set(staged)
    assert f"pretrained/resnet50/{PRETRAINED_COMPLETE_MARKER}" in fake.keys("pretrained/")
    # 12 staged images make a 12-step run on the default 2 x 8 GPUs: the default warmup of 500
    # steps would be refused (the contract's run_length_problems), so a warmup that fits.
    planned = plan.training_plan(deployment, LaunchOptions(
        data_source="s3", hyperparameters={"warmup_steps": 5}), s3)
    assert [c.name for c in planned.channels] == ["train", "pretrained"]
    info = json.loads(s3.get_object(Bucket=fake.bucket, Key=staged[staged.index(
        f"datasets/coco2017/{DATASET_COMPLETE_MARKER}")])["Body"].read())
    assert info["splits"]["train"]["num_images"] == 12
    # A staging job writes no model: SageMaker's model.tar.gz of it is empty.
    assert os.listdir(played.model_dir) == []
    print(f"the staging request ran in {seconds:.0f} s")
