"""Every notebook executed end to end (nbclient, this venv's kernel) against the local AWS; the
CreateTrainingJob requests they send are captured and checked."""

import json
import re

import nbformat
import pytest
from maskrcnn_contract import job_io
from nbclient import NotebookClient

from tests.launcher import kernels
from tests.launcher.conftest import (BUCKET, FSX_MOUNT_NAME, INFERENCE_IMAGES, JOB_PREFIX,
                                     NOTEBOOKS, completed_training_job, model_key,
                                     shared_boto_session)
from tests.launcher.expectations import assert_training_request

NOTEBOOK_NAMES = ["prepare-data.ipynb", "mask-rcnn-s3.ipynb", "mask-rcnn-efs.ipynb",
                  "mask-rcnn-fsx.ipynb", "inference.ipynb", "runs.ipynb"]


def execute(name: str, parameters: dict = None, until: int = None) -> str:
    """Runs the notebook (its first `until` + 1 cells only, if given); `parameters` replaces
    lines of its cell tagged `parameters`, as a user would edit them. Returns the text of all
    outputs."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    if until is not None:
        nb.cells = nb.cells[:until + 1]
    for cell in nb.cells:
        if parameters and "parameters" in cell.metadata.get("tags", []):
            lines = cell.source.splitlines()
            for key, value in parameters.items():
                index = next(i for i, line in enumerate(lines) if line.startswith(f"{key} ="))
                lines[index] = f"{key} = {value!r}"
            cell.source = "\n".join(lines)
    # The kernel forked from one that imported ipykernel and the SDK already (kernels.py).
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   kernel_manager_class=kernels.KernelManager,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    texts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", "") or json.dumps(output.get("data", {})))
    return "\n".join(texts)


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_notebook_is_committed_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, name


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_notebook_has_no_hardcoded_account_or_region(name):
    text = (NOTEBOOKS / name).read_text()
    for literal in ("us-east-1\"", "eu-west-2", "123456789012", "fs-", "subnet-", "sg-", "arn:aws"):
        assert literal not in text, f"{name} hard-codes {literal}"


@pytest.mark.parametrize("source", ["efs", "fsx"])
def test_launch_notebook_sends_the_expected_request(fake_aws, source):
    before = len(fake_aws.requests_since(0))
    output = execute(f"mask-rcnn-{source}.ipynb")
    sent = fake_aws.requests_since(before)
    assert len(sent) == 1
    assert_training_request(sent[0], fake_aws.parameters, source, "ml.p4d.24xlarge", 2, 8)
    assert "distribution: horovod, 8 ranks per host (one per GPU) on 2 x ml.p4d.24xlarge" in output
    # Log plumbing only: the fake job's canned metric lines (fake_aws.py TRAINING_LOG) came back
    # through CloudWatch and the job's own regexes; a real job's: tests/training/test_job.py.
    assert re.search(r"^eval/bbox_AP +0\.377$", output, re.M)
    assert re.search(r"^eval/segm_AP +0\.339$", output, re.M)
    assert re.search(r"^train/loss +0\.75$", output, re.M)  # the last value, not the first
    run = sent[0]["TrainingJobName"].rsplit("-", 1)[0]
    assert f"s3://{BUCKET}/checkpoints/{run}/" in output
    assert f"tensorboard:  s3://{BUCKET}/jobs/tensorboard/{run}/ (uploaded while the job runs)" \
        in output
    assert f"dashboard https://eu-west-2.console.aws.amazon.com/cloudwatch/home?region=" \
           f"eu-west-2#dashboards:name={JOB_PREFIX}-eu-west-2" in output
    assert_tensorboard_copied(output, run, sent[0]["TrainingJobName"])
    assert_report_shown(output, sent[0]["TrainingJobName"])


def assert_report_shown(output: str, job: str) -> None:
    """The last cells: the job's evaluation report from its model.tar.gz (the fake job writes
    fake_aws.FAKE_REPORT there), its table printed and its pictures displayed."""
    assert f"evaluation report of {job} (step 200, 50 images, 140 detections" in output
    assert re.search(r"^person +12 +0\.377 +0\.710 +0\.412 ", output, re.M)
    assert "most confused (masks scoring >= 0.3, IoU >= 0.5): person as bicycle 3 (25%)" in output
    assert output.count('"image/png"') >= 4  # the pictures


def _records(data: bytes):
    """The records of a TFRecord file (an event file): length, its CRC, the data, its CRC."""
    import struct

    position = 0
    while position < len(data):
        length, = struct.unpack("<Q", data[position:position + 8])
        yield data[position + 12:position + 12 + length]
        position += 12 + length + 4


def assert_tensorboard_copied(output: str, run: str, job: str) -> None:
    """TRN-2: what SageMaker uploaded of the job's summaries (the fake job's event file of its
    loss) is copied to the notebook instance below the run's folder, where TensorBoard reads
    it: its scalars are the job's train/loss by step."""
    from tensorboard.compat.proto import event_pb2

    from maskrcnn_launcher.runs import tensorboard_logs

    assert "TensorBoard: 1 file(s) copied to" in output
    assert f"tensorboard --logdir {tensorboard_logs.root()} --port 6006" in output
    event_file, = (tensorboard_logs.local_dir(run) / job / "tensorboard-output").iterdir()
    events = [event_pb2.Event.FromString(r) for r in _records(event_file.read_bytes())]
    assert [(e.step, e.summary.value[0].tag, e.summary.value[0].simple_value) for e in events] \
        == [(100, "train/loss", 1.25), (200, "train/loss", 0.75)]


