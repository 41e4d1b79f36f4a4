"""Runs side by side (runs/table.py, runs/compare.py, runs/event_files.py, the `runs` and
`compare` commands, runs.ipynb) against the local AWS, as the notebook role (tests/iam). The
figures here are the fake jobs' (tests/launcher/fake_aws.py); a played job's real report and
TensorBoard output: tests/training/test_strategies.py
(test_runs_and_compare_show_the_played_jobs_figures)."""

import io
import json
import struct
import tarfile
import uuid

import numpy as np
import pytest
from maskrcnn_contract import evaluation_report as contract
from maskrcnn_contract import job_io
from maskrcnn_contract import metrics as job_metrics
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.plugins.scalar import metadata as scalar_metadata
from tensorboard.summary.writer.record_writer import RecordWriter
from tensorboard.util import tensor_util

from tests.launcher.cli import cli
from tests.launcher.conftest import BUCKET, JOB_PREFIX, model_key, shared_boto_session
from tests.launcher.fake_aws import FAKE_PNG, FAKE_REPORT, model_archive
from tests.launcher.test_notebooks import execute


# The fake job's report's mask AP (fake_aws.FAKE_REPORT), which the table shows as its final AP.
FAKE_MASK_AP = FAKE_REPORT["tasks"]["segm"]["summary"]["AP"]



# --- event files --------------------------------------------------------------------------------

def _scalar_event(tag, step, value, wall_time=1.0, first=True, simple=False):
    """An Event as TensorFlow 2's tf.summary.scalar writes it (a 0-d float tensor, the scalars
    plugin in the tag's first metadata), or TensorFlow 1's simple_value."""
    if simple:
        summary_value = summary_pb2.Summary.Value(tag=tag, simple_value=value)
    else:
        summary_value = summary_pb2.Summary.Value(
            tag=tag, tensor=tensor_util.make_tensor_proto(np.float32(value)),
            metadata=scalar_metadata.create_summary_metadata("", "") if first else None)
    return event_pb2.Event(wall_time=wall_time, step=step,
                           summary=summary_pb2.Summary(value=[summary_value]))


def _image_event(tag, step, png=FAKE_PNG):
    value = summary_pb2.Summary.Value(
        tag=tag, tensor=tensor_util.make_tensor_proto([b"1", b"1", png]),
        metadata=image_metadata.create_summary_metadata("", ""))
    return event_pb2.Event(wall_time=2.0, step=step, summary=summary_pb2.Summary(value=[value]))


def _event_file(events) -> bytes:
    """The events framed by TensorBoard's own RecordWriter, as the job's writer frames them."""
    out = io.BytesIO()
    writer = RecordWriter(out)
    for event in events:
        writer.write(event.SerializeToString())
    return out.getvalue()


def test_event_files_give_the_scalars_a_job_writes_and_skip_what_is_not_one(tmp_path):
    from maskrcnn_launcher.runs import event_files

    first = tmp_path / "events.out.tfevents.1000.algo-1"
    first.write_bytes(_event_file([
        event_pb2.Event(wall_time=0.5, file_version="brain.Event:2"),
        _scalar_event("train/loss", 5, 2.0), _scalar_event("train/loss", 10, 1.5, first=False),
        _image_event("eval_report/segm_pr_curves", 10),
        _scalar_event("eval/segm_AP", 10, 0.125, simple=True)]))
    # A restart from step 5 writes its steps again, into a later file: the later value wins.
    second = tmp_path / "events.out.tfevents.2000.algo-1"
    second.write_bytes(_event_file([_scalar_event("train/loss", 10, 1.25, wall_time=9.0),
                                    _scalar_event("train/loss", 15, 1.0, wall_time=9.5)]))
    scalars = event_files.read([tmp_path])
    assert {tag: [(p.step, p.value) for p in points]
            for tag, points in scalars.curves.items()} == {
        "eval/segm_AP": [(10, 0.125)], "train/loss": [(5, 2.0), (10, 1.25), (15, 1.0)]}
    assert scalars.files == [str(first), str(second)] and scalars.truncated == []


