"""A hyperparameter tuning job: the launch plan of a single launch, searched over ranges.

`tuning_job` builds the CreateHyperParameterTuningJob request from the same launch as `launch`
(`jobs.training_job`, then the request the SDK would send, checked by `validation`): its channels,
image, roles, VPC, instances, run time, spot, checkpoints and distribution become the
TrainingJobDefinition, its hyperparameters the static ones, less the tuned ones. Built directly,
as the training launch is sent through its own check: SDK 3's tuner builds its definition from a
ModelTrainer and leaves our check of the exact request out (docs/tuning.md, "Why not SDK 3's
tuner").

Refused before anything is sent (LaunchRequestError, naming each value and what is allowed):
a launch that cannot go out (`plan`); an objective that is not one of the job's evaluation
figures (metrics.OBJECTIVE_METRICS) or that differs from an `objective_metric` given; a range of a
hyperparameter the job does not have, that the launcher decides (distribution, objective_metric)
or that changes the inputs (backbone), of the wrong kind for its type, with an end the job's
parser or its run length refuses, min not below max, a Logarithmic scale over values <= 0, a
ReverseLogarithmic one outside [0, 1) or on integers; a range also given as a static `--hp`; more
ranges than SageMaker takes; max jobs or parallel jobs below 1, parallel above max jobs; a tuning
job name SageMaker would reject (at most 32 characters, letters, digits and hyphens) or outside
this deployment's prefix; warm pools (documented for training jobs only). The request as built is
checked once more (`check_request`), and one of its candidates, derived as SageMaker derives it
(`candidate_request`), goes through the launch's own check (`validation.validate`).

What a candidate lacks beside a launch (docs/aws-rules.md TUN-3): TensorBoard's upload
(TrainingJobDefinition has no TensorBoardOutputConfig). Its checkpoints: the definition's one
CheckpointConfig, the launch's (the run's prefix, which is the tuning job's name), is every
candidate's, and each candidate keeps its own below its job name there
(job_io.own_checkpoints, TUN-6): a candidate restarted after a spot interruption resumes its
own, never another's weights.
"""

import copy
import dataclasses
import math
import re
import secrets
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from maskrcnn_contract import hyperparameters, job_io, metrics

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import lookup
from maskrcnn_launcher.training import init_from, inputs, plan, validation
from maskrcnn_launcher.training.options import LaunchOptions, LaunchRequestError

# HyperParameterTuningJobName (botocore's model; docs/aws-rules.md TUN-1).
MAX_NAME = lookup.MAX_TUNING_JOB_NAME
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,31}$")
STRATEGIES = ("Bayesian", "Random")  # Hyperband and Grid need settings this launcher does not make
EARLY_STOPPING = ("Auto", "Off")
AUTO, LINEAR, LOGARITHMIC, REVERSE_LOGARITHMIC = ("Auto", "Linear", "Logarithmic",
                                                  "ReverseLogarithmic")
SCALINGS = (AUTO, LINEAR, LOGARITHMIC, REVERSE_LOGARITHMIC)
INTEGER, CONTINUOUS, CATEGORICAL = "Integer", "Continuous", "Categorical"
RANGE_LISTS = {INTEGER: "IntegerParameterRanges", CONTINUOUS: "ContinuousParameterRanges",
               CATEGORICAL: "CategoricalParameterRanges"}
# ParameterRanges: at most 30 ranges of each kind and 30 values per categorical range (botocore's
# model); the developer guide counts every categorical value as one hyperparameter against 20
# in all, which this launcher holds to (TUN-2).
MAX_SEARCHED = 20
MAX_CATEGORICAL_VALUES = 30
# Not searched, and why: each is decided once for the whole tuning job.
NOT_TUNABLE = {
    "distribution": "the launcher sends the toolkit's hyperparameters of one distribution "
                    "(--distribution)",
    "objective_metric": "it is the tuning objective (--objective), which every candidate's best "
                        "checkpoint is picked by",
    "backbone": "the pretrained channel holds one backbone's checkpoint (--hp backbone=...)",
}