def test_s3_notebook_with_the_users_choices(fake_aws):
    before = len(fake_aws.requests_since(0))
    output = execute("mask-rcnn-s3.ipynb", {"INSTANCE_TYPE": "ml.p3dn.24xlarge",
                                            "INSTANCE_COUNT": 3, "USE_SPOT": True,
                                            "DISTRIBUTION": "parameter_server",
                                            "HYPERPARAMETERS": {"max_steps": 500}})
    # What the job trains from and how, printed before the launch.
    assert f"backbone:     resnet50, ImageNet checkpoint from s3://{BUCKET}/pretrained/resnet50/" \
        in output
    assert "batch norm:   frozen" in output
    assert "distribution: parameter_server, 1 process per host on 3 x ml.p3dn.24xlarge" in output
    sent = fake_aws.requests_since(before)
    assert len(sent) == 1
    assert_training_request(sent[0], fake_aws.parameters, "s3", "ml.p3dn.24xlarge", 3,
                            spot=True, distribution="parameter_server")
    assert sent[0]["HyperParameters"]["max_steps"] == "500"
    # TRN-1: streamed from S3 by default, no copy before the start.
    assert "input mode:   FastFile: streamed from S3 as the job reads it" in output


def test_s3_notebook_copies_the_dataset_when_asked_and_keeps_a_warm_pool(fake_aws):
    """TRN-1, TRN-3: INPUT_MODE = "File" copies the channel first; KEEP_ALIVE_SECONDS keeps the
    instances for the next job. TRN-4: the last cell lists the job's pool, kept, and with
    RELEASE_WARM_POOL ends it (UpdateTrainingJob, keep-alive 0)."""
    before, updates = len(fake_aws.requests_since(0)), len(fake_aws.updates_since(0))
    output = execute("mask-rcnn-s3.ipynb", {"INPUT_MODE": "File", "KEEP_ALIVE_SECONDS": 900,
                                            "RELEASE_WARM_POOL": True})
    sent = fake_aws.requests_since(before)
    assert len(sent) == 1
    assert_training_request(sent[0], fake_aws.parameters, "s3", "ml.p4d.24xlarge", 2, 8,
                            input_mode="File", keep_alive_seconds=900)
    assert "warm pool:    instances kept 900 s after the job" in output
    job = sent[0]["TrainingJobName"]
    # Listed as kept (seconds after the job's end), then released.
    assert re.search(rf"^  {job}: 2 x ml\.p4d\.24xlarge \(\$\$\$\$\$ per instance-hour\) "
                     r"kept 0(\.0\d)? h \(0(\.0\d)? instance-hours\), ends by itself in 1[45] min "
                     r"of 900 s keep-alive; end it now: python -m maskrcnn_launcher "
                     rf"release-warm-pool {job}$", output, re.M)
    assert re.search(rf"released the warm pool of {job}: 2 x ml\.p4d\.24xlarge, kept "
                     r"0(\.0\d)? h", output)
    assert fake_aws.updates_since(updates) == [
        {"TrainingJobName": job, "ResourceConfig": {"KeepAlivePeriodInSeconds": 0}}]