def test_a_corrupt_event_file_is_refused_and_a_cut_one_read_up_to_its_last_whole_record(tmp_path):
    from maskrcnn_launcher.runs import event_files

    data = _event_file([_scalar_event("train/loss", 5, 2.0), _scalar_event("train/loss", 10, 1.5)])
    cut = tmp_path / "cut" / "events.out.tfevents.1.algo-1"
    cut.parent.mkdir()
    cut.write_bytes(data[:-6])  # SageMaker uploads a growing file: its last record not yet whole
    scalars = event_files.read([cut])
    assert [(p.step, p.value) for p in scalars.curves["train/loss"]] == [(5, 2.0)]
    assert scalars.truncated == [str(cut)]
    corrupt = bytearray(data)
    corrupt[12 + 3] ^= 0x40  # a byte of the first record's data: its CRC no longer matches
    bad = tmp_path / "bad" / "events.out.tfevents.1.algo-1"
    bad.parent.mkdir()
    bad.write_bytes(bytes(corrupt))
    with pytest.raises(event_files.EventFileError, match="record at byte 0 fails its CRC-32C"):
        event_files.read([bad])
    not_events = tmp_path / "events.out.tfevents.not"
    not_events.write_bytes(struct.pack("<Q", 5) + b"\0" * 20)
    with pytest.raises(event_files.EventFileError, match="length of the record at byte 0"):
        event_files.read([not_events])


# --- jobs as a launch sends them ------------------------------------------------------------------

def _job(fake_aws, dataset, distribution="horovod", instance_type="ml.p4d.24xlarge", count=2,
         spot=False, data_source="s3", hyperparameters=None, run=None) -> str:
    """A training job of the deployment as a launch sends it (the train channel of `dataset` on
    `data_source`, the metric definitions, TensorBoard's output), Completed at once with the fake
    job's log, summaries and model (its report: fake_aws.FAKE_REPORT)."""
    params = fake_aws.parameters
    run = run or f"{JOB_PREFIX}-{dataset}"
    name = f"{run}-{uuid.uuid4().hex[:6]}"
    if data_source == "s3":
        source = {"S3DataSource": {"S3DataType": "S3Prefix", "S3DataDistributionType":
                                   "FullyReplicated",
                                   "S3Uri": f"s3://{BUCKET}/datasets/{dataset}/"}}
    else:
        source = {"FileSystemDataSource": {
            "FileSystemId": params["efs-id"], "FileSystemType": "EFS",
            "FileSystemAccessMode": "ro", "DirectoryPath": f"/datasets/{dataset}"}}
    fake_aws.client("sagemaker").create_training_job(
        TrainingJobName=name, RoleArn=params["training-role-arn"],
        AlgorithmSpecification={"TrainingImage": params["training-image-uri"],
                                "TrainingInputMode": "File",
                                "MetricDefinitions": job_metrics.METRIC_DEFINITIONS},
        HyperParameters={"distribution": distribution, **(hyperparameters or {})},
        InputDataConfig=[{"ChannelName": job_io.TRAIN_CHANNEL, "DataSource": source}],
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/jobs/"},
        TensorBoardOutputConfig={"S3OutputPath": f"s3://{BUCKET}/jobs/tensorboard/{run}/",
                                 "LocalPath": job_io.TENSORBOARD_LOCAL_PATH},
        ResourceConfig={"InstanceType": instance_type, "InstanceCount": count,
                        "VolumeSizeInGB": 200},
        StoppingCondition={"MaxRuntimeInSeconds": 36000,
                           **({"MaxWaitTimeInSeconds": 72000} if spot else {})},
        **({"EnableManagedSpotTraining": True, "CheckpointConfig": {
            "S3Uri": f"s3://{BUCKET}/checkpoints/{run}/",
            "LocalPath": job_io.CHECKPOINT_LOCAL_PATH}} if spot else {}))
    return name