@dataclasses.dataclass(frozen=True)
class Range:
    """One hyperparameter searched: from `min_value` to `max_value` on `scaling` (numbers), or
    one of `values` (categorical)."""

    name: str
    min_value: Optional[str] = None
    max_value: Optional[str] = None
    scaling: str = AUTO
    values: Tuple[str, ...] = ()

    def describe(self) -> str:
        if self.values:
            return f"{self.name} in {{{', '.join(self.values)}}}"
        return f"{self.name} from {self.min_value} to {self.max_value} ({self.scaling})"


# What is worth searching for Mask R-CNN by default: the rate of one rank over a decade, log-
# scaled; the warmup; the weight decay over a decade, log-scaled.
DEFAULT_RANGES = (
    Range("base_learning_rate", "0.001", "0.01", LOGARITHMIC),
    Range("warmup_steps", "100", "1000", LINEAR),
    Range("weight_decay", "0.00001", "0.0001", LOGARITHMIC),
)


def parse_range(text: str) -> Range:
    """A range as the CLI takes it: NAME=MIN:MAX[:SCALING] or NAME=A|B|C (categorical)."""
    name, sep, spec = text.partition("=")
    if not sep or not name or not spec:
        raise LaunchRequestError(f"range {text!r} (--range): expected NAME=MIN:MAX[:SCALING] or "
                                 "NAME=A|B|C, e.g. base_learning_rate=0.001:0.01:Logarithmic")
    if "|" in spec or ":" not in spec:
        return Range(name, values=tuple(spec.split("|")))
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise LaunchRequestError(f"range {text!r} (--range): expected NAME=MIN:MAX[:SCALING]")
    return Range(name, parts[0], parts[1], parts[2] if len(parts) == 3 else AUTO)


@dataclasses.dataclass
class TuningOptions:
    """What a tuning job adds to a launch's options."""

    # The evaluation figure to optimize (metrics.OBJECTIVE_METRICS): the candidates' best
    # checkpoints are picked by it, and they are ranked by the best value (docs/tuning.md).
    objective: str = "eval/segm_AP"
    ranges: Tuple[Range, ...] = DEFAULT_RANGES
    max_jobs: int = 8
    max_parallel_jobs: int = 2
    strategy: str = "Bayesian"
    early_stopping: str = "Auto"


@dataclasses.dataclass(frozen=True)
class Tuning:
    """A tuning job ready to send: the request, checked, and what to tell the user."""

    request: dict
    plan: plan.LaunchPlan
    notes: Tuple[str, ...]


def _field_kind(field) -> str:
    if field.type is int:
        return INTEGER
    if field.type is float:
        return CONTINUOUS
    return CATEGORICAL


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(text, kind: str):
    try:
        value = int(str(text)) if kind == INTEGER else float(str(text))
    except ValueError:
        return None
    return value if kind == INTEGER or math.isfinite(value) else None


def _range_problems(item: Range, static: Mapping[str, object], run_checks: Callable) -> List[str]:
    """What SageMaker or the job would refuse of one range; `run_checks(values)` is the launch's
    own check of the hyperparameters with `values` at one end of the range."""
    known = {f.name: f for f in hyperparameters.fields()}
    where = f"range {item.describe()} (--range)"
    if item.name not in known:
        return [f"{where}: the job has no hyperparameter {item.name!r}; known: {', '.join(known)}"]
    if item.name in NOT_TUNABLE:
        return [f"{where}: {item.name} is not searched: {NOT_TUNABLE[item.name]}"]
    if item.name in static:
        return [f"{where}: {item.name}={static[item.name]!r} is also given as a static "
                "hyperparameter (--hp): give it once"]
    kind = _field_kind(known[item.name])
    if item.values:
        if kind != CATEGORICAL:
            return [f"{where}: {item.name} is a number ({kind}): expected MIN:MAX[:SCALING]"]
        if len(item.values) > MAX_CATEGORICAL_VALUES or len(set(item.values)) != len(item.values):
            return [f"{where}: expected 1 to {MAX_CATEGORICAL_VALUES} distinct values"]
        ends = list(item.values)
    else:
        if kind == CATEGORICAL:
            choices = known[item.name].metadata.get("choices") or ("true", "false")
            return [f"{where}: {item.name} is categorical: expected NAME=A|B, e.g. "
                    f"{item.name}={'|'.join(choices)}"]
        low, high = _number(item.min_value, kind), _number(item.max_value, kind)
        if low is None or high is None:
            what = "whole numbers" if kind == INTEGER else "finite numbers"
            return [f"{where}: {item.name} is {kind}: its ends must be {what}"]
        if item.scaling not in SCALINGS:
            return [f"{where}: scaling {item.scaling!r}: expected one of {', '.join(SCALINGS)}"]
        if not low < high:
            return [f"{where}: the minimum must be below the maximum"]
        if item.scaling == LOGARITHMIC and low <= 0:
            return [f"{where}: a Logarithmic scale needs values above 0 (the developer guide, "
                    "\"Define Hyperparameter Ranges\"); use Linear, or a minimum above 0"]
        if item.scaling == REVERSE_LOGARITHMIC and (kind == INTEGER or low < 0 or high >= 1):
            return [f"{where}: a ReverseLogarithmic scale takes continuous values in [0, 1) only"]
        assert item.min_value is not None and item.max_value is not None  # numbers, above
        ends = [item.min_value, item.max_value]
    problems = []
    for end in ends:
        for problem in run_checks({item.name: end}):
            problems.append(f"{where}: at {item.name}={end}: {problem}")
    return problems


