"""The one check of a launch: the CreateTrainingJob request as the SDK sends it, against this
deployment's policy and the rules SageMaker does not report clearly itself.

Checked: the job name prefix, the role and the VPC that the notebook role's IAM conditions allow (a
mismatch would come back as a bare AccessDenied); the instance count, volume size and run time that
the SDK leaves out when they are 0 (SageMaker's defaults would replace them) and a spot wait shorter
than the run; the input mode (File or FastFile, File for a file system's channel), a warm pool's
keep-alive (within SageMaker's limit, not with spot) and, for training, where TensorBoard's
summaries go (the contract's local path, the deployment's output prefix); no volume key on instance
types with local storage (SageMaker rejects it; docs/aws-rules.md); the training job's channels
(`train` required and read-only, `pretrained` optional, `init` optional and below the checkpoint
prefix, FSx paths starting with the mount name); the
job's hyperparameters (with the job's own parser) and the distribution: the toolkit's
hyperparameters that start it (the MPI runner for horovod, the TF_CONFIG flag for
multi_worker_mirrored, none for parameter_server), and no other hyperparameter named like
SageMaker's or its toolkit's; parameter servers on 2 or more instances, and what each distribution
allows of the other hyperparameters. Limits that SageMaker reports clearly by itself (name lengths,
id formats) are left to SageMaker.

What leaves no trace in the request (a distribution given twice with two values, the Horovod-only
settings with another one, a launch option the SDK would drop, a toolkit hyperparameter of the
user's that the launcher's would replace) is refused earlier, when the launch is planned
(`plan.py`), with the messages of `toolkit_hyperparameter_problems` for the hyperparameters.
"""

import os
from typing import List, Mapping, Optional

from maskrcnn_contract import hyperparameters, job_io

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.training import tracking
from maskrcnn_launcher.training.options import (
    DEFAULT_DISTRIBUTION,
    FILE,
    HOROVOD,
    INPUT_MODES,
    MAX_KEEP_ALIVE_SECONDS,
    MAX_RUN_SECONDS,
    MWMS,
    PARAMETER_SERVER,
    LaunchRequestError,
)

TRAINING, STAGING = "training", "staging"
# A tuning job's candidate, as SageMaker derives it from the definition (training/tuning.py): a
# training job without TensorBoardOutputConfig, whose hyperparameters carry the objective's name.
TUNING_CANDIDATE = "tuning candidate"
TUNING_OBJECTIVE = job_io.TUNING_OBJECTIVE_METRIC

# The toolkit's MPI settings share a prefix: any of them, sent or not, is the MPI runner's.
_MPI_PREFIX = os.path.commonprefix(
    [job_io.MPI_ENABLED, job_io.MPI_PROCESSES_PER_HOST, job_io.MPI_CUSTOM_OPTIONS])

# The toolkit's hyperparameters that choose how it starts the program on each host
# (sagemaker-training params.py, sagemaker_tensorflow_container/training.py; docs/aws-rules.md
# SM-13), by prefix, and what each one starts. A request carries exactly those of its
# distribution (job_io.distribution_hyperparameters).
_RUNNERS = {
    _MPI_PREFIX: "the toolkit's MPI runner (mpirun, one rank per GPU: distribution=horovod)",
    job_io.MWMS_TOOLKIT_FLAG: "the toolkit's TF_CONFIG for MultiWorkerMirroredStrategy "
                              "(distribution=multi_worker_mirrored)",
    job_io.PARAMETER_SERVER_TOOLKIT_FLAG: (
        "the toolkit's TF1 parameter-server cluster: a `master` task that TF2's "
        "ParameterServerStrategy rejects, and PS servers of its own on port 2223 of every host "
        "(distribution=parameter_server builds its own cluster and needs no toolkit flag)"),
    job_io.DATA_PARALLEL_PREFIX: "SageMaker's data-parallel library (not in this job)",
    job_io.DISTRIBUTION_INSTANCE_GROUPS: "the toolkit's choice of the hosts to distribute",
}
# Of the names SageMaker and its training toolkit own (hyperparameters.PLATFORM_PREFIXES), the
# launcher sends only those of job_io.distribution_hyperparameters, and refuses the others.
PLATFORM_PREFIXES = hyperparameters.PLATFORM_PREFIXES
# The launch option each toolkit hyperparameter the launcher sends comes from.
_SENT_FROM = {job_io.MPI_ENABLED: "distribution", job_io.MWMS_TOOLKIT_FLAG: "distribution",
              job_io.MPI_PROCESSES_PER_HOST: "--processes-per-host, processes_per_host",
              job_io.MPI_CUSTOM_OPTIONS: "mpi_options"}