def test_launch_notebook_stops_on_a_bad_hyperparameter(fake_aws):
    before = len(fake_aws.requests_since(0))
    with pytest.raises(Exception, match="unknown hyperparameter.*learning_rat"):
        execute("mask-rcnn-fsx.ipynb", {"HYPERPARAMETERS": {"learning_rat": 0.1}})
    assert fake_aws.requests_since(before) == []


@pytest.mark.unstaged
def test_prepare_data_stages_syncs_reports_and_can_rerun(fake_aws):
    s3 = fake_aws.client("s3")
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="datasets/coco2017/")
    before = len(fake_aws.requests_since(0))
    first = execute("prepare-data.ipynb")
    sent = fake_aws.requests_since(before)
    assert len(sent) == 1
    staging = sent[0]
    params = fake_aws.parameters
    assert staging["TrainingJobName"].startswith("maskrcnn-test-stage-coco2017-")
    assert staging["RoleArn"] == params["staging-role-arn"]
    assert staging["AlgorithmSpecification"]["TrainingImage"] == params["training-image-uri"]
    # The image's ENV names train.py: only the request's Environment starts stage_dataset.py.
    assert staging["Environment"] == {"SAGEMAKER_PROGRAM": job_io.STAGING_PROGRAM}
    assert "sagemaker_program" not in staging["HyperParameters"]
    assert staging["HyperParameters"][job_io.STAGING_S3_URI] == f"s3://{BUCKET}/datasets/coco2017/"
    assert staging["HyperParameters"][job_io.STAGING_DATASET] == "coco2017"
    assert job_io.STAGING_IMPORT_S3_URI not in staging["HyperParameters"]
    assert staging["HyperParameters"][job_io.STAGING_PRETRAINED_S3_URI] == f"s3://{BUCKET}/pretrained/"
    assert staging["HyperParameters"][job_io.STAGING_BACKBONES] == "resnet50"
    assert "to stage COCO 2017" in first and "the resnet50 checkpoint" in first
    assert staging["VpcConfig"]["Subnets"] == params["subnet-ids"].split(",")
    assert staging["VpcConfig"]["SecurityGroupIds"] == params["security-group-ids"].split(",")
    assert "DataSync task 1/2: SUCCESS" in first and "DataSync task 2/2: SUCCESS" in first
    assert "dra-0123456789abcdef0: AVAILABLE" in first and "dra-0123456789abcdef1: AVAILABLE" in first
    assert f"s3://{BUCKET}/pretrained/ -> {FSX_MOUNT_NAME}:/pretrained" in first
    assert "auto-import NEW,CHANGED,DELETED" in first

    second = execute("prepare-data.ipynb")
    assert fake_aws.requests_since(before + 1) == []  # staged already: no second job
    assert "are staged already" in second
    assert "DataSync task 2/2: SUCCESS" in second


def _sample_image(fake_aws) -> bytes:
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    Image.new("RGB", (64, 48), (200, 120, 40)).save(out, "JPEG")
    fake_aws.client("s3").put_object(Bucket=BUCKET, Key="samples/street.jpg",
                                     Body=out.getvalue())
    return out.getvalue()