def tuning_name_problems(name: str, deployment: Deployment) -> List[str]:
    """HyperParameterTuningJobName as SageMaker takes it (TUN-1), within the deployment's prefix
    (the notebook role's IAM, and the candidates' names, <name>-NNN-xxxxxxxx)."""
    problems = []
    if len(name) > MAX_NAME or not NAME_PATTERN.match(name):
        problems.append(f"tuning job name {name!r} ({len(name)} characters): SageMaker takes 1 to "
                        f"{MAX_NAME} letters, digits and hyphens, starting and ending with a "
                        "letter or digit; choose a shorter --run-name")
    if not name.startswith(deployment.job_name_prefix + "-"):
        problems.append(f"tuning job name {name!r} must start with {deployment.job_name_prefix}- "
                        "(the notebook role may only create tuning jobs with that prefix)")
    return problems


def _launch_problems(launch: LaunchOptions) -> List[str]:
    problems = []
    if launch.keep_alive_seconds:
        problems.append(f"keep-alive {launch.keep_alive_seconds} seconds (--keep-alive-seconds): "
                        "managed warm pools are documented for training jobs, not a tuning job's "
                        "candidates: leave it 0")
    return problems


def _option_problems(tuning: TuningOptions, static: Mapping[str, object]) -> List[str]:
    problems = []
    if tuning.objective not in metrics.OBJECTIVE_METRICS:
        problems.append(f"objective {tuning.objective!r} (--objective): expected one of the job's "
                        f"evaluation figures: {', '.join(metrics.OBJECTIVE_METRICS)}")
    given = static.get("objective_metric")
    if given is not None and str(given) != tuning.objective:
        problems.append(f"objective {tuning.objective!r} (--objective) and the hyperparameter "
                        f"objective_metric={given!r} differ: every candidate exports its best "
                        "checkpoint by the tuning objective; give it once, as --objective")
    for value, what in ((tuning.max_jobs, "max jobs (--max-jobs, max_jobs)"),
                        (tuning.max_parallel_jobs,
                         "max parallel jobs (--max-parallel-jobs, max_parallel_jobs)")):
        if not _whole(value) or value < 1:
            problems.append(f"{what} {value!r}: expected a whole number, 1 or more")
    if _whole(tuning.max_jobs) and _whole(tuning.max_parallel_jobs) \
            and tuning.max_parallel_jobs > tuning.max_jobs:
        problems.append(f"max parallel jobs {tuning.max_parallel_jobs} (--max-parallel-jobs) is "
                        f"above max jobs {tuning.max_jobs} (--max-jobs): at most that many run")
    if tuning.strategy not in STRATEGIES:
        problems.append(f"strategy {tuning.strategy!r} (--strategy): expected one of "
                        f"{', '.join(STRATEGIES)}")
    if tuning.early_stopping not in EARLY_STOPPING:
        problems.append(f"early stopping {tuning.early_stopping!r} (--early-stopping): expected "
                        f"one of {', '.join(EARLY_STOPPING)}")
    if not tuning.ranges:
        problems.append("no ranges (--range): a tuning job searches at least one hyperparameter")
    names = [item.name for item in tuning.ranges]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        problems.append(f"ranges given twice: {', '.join(twice)}")
    searched = sum(len(item.values) or 1 for item in tuning.ranges)
    if searched > MAX_SEARCHED:
        problems.append(f"{searched} hyperparameters searched (each categorical value counts): "
                        f"SageMaker searches at most {MAX_SEARCHED}")
    return problems