def _channel_problems(channels: List[Mapping], deployment: Deployment) -> List[str]:
    problems = []
    names = [c["ChannelName"] for c in channels]
    for name in names:
        if name not in job_io.TRAINING_CHANNELS:
            problems.append(f"channel {name!r} is not read by the training job; its channels "
                            f"are {', '.join(job_io.TRAINING_CHANNELS)}")
    if job_io.TRAIN_CHANNEL not in names:
        problems.append(f"the training job needs a {job_io.TRAIN_CHANNEL!r} channel; got {names}")
    for channel in channels:
        if channel["ChannelName"] != job_io.INIT_CHANNEL:
            continue
        # An earlier run's checkpoints, which the training role reads below the checkpoint prefix
        # (and nowhere else); from S3 whatever the data source.
        uri = channel["DataSource"].get("S3DataSource", {}).get("S3Uri", "")
        if not uri.startswith(deployment.checkpoints_s3_uri):
            problems.append(f"channel {job_io.INIT_CHANNEL}: {uri or channel['DataSource']} is not "
                            f"an S3 prefix below {deployment.checkpoints_s3_uri}, where the "
                            "training role reads earlier runs' checkpoints")
    for channel in channels:
        source = channel["DataSource"].get("FileSystemDataSource")
        if source is None:
            continue
        name, path = channel["ChannelName"], source.get("DirectoryPath", "")
        if source.get("FileSystemAccessMode") != "ro":
            problems.append(f"channel {name}: access mode {source.get('FileSystemAccessMode')!r}; "
                            "the inputs are shared by every job and must be mounted read-only "
                            "('ro')")
        if source.get("FileSystemType") == "FSxLustre":
            # CreateTrainingJob FileSystemDataSource: an FSx for Lustre DirectoryPath starts with
            # the file system's mount name.
            mount = deployment.fsx_mount_name or ""
            if not path.startswith(f"/{mount}/") or not mount:
                problems.append(
                    f"channel {name}: FSx directory path {path!r} must start with the file "
                    f"system's mount name, /{mount}/ (SSM {deployment.ssm_path}/fsx-mount-name "
                    f"and fsx-data-path)")
    return problems


def _input_mode_problems(request: Mapping) -> List[str]:
    """How SageMaker hands each channel to the job (docs/aws-rules.md TRN-1): File or FastFile,
    the job's mode unless a channel sets its own; FastFile streams S3 objects, so an EFS or FSx
    channel, which SageMaker mounts, is read in File mode."""
    problems = []
    job_mode = request.get("AlgorithmSpecification", {}).get("TrainingInputMode")
    if job_mode not in INPUT_MODES:
        problems.append(f"AlgorithmSpecification TrainingInputMode {job_mode!r}: expected "
                        f"{' or '.join(INPUT_MODES)} (the job reads its channels as files)")
    for channel in request.get("InputDataConfig", []):
        mode = channel.get("InputMode") or job_mode
        name = channel["ChannelName"]
        if channel.get("InputMode") not in (None, *INPUT_MODES):
            problems.append(f"channel {name}: InputMode {channel['InputMode']!r}: expected "
                            f"{' or '.join(INPUT_MODES)}")
        elif "FileSystemDataSource" in channel["DataSource"] and mode != FILE:
            problems.append(f"channel {name}: a file-system channel is mounted, and {mode} mode "
                            f"streams S3 objects: the request must send {FILE}")
    return problems


def _tensorboard_problems(request: Mapping, deployment: Deployment) -> List[str]:
    """A training job's summaries go where TensorBoard reads them while it runs (TRN-2): from the
    contract's LocalPath, which the job writes, to the deployment's output prefix, which the
    training role may write and the notebook role read."""
    config = request.get("TensorBoardOutputConfig")
    expected = f"{deployment.output_s3_uri}{job_io.TENSORBOARD_FOLDER}"
    if not config:
        return [f"TensorBoardOutputConfig is missing: the job's summaries in "
                f"{job_io.TENSORBOARD_LOCAL_PATH} would not reach {expected} while it runs"]
    problems = []
    if config.get("LocalPath") != job_io.TENSORBOARD_LOCAL_PATH:
        problems.append(f"TensorBoardOutputConfig LocalPath {config.get('LocalPath')!r}: the job "
                        f"writes its summaries to {job_io.TENSORBOARD_LOCAL_PATH}")
    if not str(config.get("S3OutputPath", "")).startswith(expected):
        problems.append(f"TensorBoardOutputConfig S3OutputPath {config.get('S3OutputPath')!r}: "
                        f"expected below {expected} (the training role writes, the notebook role "
                        "reads the output prefix only)")
    return problems