def _report(per_class_ap: dict, summary_ap: float) -> dict:
    """FAKE_REPORT with other classes and APs (the masks' task)."""
    report = json.loads(json.dumps(FAKE_REPORT))
    segm = report["tasks"]["segm"]
    template = segm["per_class"][0]
    segm["per_class"] = [dict(template, id=k + 1, name=name, AP=ap)
                         for k, (name, ap) in enumerate(per_class_ap.items())]
    segm["summary"] = {"AP": summary_ap}
    report["categories"] = [{"id": k + 1, "name": name} for k, name in enumerate(per_class_ap)]
    report["tasks"]["bbox"]["per_class"] = [dict(row) for row in segm["per_class"]]
    return report


def _put_report(fake_aws, job, report) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        data = json.dumps(report).encode()
        info = tarfile.TarInfo(f"{contract.MODEL_REPORT_DIR}/{contract.REPORT_FILE}")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    fake_aws.client("s3").put_object(Bucket=BUCKET, Key=model_key(job), Body=out.getvalue())


def _staging_job(fake_aws, dataset) -> str:
    """A job named as the launcher names staging jobs (jobs.staging_job_name)."""
    name = f"{JOB_PREFIX}-stage-{dataset}-{uuid.uuid4().hex[:6]}"
    fake_aws.client("sagemaker").create_training_job(
        TrainingJobName=name, RoleArn=fake_aws.parameters["staging-role-arn"],
        AlgorithmSpecification={"TrainingImage": "x", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/jobs/"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        StoppingCondition={"MaxRuntimeInSeconds": 3600})
    return name


def _dataset() -> str:
    return f"runs{uuid.uuid4().hex[:6]}"


def test_the_table_shows_each_runs_settings_time_cost_and_evaluation(fake_aws, deployment):
    """TRN-6: instance-hours are billable seconds x instances; the cost those hours at the price
    given for the type, `unknown` for spot and for a type without a price. The final AP is the
    report's, else SageMaker's last eval/segm_AP; the worst class the report's lowest AP."""
    from maskrcnn_launcher.runs import table

    dataset = _dataset()
    on_demand = _job(fake_aws, dataset, "multi_worker_mirrored", count=4,
                     hyperparameters={"max_steps": "3000", "base_learning_rate": "0.02"})
    spot = _job(fake_aws, dataset, "parameter_server", "ml.g5.12xlarge", count=3, spot=True,
                data_source="efs")
    unpriced = _job(fake_aws, dataset, instance_type="ml.p3.16xlarge", count=1)
    fake_aws.ran_for(on_demand, 5400)
    fake_aws.ran_for(spot, 7200, billable=2400)
    _put_report(fake_aws, on_demand, _report({"bolt": 0.41, "nut": 0.18, "washer": None}, 0.295))
    fake_aws.client("s3").put_object(Bucket=BUCKET, Key=model_key(unpriced),
                                     Body=model_archive(report=False))
    other = _job(fake_aws, _dataset())  # another dataset: filtered out
    rows = table.runs(deployment, shared_boto_session(), dataset=dataset,
                      prices={"ml.p4d.24xlarge": 10.0, "ml.g5.12xlarge": 2.0})
    by_job = {r.job: r for r in rows}
    # Newest first: a job that trained longer was created earlier.
    assert [r.job for r in rows] == [unpriced, on_demand, spot] and other not in by_job
    row = by_job[on_demand]
    assert (row.dataset, row.data_source, row.distribution, row.instance_type,
            row.instance_count, row.spot) == (dataset, "s3", "multi_worker_mirrored",
                                             "ml.p4d.24xlarge", 4, False)
    assert row.hyperparameters["max_steps"] == 3000
    assert row.hyperparameters["base_learning_rate"] == 0.02
    assert row.hyperparameters["images_per_gpu"] == 2  # the contract's default, as the job parsed
    assert (row.duration_s, row.instance_hours, row.cost) == (5400, 6.0, 60.0)
    assert row.mask_ap == 0.295 and row.worst_class == ("nut", 0.18)
    row = by_job[spot]
    assert (row.dataset, row.data_source, row.spot) == (dataset, "efs", True)
    assert (row.duration_s, row.instance_hours, row.cost) == (7200, 2.0, None)
    assert row.mask_ap == FAKE_MASK_AP and row.worst_class == ("person", 0.377)  # FAKE_REPORT's
    row = by_job[unpriced]
    assert row.cost is None and row.worst_class is None
    assert row.mask_ap == pytest.approx(0.339)  # no report
    assert any("holds no evaluation report" in note for note in row.notes)
    cells = {r.job: table.cells(r) for r in rows}
    assert cells[on_demand]["cost"] == "$60.00"
    assert cells[on_demand]["instances"] == "4 x ml.p4d.24xlarge"
    assert cells[spot]["cost"] == "unknown (spot)" and cells[unpriced]["cost"] == "unknown"
    assert cells[spot]["instances"] == "3 x ml.g5.12xlarge spot"
    assert [r.job for r in table.sort(rows, "mask_ap")] == [spot, unpriced, on_demand]
    assert [r.job for r in table.sort(rows, "cost")] == [on_demand, unpriced, spot]  # unknown last
    assert [r.job for r in table.sort(rows, "job", descending=False)] == sorted(by_job)
    assert [r.job for r in table.runs(deployment, shared_boto_session(), dataset=dataset,
                                      last=2)] == [unpriced, on_demand]


def test_a_figure_not_from_where_its_column_says_is_marked_and_explained_under_the_table(
        fake_aws, deployment):
    """Never in silence: the mask AP of a job without an evaluation report (no report in its model,
    or a job not Completed) is SageMaker's final eval/segm_AP, and hyperparameters this contract
    no longer parses (a job of an older one) are the sent strings; each is marked in its cell
    and said under the table."""
    from maskrcnn_launcher.runs import table

    dataset = _dataset()
    no_report = _job(fake_aws, dataset)
    fake_aws.client("s3").put_object(Bucket=BUCKET, Key=model_key(no_report),
                                     Body=model_archive(report=False))
    older = _job(fake_aws, dataset, hyperparameters={"max_steps": "many", "images_per_gpu": "4"})
    reported = _job(fake_aws, dataset)
    rows = table.runs(deployment, shared_boto_session(), dataset=dataset)
    by_job = {r.job: r for r in rows}
    cells = {job: table.cells(row) for job, row in by_job.items()}
    assert cells[no_report]["mask AP"] == "0.339*" and by_job[no_report].mask_ap_from_metric
    assert cells[reported]["mask AP"] == f"{FAKE_MASK_AP:.3f}"  # the report's, unmarked
    assert cells[older]["hyperparameters"] == "max_steps=many images_per_gpu=4 *"
    assert not cells[reported]["hyperparameters"].endswith(table.MARK)
    assert cells[reported]["hyperparameters"].startswith("max_steps=")  # as the job parsed them
    printed = table.lines(rows)
    notes = [line for line in printed if line.startswith(tuple(f"{job}: " for job in by_job))]
    assert [line for line in notes if line.startswith(no_report)] == [
        f"{no_report}: mask AP* is SageMaker's final eval/segm_AP (the job's FinalMetricDataList),"
        f" not the evaluation report's: {by_job[no_report].notes[0].split(': ', 1)[1]}"]
    assert "holds no evaluation report" in by_job[no_report].notes[0]
    assert [line for line in notes if line.startswith(older)] == [
        f"{older}: hyperparameters* as sent, not as the job parsed them (this launcher's "
        "contract refuses them): hyperparameter max_steps='many': expected an integer"]
    assert not [line for line in notes if line.startswith(reported)]
    # A job that did not complete has no report to read: its AP is SageMaker's, said so.
    failed = dict(fake_aws.client("sagemaker").describe_training_job(TrainingJobName=reported),
                  TrainingJobStatus="Failed")
    row = table.row(deployment, failed, shared_boto_session())
    assert table.cells(row)["mask AP"] == "0.339*"
    assert row.notes == ("mask AP* is SageMaker's final eval/segm_AP (the job's "
                         "FinalMetricDataList), not the evaluation report's: the job is Failed: "
                         "the table reads the evaluation report of a Completed job only",)


def test_the_runs_command_prints_the_table_and_refuses_bad_input_before_any_call(fake_aws):
    dataset = _dataset()
    first = _job(fake_aws, dataset, hyperparameters={"max_steps": "500"})
    second = _job(fake_aws, dataset, "multi_worker_mirrored")
    fake_aws.ran_for(first, 3600)
    _put_report(fake_aws, second, _report({"bolt": 0.5, "nut": 0.25}, 0.375))
    staging = _staging_job(fake_aws, dataset)
    result = cli(fake_aws, "runs", "--dataset", dataset, "--sort", "mask_ap",
                 "--price", "ml.p4d.24xlarge=3.5")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["job", "status", "created", "dataset"]
    assert [line.split()[0] for line in lines[1:3]] == [first, second]  # 0.377, then 0.375
    assert "horovod" in lines[1] and "2 x ml.p4d.24xlarge" in lines[1] and "$7.00" in lines[1]
    assert "max_steps=500" in lines[1] and "person 0.377" in lines[1]
    assert "multi_worker_mirrored" in lines[2] and "nut 0.250" in lines[2]
    assert staging not in result.stdout
    for args, message in ((("--last", "0"), "--last 0: the number of runs must be 1 or more"),
                          (("--dataset", "COCO/2017"), "dataset name 'COCO/2017'"),
                          (("--price", "ml.p4d.24xlarge=free"), "price 'ml.p4d.24xlarge=free'"),
                          (("--price", "p4d=3"), "price 'p4d=3'"),
                          (("--price", "ml.p4d.24xlarge=0"), "must be above 0")):
        refused = cli(fake_aws, "runs", *args)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr


def _put_summaries(fake_aws, job, run, events) -> None:
    key = f"jobs/tensorboard/{run}/{job}/tensorboard-output/events.out.tfevents.1800000000.algo-1"
    fake_aws.client("s3").put_object(Bucket=BUCKET, Key=key, Body=_event_file(events))


def test_compare_puts_the_curves_and_per_class_ap_side_by_side(fake_aws, deployment, tmp_path):
    from PIL import Image

    from maskrcnn_launcher.runs import compare

    dataset = _dataset()
    run = f"{JOB_PREFIX}-{dataset}"
    first, second = _job(fake_aws, dataset, run=run), _job(fake_aws, dataset, run=run)
    _put_summaries(fake_aws, second, run, [_scalar_event("eval/segm_AP", 200, 0.25),
                                           _scalar_event("eval/segm_AP", 400, 0.5, first=False),
                                           _image_event("eval_report/segm_pr_curves", 400)])
    _put_report(fake_aws, second, _report({"person": 0.5, "car": 0.125}, 0.3125))
    compared = compare.compare(deployment, [first, second], shared_boto_session())
    assert compare.tags_of(compared) == ["train/loss", "eval/segm_AP"]
    lines = compare.curve_lines(compared)
    # The fake job's own summaries (train/loss 1.25 at step 100, 0.75 at 200), and ours.
    assert lines[1].split() == ["train/loss", "J1", "2", "100-200", "1.25", "0.75", "0.75", "1.25"]
    assert lines[3].split() == ["eval/segm_AP", "J1", "0", "-"]
    assert lines[4].split() == ["eval/segm_AP", "J2", "2", "200-400", "0.25", "0.5", "0.25", "0.5"]
    assert [line.split() for line in compare.per_class_lines(compared)] == [
        ["mask", "AP", "J1", "J2"], ["person", "0.377", "0.500"], ["bicycle", "-", "-"],
        ["car", "-", "0.125"], ["all", "classes", f"{FAKE_MASK_AP:.3f}", "0.312"]]
    picture = compare.picture(compared, str(tmp_path / "compare.png"))
    with Image.open(picture) as image:
        assert image.format == "PNG" and image.size[0] >= 1200
    # Copied where the launch notebooks copy a run, read from there.
    assert compared.curves[second].files[0].startswith(str(
        compare.tensorboard_logs.local_dir(run) / second / "tensorboard-output"))
    with pytest.raises(compare.lookup.RunRequestError, match="no job compared has the curve"):
        compare.tags_of(compared, ["eval/mask_loss"])


def test_the_compare_figure_draws_each_jobs_curves_and_per_class_ap():
    """compare.figure, read back from its matplotlib objects: a panel per chosen tag, a line per
    job that has the curve (its steps and values, labelled with the job), and a bar per job and
    class of the asked task's AP (None as 0; the bbox table differs, so a wrong task shows)."""
    from maskrcnn_launcher.runs import compare, event_files

    def points(*pairs):
        return [event_files.Point(step, 1.0, value) for step, value in pairs]

    jobs = ["maskrcnn-a-1", "maskrcnn-b-2", "maskrcnn-c-3"]
    curves = {jobs[0]: {"train/loss": points((100, 1.5), (200, 0.75), (300, 0.5)),
                        "eval/segm_AP": points((200, 0.125), (400, 0.25))},
              jobs[1]: {"train/loss": points((50, 2.0), (150, 1.0))},
              jobs[2]: {}}
    first = _report({"person": 0.5, "car": None}, 0.25)
    second = _report({"person": 0.375, "bicycle": 0.625}, 0.5)
    for report in (first, second):
        for row in report["tasks"]["bbox"]["per_class"]:
            row["AP"] = 0.0625
    compared = compare.Compared(
        jobs, {name: event_files.Scalars(curves[name], [], []) for name in jobs},
        {jobs[0]: first, jobs[1]: second, jobs[2]: None}, [])

    drawn = compare.figure(compared, ["eval/segm_AP", "train/loss"])
    *panels, bars = drawn.axes
    assert [axes.get_title() for axes in panels] == ["eval/segm_AP", "train/loss"]
    for axes, tag in zip(panels, ["eval/segm_AP", "train/loss"]):
        drawn_lines = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
                       for line in axes.get_lines()}
        assert drawn_lines == {
            f"J{i + 1} {name}": ([p.step for p in curves[name][tag]],
                                 [p.value for p in curves[name][tag]])
            for i, name in enumerate(jobs) if curves[name].get(tag)}, tag

    table = compare.per_class(compared, "segm")
    classes = [c for c in table if c != "all classes"]
    assert classes == ["person", "car", "bicycle"]
    assert [label.get_text() for label in bars.get_xticklabels()] == classes
    assert len(bars.containers) == len(jobs)
    for i, (name, container) in enumerate(zip(jobs, bars.containers)):
        assert container.get_label().startswith(f"J{i + 1} {name} (all classes ")
        assert [bar.get_height() for bar in container] == [table[c][name] or 0.0
                                                           for c in classes], name
    assert [bar.get_height() for bar in bars.containers[0]] == [0.5, 0.0, 0.0]
    assert [bar.get_height() for bar in bars.containers[1]] == [0.375, 0.0, 0.625]


def test_the_compare_command_writes_the_picture_and_refuses_jobs_it_cannot_compare(
        fake_aws, tmp_path):
    dataset = _dataset()
    first, second = _job(fake_aws, dataset), _job(fake_aws, dataset)
    out = tmp_path / "side-by-side.png"
    result = cli(fake_aws, "compare", first, second, "--tag", "train/loss", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == [f"J1 = {first}", f"J2 = {second}"]
    assert f"picture: {out}" in result.stdout and out.read_bytes()[:4] == b"\x89PNG"
    staging = _staging_job(fake_aws, dataset)
    for jobs, message in (([first], "two or more different training jobs"),
                          ([first, first], "two or more different training jobs"),
                          ([first, "other-job-1"], "is not this deployment's"),
                          ([first, f"{JOB_PREFIX}-no-such-job"], "does not exist"),
                          ([staging, first], "is a dataset staging job"),
                          ([first, second, "--tag", "eval/nothing"], "no job compared has")):
        refused = cli(fake_aws, "compare", *jobs)
        assert refused.returncode == 2 and message in refused.stderr, (jobs, refused.stderr)


def test_runs_notebook_shows_the_table_and_the_comparison(fake_aws):
    dataset = _dataset()
    first, second = _job(fake_aws, dataset), _job(fake_aws, dataset, "multi_worker_mirrored")
    output = execute("runs.ipynb", {"DATASET": dataset, "PRICES": {"ml.p4d.24xlarge": 4.0}})
    assert f"J1 = {second}" in output and f"J2 = {first}" in output  # the newest two
    assert "multi_worker_mirrored" in output and "person 0.377" in output
    assert "train/loss" in output and '"image/png"' in output
