"""MLflow on a launch (notebooks/maskrcnn_launcher/training/tracking.py, docs/experiments.md): by
default the deployment's tracking server (its ARN in SSM: the fake deployment has one), in the
request's Environment as MLflow's own variables, said before the launch; --no-mlflow logs none;
a tuning job's candidates inherit it; bad values refused by name with nothing sent (exit 2); the
request as sent logs only to the deployment's server (docs/aws-rules.md MLF-1). Every AWS call
is evaluated against the notebook role, as in every launcher test: the launcher makes no new one
(the ARN comes with the deployment's SSM parameters)."""

import copy
import dataclasses
import json

import pytest

from maskrcnn_contract import tracking as contract
from maskrcnn_launcher.deployment import settings
from maskrcnn_launcher.training import jobs, plan, tuning, validation
from maskrcnn_launcher.training.options import LaunchOptions, LaunchRequestError
from tests.launcher.cli import cli
from tests.launcher.conftest import shared_boto_session
from tests.launcher.test_validation import problems_of, sent

URI, EXPERIMENT = contract.TRACKING_URI_ENV, contract.EXPERIMENT_ENV


def test_a_launch_logs_to_the_deployments_tracking_server_unless_told_not_to(deployment):
    arn = deployment.mlflow_tracking_server_arn
    assert contract.is_tracking_server_arn(arn)
    request = sent(deployment, data_source="s3")
    assert request["Environment"] == {URI: arn, EXPERIMENT: "coco2017"}
    assert jobs.describe_inputs(request)[-1] == f"mlflow:       experiment 'coco2017' on {arn}"
    named = sent(deployment, data_source="s3", mlflow=True, mlflow_experiment="lr sweep #1")
    assert named["Environment"] == {URI: arn, EXPERIMENT: "lr sweep #1"}
    assert not sent(deployment, data_source="s3", mlflow=False).get("Environment")
    # A deployment without a server (maskrcnn:mlflow off): nothing logged, and said.
    without = dataclasses.replace(deployment, mlflow_tracking_server_arn=None)
    planned = plan.training_plan(without, LaunchOptions(data_source="s3"),
                                 shared_boto_session().client("s3"))
    assert planned.environment == {}
    assert not [note for note in planned.notes if note.startswith("mlflow")]


def test_a_tuning_jobs_candidates_log_each_to_the_experiment(deployment):
    launch = LaunchOptions(data_source="s3", mlflow_experiment="lr-1")
    built = tuning.tuning_job(deployment, launch, tuning.TuningOptions(max_jobs=2),
                              shared_boto_session(), echo=lambda line: None)
    definition = built.request["TrainingJobDefinition"]
    assert definition["Environment"] == {URI: deployment.mlflow_tracking_server_arn,
                                         EXPERIMENT: "lr-1"}
    candidate = tuning.candidate_request(built.request, tuning.ends(built.request))
    validation.validate(candidate, deployment, validation.TUNING_CANDIDATE)
    assert any(note.startswith("mlflow: the run is logged to experiment 'lr-1'")
               for note in built.notes)


def test_a_request_logs_only_to_the_deployments_tracking_server_and_a_name_mlflow_takes(
        deployment):
    """MLF-1: the training role may log to the deployment's server only, and the VPC's endpoint
    passes calls to it only; MLflow refuses an empty experiment name or one over 500
    characters."""
    request = sent(deployment, data_source="s3")
    for environment, expected in (
            ({URI: deployment.mlflow_tracking_server_arn.replace("maskrcnn-test-mlflow", "other")},
             f"Environment {URI} 'arn:aws:sagemaker:eu-west-2:123456789012:mlflow-tracking-server/"
             f"other': the training role may log to the deployment's tracking server "
             f"{deployment.mlflow_tracking_server_arn}"),
            ({URI: "http://10.0.0.5:5000"}, f"Environment {URI} 'http://10.0.0.5:5000'"),
            ({EXPERIMENT: ""}, f"Environment {EXPERIMENT}: experiment name '': expected a "
                               "non-empty string"),
            ({EXPERIMENT: "x" * 501}, "(501 characters): MLflow takes at most 500"),
            ({URI: None}, f"Environment {URI} and {EXPERIMENT} go together")):
        bad = copy.deepcopy(request)
        for name, value in environment.items():
            if value is None:
                del bad["Environment"][name]
            else:
                bad["Environment"][name] = value
        assert expected in problems_of(bad, deployment), environment
    without = dataclasses.replace(deployment, mlflow_tracking_server_arn=None)
    assert "none: this deployment has no tracking server" in problems_of(request, without)
    # Not a staging job's: its Environment names its program only.
    staging = sent_staging(deployment)
    staging["Environment"].update(request["Environment"])
    assert f"Environment ['{EXPERIMENT}', '{URI}']: the launcher sends only SAGEMAKER_PROGRAM " \
           "(for staging)" in problems_of(staging, deployment, validation.STAGING)
    validation.validate(request, deployment, validation.TRAINING)


