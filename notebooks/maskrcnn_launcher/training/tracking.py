"""Where a launch's job logs its run: the deployment's MLflow tracking server, or nowhere.

Decided once, when the launch is planned (`plan.training_plan`): by default the deployment's
tracking server when it has one (its ARN in SSM, `mlflow-tracking-server-arn`: maskrcnn:mlflow
on); `mlflow=False` (--no-mlflow) leaves it out, `mlflow=True` (--mlflow) insists on it. The
experiment is `mlflow_experiment` (--mlflow-experiment) or the dataset's name, so that runs on
one dataset sit side by side. The request carries MLflow's own environment variables
(maskrcnn_contract.tracking), which the job reads (maskrcnn_job/training/tracking.py: its chief
logs the parameters, metric lines, evaluation report and SavedModel); a tuning job's candidates
inherit them from its definition, each a run named after its training job. `validation` checks
them again in the request as sent (`environment_problems`). docs/experiments.md.
"""

from typing import Dict, List, Mapping, Optional, Tuple

from maskrcnn_contract import tracking

from maskrcnn_launcher.deployment.settings import Deployment

TRACKING_URI_ENV, EXPERIMENT_ENV = tracking.TRACKING_URI_ENV, tracking.EXPERIMENT_ENV
ENVIRONMENT = tracking.ENVIRONMENT


def option_problems(deployment: Deployment, mlflow: object, experiment: object) -> List[str]:
    """What a launch cannot do with the MLflow options, each named with what is allowed."""
    problems = []
    if mlflow not in (None, True, False):
        problems.append(f"mlflow {mlflow!r} (--mlflow/--no-mlflow, mlflow): expected True, False "
                        "or unset (the deployment's tracking server when it has one)")
    elif mlflow is True and deployment.mlflow_tracking_server_arn is None:
        problems.append(f"--mlflow (mlflow=True): this deployment has no MLflow tracking server "
                        f"(no SSM parameter {deployment.ssm_path}/mlflow-tracking-server-arn); "
                        "deploy with -c maskrcnn:mlflow=tracking-server (docs/experiments.md)")
    if experiment is None:
        return problems
    if mlflow is False:
        problems.append(f"--mlflow-experiment {experiment!r} (mlflow_experiment) names where the "
                        "run is logged, and --no-mlflow (mlflow=False) logs none: give one or the "
                        "other")
    elif mlflow is None and deployment.mlflow_tracking_server_arn is None:
        problems.append(f"--mlflow-experiment {experiment!r} (mlflow_experiment): this deployment "
                        "has no MLflow tracking server to log to (maskrcnn:mlflow is off)")
    problems += [f"{problem} (--mlflow-experiment, mlflow_experiment)"
                 for problem in tracking.experiment_name_problems(experiment)]
    return problems


def tracking_environment(deployment: Deployment, mlflow: Optional[bool],
                         experiment: Optional[str], dataset: str
                         ) -> Tuple[Dict[str, str], Optional[str]]:
    """(the request's MLflow environment, the note that says where the run is logged: None on a
    deployment without a tracking server, where nothing was asked). Call after option_problems
    found none."""
    arn = deployment.mlflow_tracking_server_arn
    if arn is None:
        return {}, None
    if mlflow is False:
        return {}, "mlflow: no run logged (--no-mlflow)"
    name = experiment if experiment is not None else dataset
    return ({TRACKING_URI_ENV: arn, EXPERIMENT_ENV: name},
            f"mlflow: the run is logged to experiment {name!r} of the tracking server "
            f"{arn.rsplit('/', 1)[1]} ({arn}); --no-mlflow logs none")


def describe(request: Mapping) -> Optional[str]:
    """A describe_inputs line for a request that logs its run; None for one that does not."""
    environment = request.get("Environment") or {}
    if TRACKING_URI_ENV not in environment:
        return None
    return (f"mlflow:       experiment {environment.get(EXPERIMENT_ENV)!r} on "
            f"{environment[TRACKING_URI_ENV]}")


def environment_problems(environment: Mapping[str, str], deployment: Deployment) -> List[str]:
    """The MLflow variables of a training request as sent: both or neither, the deployment's own
    tracking server (the one the training role may log to and the VPC's endpoint passes), an
    experiment name MLflow takes (docs/aws-rules.md MLF-1)."""
    uri, name = environment.get(TRACKING_URI_ENV), environment.get(EXPERIMENT_ENV)
    if uri is None and name is None:
        return []
    if uri is None or name is None:
        return [f"Environment {TRACKING_URI_ENV} and {EXPERIMENT_ENV} go together: the job logs "
                "to an experiment of a tracking server"]
    arn = deployment.mlflow_tracking_server_arn
    problems = []
    if uri != arn:
        where = (f"the deployment's tracking server {arn}" if arn else
                 "none: this deployment has no tracking server (maskrcnn:mlflow off)")
        problems.append(f"Environment {TRACKING_URI_ENV} {uri!r}: the training role may log to "
                        f"{where}")
    problems += [f"Environment {EXPERIMENT_ENV}: {problem}"
                 for problem in tracking.experiment_name_problems(name)]
    return problems
