"""Hyperparameter tuning (training/tuning.py, `tune`, `follow`): the request built from the launch
plan, held to botocore's whole model (docs/aws-rules.md TUN-1, TUN-2) and SageMaker's documented
rules, every bad input refused by name with nothing sent, the candidates followed, and the best
candidate resolved by the tuning job's name. A candidate's training on emulated hosts:
tests/training/test_job.py (its module run is one)."""

import json
import re

import pytest

from maskrcnn_contract import metrics
from maskrcnn_launcher.runs import lookup
from maskrcnn_launcher.training import tuning, validation
from maskrcnn_launcher.training.options import LaunchOptions, LaunchRequestError

from tests.launcher import service_model
from tests.launcher.conftest import BUCKET, JOB_PREFIX, shared_boto_session
from tests.launcher.fake_aws import TUNING_OBJECTIVE_VALUES
from tests.launcher.cli import cli
from tests.launcher.test_validation import sent as launch_request


def _tuning(deployment, launch=None, **options):
    launch = launch or LaunchOptions(data_source="fsx", run_name="tune-1")
    return tuning.tuning_job(deployment, launch, tuning.TuningOptions(**options),
                             shared_boto_session(), echo=lambda line: None)


def test_the_request_is_the_launchs_plan_searched_and_botocores_model_accepts_it(deployment):
    built = _tuning(deployment)
    request = built.request
    # Every constraint of botocore's model (patterns, lengths, enums, maximums), which neither
    # botocore's client nor moto checks.
    assert service_model.problems("sagemaker", "CreateHyperParameterTuningJob", request) == []
    assert request["HyperParameterTuningJobName"] == f"{JOB_PREFIX}-tune-1"
    config = request["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Bayesian" and config["TrainingJobEarlyStoppingType"] == "Auto"
    # Ranked by the best checkpoint's value of the figure (TUN-4), maximized for an AP.
    assert config["HyperParameterTuningJobObjective"] == {"MetricName": metrics.BEST_OBJECTIVE,
                                                         "Type": "Maximize"}
    assert config["ParameterRanges"]["ContinuousParameterRanges"][0] == {
        "Name": "base_learning_rate", "MinValue": "0.001", "MaxValue": "0.01",
        "ScalingType": "Logarithmic"}
    # The definition is the launch's request: same channels, image, role, VPC, instances, run
    # time, output and key, metric definitions; its hyperparameters but the searched ones.
    launch = launch_request(deployment, data_source="fsx", run_name="tune-1",
                            hyperparameters={"objective_metric": "eval/segm_AP"})
    definition = request["TrainingJobDefinition"]
    for key in ("RoleArn", "InputDataConfig", "VpcConfig", "OutputDataConfig", "ResourceConfig",
                "StoppingCondition", "CheckpointConfig"):
        assert definition[key] == launch[key], key
    assert definition["AlgorithmSpecification"] == launch["AlgorithmSpecification"]
    static = {k: v for k, v in launch["HyperParameters"].items()
              if k not in ("base_learning_rate", "warmup_steps", "weight_decay")}
    assert definition["StaticHyperParameters"] == static
    assert static["objective_metric"] == "eval/segm_AP"
    assert static["sagemaker_mpi_enabled"] == "true"  # the distribution's, as a launch sends
    # The launch's checkpoints, the run's prefix, which every candidate shares and keeps its own
    # below its name in (TUN-6); what a candidate cannot have (TUN-3): TensorBoard's upload.
    assert definition["CheckpointConfig"] == {
        "S3Uri": f"s3://{BUCKET}/checkpoints/{JOB_PREFIX}-tune-1/",
        "LocalPath": "/opt/ml/checkpoints"}
    assert "TensorBoardOutputConfig" not in definition
    assert f"each candidate keeps its checkpoints below its training job's name, s3://{BUCKET}/" \
           f"checkpoints/{JOB_PREFIX}-tune-1/{JOB_PREFIX}-tune-1-NNN-xxxxxxxx/, and resumes only " \
           "those after an interruption" in "\n".join(built.notes)


def test_a_loss_objective_is_minimized(deployment):
    config = _tuning(deployment, objective="eval/mask_loss").request[
        "HyperParameterTuningJobConfig"]
    assert config["HyperParameterTuningJobObjective"]["Type"] == "Minimize"


def test_spot_candidates_wait_as_a_spot_launch_and_resume_their_own_checkpoints(fake_aws,
                                                                                deployment):
    """`tune --spot`: the definition is a spot launch's, EnableManagedSpotTraining and
    StoppingCondition's MaxWaitTimeInSeconds (at least the run: twice it by default) as a launch
    sends them, with the launch's CheckpointConfig for a candidate restarted after an interruption
    to resume from (its own, below its name: TUN-6); botocore's model accepts it, and the notebook
    role may send it (the candidates' reads and writes of the checkpoints as the training role
    included: tests/iam/implied.py)."""
    launch = LaunchOptions(data_source="s3", run_name="spot-1", use_spot=True, max_run_hours=24)
    built = _tuning(deployment, launch)
    definition = built.request["TrainingJobDefinition"]
    assert service_model.problems("sagemaker", "CreateHyperParameterTuningJob",
                                  built.request) == []
    spot_launch = launch_request(deployment, data_source="s3", run_name="spot-1", use_spot=True,
                                 max_run_hours=24,
                                 hyperparameters={"objective_metric": "eval/segm_AP"})
    assert definition["EnableManagedSpotTraining"] is True
    assert definition["StoppingCondition"] == spot_launch["StoppingCondition"] == {
        "MaxRuntimeInSeconds": 24 * 3600, "MaxWaitTimeInSeconds": 48 * 3600}
    assert definition["CheckpointConfig"] == spot_launch["CheckpointConfig"]
    assert "managed spot, each waiting at most 48 h for capacity and its run" \
        in "\n".join(built.notes)
    candidate = tuning.candidate_request(built.request, tuning.ends(built.request))
    assert candidate["EnableManagedSpotTraining"] is True
    assert service_model.problems("sagemaker", "CreateTrainingJob", candidate) == []
    before = len(fake_aws.create_tuning_job_requests)
    result = cli(fake_aws, "tune", "--data-source", "s3", "--run-name", "spot-2", "--spot",
                 "--max-jobs", "2", "--max-parallel-jobs", "1")
    assert result.returncode == 0, result.stderr
    sent, = fake_aws.create_tuning_job_requests[before:]
    assert sent["TrainingJobDefinition"]["EnableManagedSpotTraining"] is True
    assert sent["TrainingJobDefinition"]["CheckpointConfig"]["S3Uri"] == \
        f"s3://{BUCKET}/checkpoints/{JOB_PREFIX}-spot-2/"


def test_the_fake_sagemaker_refuses_what_botocores_model_refuses(deployment):
    """What the fake holds a request to (the model's pattern, maximum, enum), shown on values
    the launcher itself refuses earlier."""
    request = json.loads(json.dumps(_tuning(deployment).request))
    request["HyperParameterTuningJobName"] = "x" * 33
    request["HyperParameterTuningJobConfig"]["Strategy"] = "Genetic"
    request["TrainingJobDefinition"]["StaticHyperParameters"]["k" * 257] = "v"
    found = "\n".join(service_model.problems("sagemaker", "CreateHyperParameterTuningJob",
                                             request))
    assert "HyperParameterTuningJobName: length 33 is above the maximum 32" in found
    assert "Strategy: 'Genetic' is not one of" in found
    assert "key 'kkkk" in found and "above the maximum 256" in found


def test_a_candidate_is_derived_as_sagemaker_derives_it_and_checked_as_a_launch(deployment):
    request = _tuning(deployment).request
    candidate = tuning.candidate_request(request, {"base_learning_rate": "0.005",
                                                   "warmup_steps": "300",
                                                   "weight_decay": "0.00002"}, number=7)
    assert re.fullmatch(rf"{JOB_PREFIX}-tune-1-007-[0-9a-f]{{8}}", candidate["TrainingJobName"])
    hps = candidate["HyperParameters"]
    assert hps["_tuning_objective_metric"] == metrics.BEST_OBJECTIVE
    assert hps["base_learning_rate"] == "0.005" and hps["objective_metric"] == "eval/segm_AP"
    validation.validate(candidate, deployment, validation.TUNING_CANDIDATE)
    assert service_model.problems("sagemaker", "CreateTrainingJob", candidate) == []
    del hps["_tuning_objective_metric"]
    with pytest.raises(LaunchRequestError, match="_tuning_objective_metric=None: a tuning job's "
                                                 "candidate carries its objective"):
        validation.validate(candidate, deployment, validation.TUNING_CANDIDATE)


def test_tune_sends_the_request_follow_lists_the_candidates_and_the_best_is_taken_by_name(
        fake_aws, deployment):
    before = len(fake_aws.create_tuning_job_requests)
    result = cli(fake_aws, "tune", "--data-source", "s3", "--run-name", "tune-2",
                 "--max-jobs", "3", "--max-parallel-jobs", "3")
    assert result.returncode == 0, result.stderr
    assert "at most 3 jobs, 3 at a time, each 2 x ml.p4d.24xlarge for up to 72 h: at most 432 " \
           "instance-hours" in result.stderr
    sent, = fake_aws.create_tuning_job_requests[before:]
    name = f"{JOB_PREFIX}-tune-2"
    assert sent["HyperParameterTuningJobName"] == name
    followed = cli(fake_aws, "follow", name)
    assert followed.returncode == 0, followed.stderr
    summary = json.loads(followed.stdout)
    best = max(summary["candidates"], key=lambda c: c["objective"])
    assert summary["best_candidate"] == best["name"]
    assert summary["best_objective"] == max(TUNING_OBJECTIVE_VALUES)
    assert [c["values"]["warmup_steps"] for c in summary["candidates"]] == ["100", "1000", "550"]
    assert f"best so far: {best['name']} (objective {max(TUNING_OBJECTIVE_VALUES):.4g})" \
        in followed.stderr
    assert re.search(rf"{name}-001-[0-9a-f]{{8}}  Completed  objective +0\.21  "
                     r"base_learning_rate=0\.001, warmup_steps=100, weight_decay=1e-05",
                     followed.stderr), followed.stderr
    # The one lookup every flow uses takes the tuning job's name, and says which candidate.
    said = []
    job = lookup.training_job(fake_aws.client("sagemaker"), fake_aws.client("s3"), deployment,
                              name, echo=said.append)
    assert job["TrainingJobName"] == best["name"]
    assert said == [f"tuning job {name}: its best candidate {best['name']} "
                    f"({metrics.BEST_OBJECTIVE} {max(TUNING_OBJECTIVE_VALUES):g})"]
    report = cli(fake_aws, "report", name)
    assert report.returncode == 0, report.stderr
    assert f"its best candidate {best['name']}" in report.stderr
    deploy = cli(fake_aws, "deploy", "--job", name, "--dry-run")
    assert deploy.returncode == 0, deploy.stderr
    assert f"{BUCKET}/jobs/{best['name']}/output/model.tar.gz" in deploy.stdout


def test_a_training_job_is_still_followed_by_its_name(fake_aws):
    from tests.launcher.conftest import completed_training_job

    job = completed_training_job(fake_aws, run="followed")
    result = cli(fake_aws, "follow", job)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout[result.stdout.index("{\n"):])["status"] == "Completed"