def _run_checks(launch: LaunchOptions, launch_plan: plan.LaunchPlan, info: dict) -> Callable:
    """The launch's check of its hyperparameters (the job's parser, the distribution's rules, the
    run's length against the staged dataset), for the plan's with `values` put in."""
    replicas = plan.step_replicas(launch_plan.distribution, launch, launch_plan.ranks_per_host)
    channels = {channel.name for channel in launch_plan.channels}

    def check(values: Mapping[str, object]) -> List[str]:
        raw = {**hyperparameters.decode(launch_plan.sent_hyperparameters), **values}
        try:
            parsed = hyperparameters.parse(raw)
            hyperparameters.check_distribution(parsed)
            hyperparameters.check_pretrained_channel(parsed, job_io.PRETRAINED_CHANNEL in channels,
                                                     job_io.INIT_CHANNEL in channels)
            plan.run_length_notes(parsed, info, replicas)
        except (hyperparameters.HyperparameterError, LaunchRequestError) as error:
            return [str(error).replace("invalid launch:\n  - ", "").replace("\n  - ", "; ")]
        return []

    return check


def _definition(sent: dict, tuned: Sequence[str], objective: Dict[str, str]) -> dict:
    """TrainingJobDefinition from the CreateTrainingJob request a launch would send: its fields
    as they are (spot and CheckpointConfig included: each candidate keeps its checkpoints below
    its name there, TUN-6), but the name (SageMaker names each candidate), the tuned
    hyperparameters (the ranges) and TensorBoardOutputConfig (no such field)."""
    definition = {key: copy.deepcopy(value) for key, value in sent.items()
                  if key not in ("TrainingJobName", "HyperParameters", "TensorBoardOutputConfig")}
    unknown = sorted(set(definition) - set(DEFINITION_FIELDS))
    if unknown:  # a field of the launch's the definition would not carry: never dropped quietly
        raise LaunchRequestError(f"the launch's request has {unknown}, which a tuning job's "
                                 "TrainingJobDefinition cannot carry")
    algorithm = definition["AlgorithmSpecification"]
    definition["AlgorithmSpecification"] = {
        key: algorithm[key] for key in ("TrainingImage", "TrainingInputMode", "MetricDefinitions")
        if key in algorithm}
    definition["StaticHyperParameters"] = {key: value
                                           for key, value in sent["HyperParameters"].items()
                                           if key not in tuned}
    definition["TuningObjective"] = objective
    return definition


# The fields of HyperParameterTrainingJobDefinition a launch's request can fill (botocore 1.44's
# model; the tests hold this list to it).
DEFINITION_FIELDS = ("AlgorithmSpecification", "RoleArn", "InputDataConfig", "VpcConfig",
                     "OutputDataConfig", "ResourceConfig", "StoppingCondition",
                     "EnableNetworkIsolation", "EnableInterContainerTrafficEncryption",
                     "EnableManagedSpotTraining", "CheckpointConfig", "RetryStrategy",
                     "Environment")


def _parameter_ranges(ranges: Sequence[Range]) -> dict:
    known = {f.name: f for f in hyperparameters.fields()}
    out: Dict[str, list] = {}
    for item in ranges:
        kind = _field_kind(known[item.name])
        if kind == CATEGORICAL:
            out.setdefault(RANGE_LISTS[kind], []).append({"Name": item.name,
                                                          "Values": list(item.values)})
        else:
            out.setdefault(RANGE_LISTS[kind], []).append({
                "Name": item.name, "MinValue": str(item.min_value),
                "MaxValue": str(item.max_value), "ScalingType": item.scaling})
    return out


def objective_of(figure: str) -> Dict[str, str]:
    """The tuning objective for an evaluation figure: SageMaker ranks each candidate by the last
    value of the objective's metric line (TUN-4), and a candidate exports its best checkpoint,
    so the line is the best value so far (metrics.BEST_OBJECTIVE), better as the figure is."""
    return {"MetricName": metrics.BEST_OBJECTIVE, "Type": metrics.objective_direction(figure)}