def _endpoints(fake_aws, name):
    return [e["EndpointName"] for e in fake_aws.client("sagemaker").list_endpoints(
        NameContains=name)["Endpoints"]]


def test_inference_notebook_serves_the_latest_job_draws_and_deletes(fake_aws):
    """From the latest finished job to an auto-scaling endpoint, detections drawn, latency, and
    back to nothing (EP-2, EP-4, AAS-1)."""
    job = completed_training_job(fake_aws)
    image = _sample_image(fake_aws)
    before, calls = len(fake_aws.serving_requests_since(0)), len(fake_aws.invocations)
    # A GPU type moto's CreateEndpointConfig knows: its list of instance types predates the
    # notebook's default, ml.g5.xlarge (checked through `deploy --dry-run` in test_cli.py).
    output = execute("inference.ipynb", {"LATENCY_REQUESTS": 5, "INSTANCE_TYPE": "ml.g4dn.xlarge"})
    sent = dict(fake_aws.serving_requests_since(before))
    assert list(sent) == ["CreateModel", "CreateEndpointConfig", "CreateEndpoint",
                          "RegisterScalableTarget", "PutScalingPolicy"]
    container = sent["CreateModel"]["PrimaryContainer"]
    assert container == {"Image": INFERENCE_IMAGES["gpu"],
                         "ModelDataUrl": f"s3://{BUCKET}/{model_key(job)}"}
    assert sent["CreateEndpointConfig"]["ProductionVariants"][0]["InstanceType"] == "ml.g4dn.xlarge"
    assert "KmsKeyId" not in sent["CreateEndpointConfig"]  # ml.g4dn.xlarge: local NVMe
    name = sent["CreateEndpoint"]["EndpointName"]
    assert name.startswith(f"{JOB_PREFIX}-endpoint-")
    sent_images = fake_aws.invocations[calls:]
    assert len(sent_images) == 1 + 5  # the image, then the timed requests
    assert all(i["Body"] == image and i["ContentType"] == "image/jpeg" for i in sent_images)
    assert sent_images[0]["CustomAttributes"] == "score_threshold=0.5"
    assert f"training job:  {job}" in output
    assert "1 detections, image size [48, 64]" in output
    assert "person 0.91" in output
    assert '"image/png"' in output  # the drawn image
    assert re.search(r"latency over 5 requests: p50 [0-9.]+ ms, p90 [0-9.]+ ms", output)
    # The idle alarm (CW-3) goes with the endpoint, and deleting removes it again.
    assert f"idle alarm:    {name}-idle notifies {fake_aws.parameters['notification-topic-arn']}" \
           " after 8 h without an invocation" in output
    assert f"{name}: deleted, nothing left" in output
    assert_report_shown(output, job)
    assert fake_aws.client("cloudwatch").describe_alarms(AlarmNamePrefix=name)["MetricAlarms"] == []
    assert _endpoints(fake_aws, name) == []


def test_inference_notebook_warns_when_the_endpoint_is_kept(fake_aws):
    completed_training_job(fake_aws)
    _sample_image(fake_aws)
    before = len(fake_aws.serving_requests_since(0))
    output = execute("inference.ipynb", {"LATENCY_REQUESTS": 1, "DELETE_AT_END": False,
                                         "INSTANCE_TYPE": "ml.m5.xlarge", "ALLOW_CPU": True})
    sent = dict(fake_aws.serving_requests_since(before))
    name = sent["CreateEndpoint"]["EndpointName"]
    assert sent["CreateModel"]["PrimaryContainer"]["Image"] == INFERENCE_IMAGES["cpu"]
    assert sent["CreateEndpointConfig"]["KmsKeyId"] == fake_aws.parameters["kms-key-arn"]
    assert f"WARNING: {name} keeps running and billing" in output
    assert _endpoints(fake_aws, name) == [name]
    # The next run's listing shows it: instances, price class, age, idle alarm.
    listing = execute("inference.ipynb", {"JOB_NAME": "no-such-job"}, until=1)
    assert re.search(rf"  {name}: InService, 1 x ml.m5.xlarge \(\$ per instance-hour\), up 0 h "
                     r"\d+ min, idle alarm (OK|ALARM|INSUFFICIENT_DATA)", listing)
    from maskrcnn_launcher.serving import endpoints
    from maskrcnn_launcher.deployment import settings

    endpoints.delete(settings.load(fake_aws.client("ssm"), "/maskrcnn-test"), name,
                  shared_boto_session(), echo=lambda _: None)
    assert _endpoints(fake_aws, name) == []