def _warm_pool_problems(request: Mapping) -> List[str]:
    """ResourceConfig KeepAlivePeriodInSeconds: 0 to MAX_KEEP_ALIVE_SECONDS, not with managed
    spot training (TRN-3)."""
    keep = request.get("ResourceConfig", {}).get("KeepAlivePeriodInSeconds")
    if keep is None:
        return []
    if (isinstance(keep, bool) or not isinstance(keep, int)
            or not 0 <= keep <= MAX_KEEP_ALIVE_SECONDS):
        return [f"ResourceConfig KeepAlivePeriodInSeconds {keep!r}: expected 0 to "
                f"{MAX_KEEP_ALIVE_SECONDS}"]
    if keep and request.get("EnableManagedSpotTraining"):
        return [f"ResourceConfig KeepAlivePeriodInSeconds {keep}: managed warm pools cannot be "
                "used with spot instances (EnableManagedSpotTraining)"]
    return []


def _toolkit_problem(key: str, value, distribution: Optional[str], expected: Mapping,
                     from_user: bool) -> str:
    if key == job_io.PROGRAM:
        return (f"hyperparameter {job_io.PROGRAM}={value!r}: the training image's ENV "
                f"{job_io.PROGRAM_ENV} wins over it, so it would be ignored (docs/aws-rules.md "
                "SM-14); the launcher chooses the program through the request's Environment")
    remove = ("remove it (the launcher sends the toolkit's hyperparameters that each distribution "
              "needs)")
    if from_user and key in expected:
        return (f"hyperparameter {key}={value!r} is the launcher's to send for "
                f"distribution={distribution} (from {_SENT_FROM.get(key, 'distribution')}): "
                "remove it")
    prefix = next((p for p in _RUNNERS if key.startswith(p)), None)
    if prefix is not None and distribution is None:
        return (f"hyperparameter {key}={value!r} is for {_RUNNERS[prefix]}, not a staging job: "
                "remove it")
    if prefix is not None:
        what = (f"is not one the launcher sends for distribution={distribution}"
                if any(k.startswith(prefix) for k in expected) else
                f"is for {_RUNNERS[prefix]}, and this job's distribution is {distribution}")
        return f"hyperparameter {key}={value!r} {what}: {remove}"
    return (f"hyperparameter {key}={value!r}: SageMaker's or its training toolkit's (names "
            f"starting {' or '.join(PLATFORM_PREFIXES)}), and not one the launcher sends: it "
            f"would change how the toolkit runs the job, unchecked; {remove}")


def toolkit_hyperparameter_problems(hps: Mapping, distribution: Optional[str],
                                    expected: Mapping, from_user: bool = False) -> List[str]:
    """Every hyperparameter named like SageMaker's or its training toolkit's (PLATFORM_PREFIXES)
    that the launcher does not send: `expected` are those it sends for `distribution`
    (job_io.distribution_hyperparameters; none for a staging job, whose distribution is None).
    `from_user`: `hps` are the user's, and the launcher's own would replace any of them."""
    return [_toolkit_problem(key, hps[key], distribution, expected, from_user)
            for key in sorted(hps) if key.startswith(PLATFORM_PREFIXES)
            and (from_user or key not in expected)]