def tuning_job(deployment: Deployment, launch: LaunchOptions, tuning: TuningOptions,
               boto_session, echo: Callable[[str], None] = print) -> Tuning:
    """The tuning job of `launch` searched over `tuning.ranges`; raises LaunchRequestError naming
    every value that cannot go out (the module docstring lists them)."""
    from maskrcnn_launcher.training import jobs, submit  # the SDK: only to build the launch

    static = dict(launch.hyperparameters) if isinstance(launch.hyperparameters, dict) else {}
    problems = _launch_problems(launch) + _option_problems(tuning, static)
    if problems:
        raise LaunchRequestError("invalid tuning job:\n  - " + "\n  - ".join(problems))
    figure_launch = dataclasses.replace(
        launch, hyperparameters={**static, "objective_metric": tuning.objective})
    built = jobs.training_job(deployment, figure_launch, boto_session, echo=lambda line: None)
    assert built.plan is not None  # a training launch has its plan
    name = built.plan.base_job_name
    problems = tuning_name_problems(name, deployment)
    info = inputs.dataset_info(boto_session.client("s3"), deployment, launch.dataset)
    check = _run_checks(launch, built.plan, info)
    for item in tuning.ranges:
        problems += _range_problems(item, static, check)
    if problems:
        raise LaunchRequestError("invalid tuning job:\n  - " + "\n  - ".join(problems))
    sent = submit.send(built, deployment, dry_run=True)
    objective = objective_of(tuning.objective)
    request = {
        "HyperParameterTuningJobName": name,
        "HyperParameterTuningJobConfig": {
            "Strategy": tuning.strategy,
            "HyperParameterTuningJobObjective": objective,
            "ResourceLimits": {"MaxNumberOfTrainingJobs": tuning.max_jobs,
                               "MaxParallelTrainingJobs": tuning.max_parallel_jobs},
            "ParameterRanges": _parameter_ranges(tuning.ranges),
            "TrainingJobEarlyStoppingType": tuning.early_stopping,
        },
        "TrainingJobDefinition": _definition(sent, [r.name for r in tuning.ranges], objective),
    }
    check_request(request, deployment)
    resources, stopping = sent["ResourceConfig"], sent["StoppingCondition"]
    hours = stopping["MaxRuntimeInSeconds"] / 3600
    # Where a candidate keeps its checkpoints, by the rule the job follows (TUN-6), for a
    # placeholder of the number and suffix SageMaker names it with.
    own = init_from.job_checkpoints({**candidate_request(request, ends(request)),
                                     "TrainingJobName": f"{name}-NNN-xxxxxxxx"})
    notes = list(built.plan.notes) + [
        f"tuning job {name}: {tuning.strategy} search of "
        + "; ".join(item.describe() for item in tuning.ranges),
        f"objective: {tuning.objective} ({objective['Type']}), ranked by "
        f"{objective['MetricName']}, the best checkpoint's value; early stopping "
        f"{tuning.early_stopping}",
        f"at most {tuning.max_jobs} jobs, {tuning.max_parallel_jobs} at a time, each "
        f"{resources['InstanceCount']} x {resources['InstanceType']} for up to {hours:g} h: at "
        f"most {tuning.max_jobs * resources['InstanceCount'] * hours:g} instance-hours"
        + (f"; managed spot, each waiting at most {stopping['MaxWaitTimeInSeconds'] / 3600:g} h "
           "for capacity and its run" if sent.get("EnableManagedSpotTraining") else ""),
        f"each candidate keeps its checkpoints below its training job's name, {own}, and resumes "
        "only those after an interruption; candidates upload no TensorBoard summaries "
        "(docs/tuning.md)",
    ]
    for note in notes:
        echo(note)
    return Tuning(request, built.plan, tuple(notes))