# Every bad tuning input: exit status 2, each value named, nothing sent. Grouped: the launcher
# names every problem of a group at once (the options, then every range), so one call shows many.
@pytest.mark.parametrize("args, messages", [
    (["--objective", "train/loss", "--max-jobs", "2", "--max-parallel-jobs", "3",
      "--strategy", "Hyperband", "--early-stopping", "Sometimes"],
     ["objective 'train/loss' (--objective): expected one of the job's evaluation figures: "
      "eval/bbox_AP",
      "max parallel jobs 3 (--max-parallel-jobs) is above max jobs 2 (--max-jobs)",
      "strategy 'Hyperband' (--strategy): expected one of Bayesian, Random",
      "early stopping 'Sometimes' (--early-stopping): expected one of Auto, Off"]),
    (["--max-jobs", "0", "--objective", "eval/bbox_AP", "--hp", "objective_metric=eval/segm_AP",
      "--keep-alive-seconds", "600"],
     ["max jobs (--max-jobs, max_jobs) 0: expected a whole number, 1 or more",
      "objective 'eval/bbox_AP' (--objective) and the hyperparameter "
      "objective_metric='eval/segm_AP' differ",
      "managed warm pools are documented for training jobs"]),
    (["--range", "learning_rate=0.001:0.01",
      "--range", "base_learning_rate=0:0.01:Logarithmic",
      "--range", "weight_decay=0.01:0.001",
      "--range", "warmup_steps=10.5:100",
      "--range", "max_steps=0:1:ReverseLogarithmic",
      "--range", "momentum=0.5:0.9:Squared",
      "--range", "batch_norm=0:1",
      "--range", "distribution=horovod|multi_worker_mirrored",
      "--range", "eval_every_epochs=-1:2",
      "--range", "image_size=512:1024", "--hp", "image_size=800"],
     ["the job has no hyperparameter 'learning_rate'",
      "range base_learning_rate from 0 to 0.01 (Logarithmic) (--range): a Logarithmic scale "
      "needs values above 0",
      "range weight_decay from 0.01 to 0.001 (Auto) (--range): the minimum must be below the "
      "maximum",
      "warmup_steps is Integer: its ends must be whole numbers",
      "a ReverseLogarithmic scale takes continuous values in [0, 1) only",
      "scaling 'Squared': expected one of Auto, Linear, Logarithmic, ReverseLogarithmic",
      "batch_norm is categorical: expected NAME=A|B, e.g. batch_norm=frozen|sync|per_rank",
      "distribution is not searched: the launcher sends the toolkit's hyperparameters of one "
      "distribution",
      "range eval_every_epochs from -1 to 2 (Auto) (--range): at eval_every_epochs=-1: "
      "hyperparameter eval_every_epochs=-1.0: must be >= 0.0",
      "image_size='800' is also given as a static hyperparameter (--hp): give it once"]),
    (["--range", "batch_norm=sync|per_rank", "--distribution", "parameter_server"],
     ["range batch_norm in {sync, per_rank} (--range): at batch_norm=sync: "]),
    (["--run-name", "a-rather-long-tuning-run"],
     ["tuning job name 'maskrcnn-test-a-rather-long-tuning-run' (38 characters): SageMaker takes "
      "1 to 32"]),
    (["--range", "warmup_steps"], ["range 'warmup_steps' (--range): expected NAME=MIN:MAX"]),
])
def test_a_bad_tuning_input_is_refused_by_name_and_nothing_is_sent(fake_aws, args, messages):
    before = len(fake_aws.create_tuning_job_requests)
    result = cli(fake_aws, "tune", "--data-source", "fsx", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    for message in messages:
        assert message in result.stderr, result.stderr
    assert result.stdout == ""
    assert fake_aws.create_tuning_job_requests[before:] == []


def test_a_warmup_range_the_runs_length_would_not_keep_is_refused(fake_aws):
    """Each end of a range against the staged dataset's length, as a launch's own values are:
    4000 images, 2 x 8 ranks of 2 images, 12 epochs: 1500 steps."""
    from maskrcnn_contract import job_io

    from tests.launcher.fake_aws import STAGED_INFO

    fake_aws.client("s3").put_object(
        Bucket=BUCKET, Key=f"datasets/coco2017/{job_io.DATASET_COMPLETE_MARKER}",
        Body=json.dumps(STAGED_INFO).encode())
    before = len(fake_aws.create_tuning_job_requests)
    result = cli(fake_aws, "tune", "--data-source", "fsx", "--range", "warmup_steps=100:5000",
                 "--dry-run")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "range warmup_steps from 100 to 5000 (Auto) (--range): at warmup_steps=5000: " \
        in result.stderr
    assert "warmup_steps=100:" not in result.stderr  # the other end is kept
    assert fake_aws.create_tuning_job_requests[before:] == []


def test_a_request_changed_after_it_was_built_is_refused_before_sending(fake_aws, deployment):
    built = _tuning(deployment, max_jobs=2, max_parallel_jobs=2)
    request = json.loads(json.dumps(built.request))
    request["HyperParameterTuningJobConfig"]["ResourceLimits"]["MaxParallelTrainingJobs"] = 3
    request["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]["MetricName"] = \
        "eval/nothing"
    request["TrainingJobDefinition"]["RoleArn"] = "arn:aws:iam::123456789012:role/admin"
    request["TrainingJobDefinition"]["CheckpointConfig"]["S3Uri"] = \
        f"s3://{BUCKET}/checkpoints/{JOB_PREFIX}-another-run/"
    before = len(fake_aws.create_tuning_job_requests)
    with pytest.raises(LaunchRequestError) as error:
        tuning.send(tuning.Tuning(request, built.plan, ()), deployment,
                    fake_aws.client("sagemaker"))
    for problem in ("MaxParallelTrainingJobs 3 is above MaxNumberOfTrainingJobs 2",
                    "objective 'eval/nothing' is not one of the definition's MetricDefinitions",
                    "is not the deployment's tuning candidate role",
                    f"CheckpointConfig {{'S3Uri': 's3://{BUCKET}/checkpoints/{JOB_PREFIX}-another-"
                    f"run/', 'LocalPath': '/opt/ml/checkpoints'}}: expected {{'S3Uri': 's3://"
                    f"{BUCKET}/checkpoints/{JOB_PREFIX}-tune-1/'"):
        assert problem in str(error.value)
    assert fake_aws.create_tuning_job_requests[before:] == []