def _resource_problems(request: Mapping) -> List[str]:
    """What the SDK leaves out of the request when it is 0 (SageMaker's default would replace
    it) or sends as it is (a negative run time), and a spot wait shorter than the run."""
    problems = []
    resources = request.get("ResourceConfig", {})
    for key in ("InstanceCount", "VolumeSizeInGB"):
        value = resources.get(key)
        if value is None:
            problems.append(f"ResourceConfig {key} is missing: expected 1 or more (the SDK leaves "
                            "out a 0, and SageMaker's default would replace it)")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"ResourceConfig {key} {value!r}: expected 1 or more")
    stopping = request.get("StoppingCondition", {})
    run, wait = stopping.get("MaxRuntimeInSeconds"), stopping.get("MaxWaitTimeInSeconds")
    limit = f"expected 1 to {MAX_RUN_SECONDS} (28 days)"
    if run is None:
        problems.append(f"StoppingCondition MaxRuntimeInSeconds is missing: {limit} (the SDK "
                        "leaves out a 0, and SageMaker's default, 1 day, would replace it)")
    elif isinstance(run, bool) or not isinstance(run, int) or not 1 <= run <= MAX_RUN_SECONDS:
        problems.append(f"StoppingCondition MaxRuntimeInSeconds {run!r}: {limit}")
        run = None
    if not request.get("EnableManagedSpotTraining"):
        if wait is not None:
            problems.append(f"StoppingCondition MaxWaitTimeInSeconds {wait!r} limits a managed "
                            "spot job, and this one is on demand")
    elif wait is None or isinstance(wait, bool) or not isinstance(wait, int) or wait < (run or 1):
        problems.append(f"StoppingCondition MaxWaitTimeInSeconds {wait!r}: expected at least "
                        f"MaxRuntimeInSeconds ({run}): it counts the wait for spot capacity and "
                        "the run")
    return problems


def _distribution_problems(hps: Mapping[str, str], distribution: str,
                           instance_count: int) -> List[str]:
    """The toolkit's runner hyperparameters against the distribution, and what the distribution
    needs of the instances and of the other hyperparameters."""
    problems = toolkit_hyperparameter_problems(
        hps, distribution, job_io.distribution_hyperparameters(distribution, 1))
    if distribution == HOROVOD:
        ranks = hps.get(job_io.MPI_PROCESSES_PER_HOST, "")
        if hps.get(job_io.MPI_ENABLED) != "true" or not ranks.isdigit() or int(ranks) < 1:
            problems.append(
                "distribution=horovod: the toolkit's MPI runner must be enabled "
                f"({job_io.MPI_ENABLED}=true, {job_io.MPI_PROCESSES_PER_HOST} >= 1)")
    elif distribution == MWMS and hps.get(job_io.MWMS_TOOLKIT_FLAG) != "true":
        problems.append(
            f"distribution=multi_worker_mirrored needs {job_io.MWMS_TOOLKIT_FLAG}=true: without "
            "it the toolkit writes no TF_CONFIG and the hosts do not form one cluster "
            "(docs/aws-rules.md SM-13)")
    if distribution == PARAMETER_SERVER and instance_count < 2:
        problems.append(
            f"distribution=parameter_server on {instance_count} instance: it needs 2 or more "
            "(the job refuses fewer): on one, a lost worker ends the run, and going on without "
            "it is what parameter servers are for. Use 2 or more instances, or "
            "distribution=horovod or multi_worker_mirrored on one")
    return problems


def _hyperparameter_problems(hps: Mapping[str, str], channels: List[Mapping],
                             instance_count: int) -> List[str]:
    problems = []
    decoded = hyperparameters.decode(hps)
    distribution = decoded.get("distribution", DEFAULT_DISTRIBUTION)
    try:
        parsed = hyperparameters.parse(decoded)
    except hyperparameters.HyperparameterError as error:
        problems.append(str(error))
    else:
        has_pretrained = any(c["ChannelName"] == job_io.PRETRAINED_CHANNEL for c in channels)
        has_init = any(c["ChannelName"] == job_io.INIT_CHANNEL for c in channels)
        for check in (lambda: hyperparameters.check_pretrained_channel(parsed, has_pretrained,
                                                                       has_init),
                      lambda: hyperparameters.check_distribution(parsed)):
            try:
                check()
            except hyperparameters.HyperparameterError as error:
                problems.append(str(error))
    if distribution in hyperparameters.DISTRIBUTIONS:  # else named by the parser above
        problems += _distribution_problems(hps, distribution, instance_count)
    else:
        problems += toolkit_hyperparameter_problems(hps, distribution, {})
    return problems


# The program each kind of job runs in /opt/ml/code. The image's ENV names train.py; the toolkit
# reads the environment before the `sagemaker_program` hyperparameter (docs/aws-rules.md SM-14).
PROGRAMS = {TRAINING: "train.py", TUNING_CANDIDATE: "train.py", STAGING: job_io.STAGING_PROGRAM}