def candidate_request(request: Mapping, values: Mapping[str, str], number: int = 1,
                      suffix: Optional[str] = None) -> dict:
    """One candidate's CreateTrainingJob request as SageMaker derives it from a tuning request
    (TUN-3): named <tuning job>-<NNN>-<8 hex digits>, the definition's fields as they are, its
    HyperParameters the static ones, the candidate's `values` (strings) and
    _tuning_objective_metric, the objective's metric name."""
    definition = request["TrainingJobDefinition"]
    objective = request["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]
    name = (f"{request['HyperParameterTuningJobName']}-{number:03d}-"
            f"{suffix or secrets.token_hex(4)}")
    candidate = {"TrainingJobName": name,
                 "HyperParameters": {**definition.get("StaticHyperParameters", {}),
                                     **{key: str(value) for key, value in values.items()},
                                     validation.TUNING_OBJECTIVE: objective["MetricName"]}}
    candidate.update({key: copy.deepcopy(definition[key]) for key in DEFINITION_FIELDS
                      if key in definition})
    return candidate


def ends(request: Mapping, which: str = "min") -> Dict[str, str]:
    """Values at one end of every range of `request` (categorical: the first or last value)."""
    ranges = request["HyperParameterTuningJobConfig"]["ParameterRanges"]
    values = {}
    for kind, key in RANGE_LISTS.items():
        for item in ranges.get(key, []):
            if kind == CATEGORICAL:
                values[item["Name"]] = item["Values"][0 if which == "min" else -1]
            else:
                values[item["Name"]] = item["MinValue" if which == "min" else "MaxValue"]
    return values


def _checkpoint_problems(request: Mapping, deployment: Deployment) -> List[str]:
    """The definition's CheckpointConfig is a launch's of the tuning job's run: S3Uri the run's
    checkpoint prefix (below which each candidate keeps its own, TUN-6), LocalPath where the job
    writes them."""
    name = request["HyperParameterTuningJobName"]
    expected = {"S3Uri": deployment.checkpoint_s3_uri(name),
                "LocalPath": job_io.CHECKPOINT_LOCAL_PATH}
    given = request["TrainingJobDefinition"].get("CheckpointConfig")
    if given != expected:
        return [f"CheckpointConfig {given}: expected {expected}, the run's checkpoint prefix, "
                "below which each candidate keeps its own checkpoints under its job name"]
    return []


def check_request(request: Mapping, deployment: Deployment) -> None:
    """Raises LaunchRequestError naming every problem of a CreateHyperParameterTuningJob request:
    its name (TUN-1), limits and objective (TUN-2, TUN-4), its checkpoints (TUN-6), and its
    definition, through a candidate at each end of the ranges checked as a launch is
    (validation.validate: spot's wait at least the run, and checkpoints to resume from)."""
    problems = tuning_name_problems(request["HyperParameterTuningJobName"], deployment)
    config = request["HyperParameterTuningJobConfig"]
    limits = config["ResourceLimits"]
    if limits["MaxParallelTrainingJobs"] > limits["MaxNumberOfTrainingJobs"]:
        problems.append(f"MaxParallelTrainingJobs {limits['MaxParallelTrainingJobs']} is above "
                        f"MaxNumberOfTrainingJobs {limits['MaxNumberOfTrainingJobs']}")
    definition = request["TrainingJobDefinition"]
    objective = config["HyperParameterTuningJobObjective"]
    defined = [d["Name"] for d in definition["AlgorithmSpecification"].get("MetricDefinitions", [])]
    if objective["MetricName"] not in defined:
        problems.append(f"objective {objective['MetricName']!r} is not one of the definition's "
                        "MetricDefinitions: SageMaker reads the objective with one of them")
    for key in RANGE_LISTS.values():
        for item in config["ParameterRanges"].get(key, []):
            if item["Name"] in definition.get("StaticHyperParameters", {}):
                problems.append(f"{item['Name']} is both searched and static")
            if item.get("ScalingType") == LOGARITHMIC and float(item["MinValue"]) <= 0:
                problems.append(f"{item['Name']}: Logarithmic scaling needs MinValue above 0")
    problems += _checkpoint_problems(request, deployment)
    for which in ("min", "max"):
        try:
            validation.validate(candidate_request(request, ends(request, which), suffix="0" * 8),
                                deployment, validation.TUNING_CANDIDATE)
        except LaunchRequestError as error:
            problems.append(f"a candidate at the {which}imum of every range: {error}")
    if problems:
        raise LaunchRequestError("invalid tuning job request:\n  - " + "\n  - ".join(problems))


def send(tuning: Tuning, deployment: Deployment, sagemaker_client, dry_run: bool = False) -> dict:
    """Creates the tuning job (or, with `dry_run`, only checks it again); returns the request."""
    check_request(tuning.request, deployment)
    if not dry_run:
        sagemaker_client.create_hyper_parameter_tuning_job(**tuning.request)
    return tuning.request