def sent_staging(deployment):
    from maskrcnn_launcher.training import submit

    return submit.send(jobs.staging_job(deployment, shared_boto_session()), deployment,
                       dry_run=True)


@pytest.mark.parametrize("options, deployment_has_server, expected", [
    (dict(mlflow="yes"), True, "mlflow 'yes' (--mlflow/--no-mlflow, mlflow): expected True, "
                               "False or unset"),
    (dict(mlflow=True), False, "--mlflow (mlflow=True): this deployment has no MLflow tracking "
                               "server (no SSM parameter "
                               "/maskrcnn-test/mlflow-tracking-server-arn)"),
    (dict(mlflow=False, mlflow_experiment="x"), True, "--mlflow-experiment 'x' (mlflow_experiment) "
                                                      "names where the run is logged, and "
                                                      "--no-mlflow (mlflow=False) logs none"),
    (dict(mlflow_experiment="x"), False, "--mlflow-experiment 'x' (mlflow_experiment): this "
                                         "deployment has no MLflow tracking server to log to"),
    (dict(mlflow_experiment=""), True, "experiment name '': expected a non-empty string (MLflow's "
                                       "rule) (--mlflow-experiment, mlflow_experiment)"),
    (dict(mlflow_experiment="e" * 501), True, "MLflow takes at most 500"),
])
def test_a_launchs_bad_mlflow_options_are_refused_by_name(deployment, fake_aws, options,
                                                         deployment_has_server, expected):
    if not deployment_has_server:
        deployment = dataclasses.replace(deployment, mlflow_tracking_server_arn=None)
    before = len(fake_aws.requests_since(0))
    with pytest.raises(LaunchRequestError) as refused:
        jobs.training_job(deployment, LaunchOptions(data_source="s3", **options),
                          shared_boto_session())
    assert expected in str(refused.value)
    assert fake_aws.requests_since(before) == []


def test_the_launch_says_where_the_run_is_logged_and_bad_mlflow_options_exit_2(fake_aws):
    dry = cli(fake_aws, "launch", "--data-source", "s3", "--mlflow-experiment", "sweep",
              "--dry-run")
    assert dry.returncode == 0, dry.stderr
    arn = fake_aws.parameters["mlflow-tracking-server-arn"]
    assert (f"mlflow: the run is logged to experiment 'sweep' of the tracking server "
            f"maskrcnn-test-mlflow ({arn}); --no-mlflow logs none") in dry.stdout + dry.stderr
    assert json.loads(dry.stdout)["Environment"] == {
        URI: arn, EXPERIMENT: "sweep"}
    off = cli(fake_aws, "launch", "--data-source", "s3", "--no-mlflow", "--dry-run")
    assert off.returncode == 0, off.stderr
    assert "mlflow: no run logged (--no-mlflow)" in off.stdout + off.stderr
    before = len(fake_aws.requests_since(0))
    for arguments, expected in (
            (["--no-mlflow", "--mlflow-experiment", "x"], "--no-mlflow (mlflow=False) logs none"),
            (["--mlflow-experiment", ""], "experiment name '': expected a non-empty string")):
        for command in ("launch", "tune"):
            refused = cli(fake_aws, command, "--data-source", "s3", *arguments)
            assert refused.returncode == 2, (command, refused.stdout, refused.stderr)
            assert expected in refused.stderr, refused.stderr
    assert fake_aws.requests_since(before) == []


def test_a_malformed_tracking_server_arn_in_ssm_is_refused_naming_the_parameter():
    values = {name: "true" if name in settings.ssm.BOOLEANS else "x/"
              for name in settings.ssm.REQUIRED}
    values["mlflow-tracking-server-arn"] = ("arn:aws:sagemaker:eu-west-2:123456789012:"
                                            "mlflow-app/app-1")
    with pytest.raises(settings.SettingsError, match="mlflow-tracking-server-arn='arn:aws:"
                                                     "sagemaker:eu-west-2:123456789012:mlflow-app"):
        settings.from_parameters("/maskrcnn-test", values)