def test_inference_notebook_refuses_a_cpu_instance_before_creating_anything(fake_aws):
    completed_training_job(fake_aws)
    _sample_image(fake_aws)
    before = len(fake_aws.serving_requests_since(0))
    with pytest.raises(Exception, match="instance type 'ml.m5.xlarge' has no GPU"):
        execute("inference.ipynb", {"INSTANCE_TYPE": "ml.m5.xlarge"})
    assert fake_aws.serving_requests_since(before) == []


def test_launch_notebook_tunes_the_launch_when_asked_and_names_the_best_candidate(fake_aws):
    """The tuning section (docs/tuning.md): the launch above as a tuning job, sent once, its
    candidates followed, the best taken by the tuning job's name (fake_aws.py plays them)."""
    before = len(fake_aws.create_tuning_job_requests)
    output = execute("mask-rcnn-fsx.ipynb", {"TUNE": True})
    sent, = fake_aws.create_tuning_job_requests[before:]
    name = sent["HyperParameterTuningJobName"]
    definition = sent["TrainingJobDefinition"]
    assert definition["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"][
        "FileSystemType"] == "FSxLustre"
    assert f"{name}: Completed, 3 of at most 8 candidates" in output
    best, = re.findall(rf"best so far: ({name}-\d{{3}}-[0-9a-f]{{8}})", output)[-1:]
    assert f"tuning job {name}: its best candidate {best}" in output
    assert f"best candidate: {best}" in output


def test_inference_notebook_predicts_a_batch_and_hands_it_to_labeling(fake_aws):
    """The notebook's last section: a Batch Transform over a prefix of the samples prefix, its
    predictions collected, the pre-annotations, ranking and contact sheet written and uploaded
    (docs/labeling.md; the requests themselves: test_predict_batch.py)."""
    job = completed_training_job(fake_aws)
    image = _sample_image(fake_aws)
    fake_aws.client("s3").put_object(Bucket=BUCKET, Key="samples/nb-batch/a.jpg", Body=image)
    before = len(fake_aws.create_transform_job_requests)
    output = execute("inference.ipynb", {"LATENCY_REQUESTS": 1, "INSTANCE_TYPE": "ml.g4dn.xlarge",
                                         "BATCH_INPUT": f"s3://{BUCKET}/samples/nb-batch/"})
    request, = fake_aws.create_transform_job_requests[before:]
    assert request["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"] \
        == f"s3://{BUCKET}/samples/nb-batch/"
    name = request["TransformJobName"]
    assert f"training job:  {job}" in output
    assert "images:      1 (1 answered, 0 failed, 0 without a detection)" in output
    assert "Label next (ranking.csv" in output and "CVAT (cvat-coco.json):" in output
    assert '"image/jpeg"' in output  # the contact sheet shown
    listed = fake_aws.client("s3").list_objects_v2(
        Bucket=BUCKET, Prefix=f"jobs/predictions/{name}/")["Contents"]
    assert f"jobs/predictions/{name}/predictions.json" in {o["Key"] for o in listed}
    # Other tests of this notebook send every image below the samples prefix.
    fake_aws.client("s3").delete_object(Bucket=BUCKET, Key="samples/nb-batch/a.jpg")