def _program_problems(request: Mapping, kind: str, deployment: Deployment) -> List[str]:
    """What the toolkit will start: the image's ENV (train.py), unless the request's Environment,
    which overrides it, names another program; never the hyperparameter, which the image's ENV
    overrides (`toolkit_hyperparameter_problems` refuses it). And the Environment's MLflow
    variables of a training job (tracking.environment_problems)."""
    problems = []
    if kind == STAGING:  # a training job's are checked with its distribution's
        problems += toolkit_hyperparameter_problems(request.get("HyperParameters", {}), None, {})
    environment = request.get("Environment") or {}
    # Nothing else: the container's environment is the image's. (The staging job reads a
    # sources file from its environment in tests, which a launched job must never reach.)
    logs = kind in (TRAINING, TUNING_CANDIDATE)
    extra = sorted(set(environment) - {job_io.PROGRAM_ENV}
                   - (set(tracking.ENVIRONMENT) if logs else set()))
    if extra:
        problems.append(f"Environment {extra}: the launcher sends only {job_io.PROGRAM_ENV} "
                        f"(for staging) and MLflow's {', '.join(tracking.ENVIRONMENT)} "
                        "(for training); a job's environment is otherwise the image's")
    if logs:
        problems += tracking.environment_problems(environment, deployment)
    starts = environment.get(job_io.PROGRAM_ENV, PROGRAMS[TRAINING])
    if starts != PROGRAMS[kind]:
        problems.append(f"a {kind} job must start {PROGRAMS[kind]}, and this request starts "
                        f"{starts} (Environment {job_io.PROGRAM_ENV})")
    return problems


def _objective_problems(objective: Optional[str], request: Mapping) -> List[str]:
    """A candidate's _tuning_objective_metric names one of its MetricDefinitions (TUN-4)."""
    defined = [d["Name"] for d in request.get("AlgorithmSpecification", {})
               .get("MetricDefinitions", [])]
    if objective not in defined:
        return [f"hyperparameter {TUNING_OBJECTIVE}={objective!r}: a tuning job's candidate "
                "carries its objective, one of its MetricDefinitions"]
    return []


def validate(request: Mapping, deployment: Deployment, kind: str) -> None:
    """Raises LaunchRequestError naming every problem of a CreateTrainingJob request."""
    problems: List[str] = []
    name = request["TrainingJobName"]
    if not name.startswith(deployment.job_name_prefix + "-"):
        problems.append(f"job name {name!r} must start with {deployment.job_name_prefix}- "
                        "(the notebook role may only create jobs with that prefix)")
    role = {TRAINING: deployment.training_role_arn, TUNING_CANDIDATE: deployment.training_role_arn,
            STAGING: deployment.staging_role_arn}[kind]
    if request["RoleArn"] != role:
        problems.append(f"role {request['RoleArn']!r} is not the deployment's {kind} role {role} "
                        "(the notebook role may pass only the deployment's job roles)")
    resources = request.get("ResourceConfig", {})
    problems += _resource_problems(request)
    if resources.get("VolumeKmsKeyId") and instances.has_local_storage(resources["InstanceType"]):
        problems.append(f"{resources['InstanceType']} has local NVMe storage: SageMaker rejects a "
                        "VolumeKmsKeyId for it (ResourceConfig reference); the hardware "
                        "encrypts it")
    vpc = request.get("VpcConfig") or {}
    if (list(vpc.get("Subnets", [])) != list(deployment.subnet_ids)
            or list(vpc.get("SecurityGroupIds", [])) != list(deployment.security_group_ids)):
        problems.append(f"VPC config {vpc} differs from the deployment's subnet-ids and "
                        "security-group-ids (the notebook role may only create jobs inside those)")
    problems += _program_problems(request, kind, deployment)
    problems += _input_mode_problems(request)
    problems += _warm_pool_problems(request)
    if kind in (TRAINING, TUNING_CANDIDATE):
        channels = request.get("InputDataConfig", [])
        hps = dict(request.get("HyperParameters", {}))
        problems += _channel_problems(channels, deployment)
        if kind == TRAINING:
            problems += _tensorboard_problems(request, deployment)
        else:
            problems += _objective_problems(hps.pop(TUNING_OBJECTIVE, None), request)
        problems += _hyperparameter_problems(hps, channels, resources.get("InstanceCount", 1))
        if request.get("EnableManagedSpotTraining") and "CheckpointConfig" not in request:
            problems.append("managed spot without checkpoints would restart from step 0")
    if problems:
        raise LaunchRequestError(f"invalid {kind} job request:\n  - " + "\n  - ".join(problems))
