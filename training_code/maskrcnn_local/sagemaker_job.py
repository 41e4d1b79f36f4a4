"""Play a CreateTrainingJob request on emulated hosts, as SageMaker starts its containers (root).

    played = sagemaker_job.play(request, work_dir, Inputs(s3=s3_client, file_systems={...}))

`request` is what the launcher sends (`maskrcnn_launcher.training.submit.send(launch, deployment,
dry_run=True)` returns it); `Inputs` says where its inputs are on this machine. What SageMaker
does with it ("How Amazon SageMaker AI Provides Training Information": docs/aws-rules.md SM-17),
and here:
- hosts: `ResourceConfig.InstanceCount` hosts algo-1..N of `InstanceType`, emulated
  (emulated_hosts.Cluster, which writes each host's resourceconfig.json);
- hyperparameters.json: the request's `HyperParameters` as they are (strings: the API takes no
  other type, and one that is not is refused here);
- inputdataconfig.json: an entry per channel (its input mode, and an S3 channel's distribution);
- the channels, at /opt/ml/input/data/<channel>: an `S3Prefix` channel's objects downloaded before
  the start (File mode does that; FastFile streams them as they are read, at the same paths),
  each at its key's path below the prefix (no object is SageMaker's refusal, SM-12); a
  file-system channel's `DirectoryPath` mounted read-only (an FSx for Lustre path starts with
  /<mount name>/, FSX-4; a directory that does not exist fails the job, SM-12);
- the container's environment, each layer over the ones before it
  (emulated_hosts.Cluster.container_environment): the DLC's, the image's ENV
  (training_code/Dockerfile), TRAINING_JOB_NAME, `environment` (this machine's: a CPU's settings,
  stand-ins for AWS's endpoints and credentials), then the request's `Environment`;
- then the DLC's entry point, the real training toolkit, decides what runs on every host.
After a successful run, what SageMaker uploads: every host's /opt/ml/model aggregated into one
model.tar.gz, which fails here (ModelClash) when two hosts wrote the same name (SM-10), put at
<S3OutputPath><job name>/output/model.tar.gz with `upload_model`.
Not emulated (refused): Pipe input, manifest channels, ShardedByS3Key, a read-write
file system, a checkpoint path other than /opt/ml/checkpoints. Not emulated (left out): the
upload of /opt/ml/output/data, the TensorBoard output's and the checkpoints' sync with S3 (they
stay in each host's /opt/ml, as `keep_checkpoints` leaves the checkpoints for the next run), spot
interruptions.
"""

import dataclasses
import os
import shutil
import sys
import tarfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

from maskrcnn_contract import s3_objects

from maskrcnn_local import emulated_hosts

CODE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(CODE_DIR)
IMAGE_PYTHON = os.path.join(REPO, ".venv-image", "bin", "python")
CHECKPOINT_PATH = "/opt/ml/checkpoints"  # where the emulated hosts keep checkpoints
MODEL_ARCHIVE = "model.tar.gz"


class RequestError(ValueError):
    """The request asks for what SageMaker would refuse or this emulation does not do."""


class ModelClash(RuntimeError):
    """Two hosts wrote the same name under /opt/ml/model: SageMaker's aggregate would hold one."""


@dataclasses.dataclass(frozen=True)
class FileSystem:
    """A local directory standing for an EFS or FSx file system's root."""

    root: str
    mount_name: Optional[str] = None  # FSx for Lustre: DirectoryPath starts with /<mount name>/


@dataclasses.dataclass
class Inputs:
    """Where the request's channels are on this machine."""

    s3: Any = None  # a boto3 S3 client that reads the request's S3 channels (File mode: copied)
    file_systems: Dict[str, FileSystem] = dataclasses.field(default_factory=dict)  # by id


@dataclasses.dataclass
class Played:
    request: dict
    job: emulated_hosts.JobResult
    model_dir: Optional[str] = None      # every host's /opt/ml/model, aggregated
    model_archive: Optional[str] = None  # model_dir as SageMaker packs it
    model_s3_uri: Optional[str] = None   # where it was uploaded (upload_model)

    @property
    def succeeded(self) -> bool:
        return self.job.succeeded


def hyperparameters_json(request: dict) -> Dict[str, str]:
    """hyperparameters.json: the request's HyperParameters, which CreateTrainingJob takes as a
    map of strings to strings."""
    hyperparameters = request.get("HyperParameters") or {}
    wrong = {k: v for k, v in hyperparameters.items() if not isinstance(v, str)}
    if wrong:
        raise RequestError(f"HyperParameters must be strings; not: {wrong}")
    return dict(hyperparameters)


def _input_mode(request: dict, channel: dict) -> str:
    """The channel's input mode, else the job's. File and FastFile both present the channel's
    files at /opt/ml/input/data/<channel> (FastFile streams an S3 channel as it is read, File
    copies it first): both are emulated with a copy. Pipe (a FIFO per epoch) is not."""
    mode = channel.get("InputMode") or request["AlgorithmSpecification"]["TrainingInputMode"]
    if mode not in ("File", "FastFile"):
        raise RequestError(f"channel {channel['ChannelName']}: input mode {mode}; only File and "
                           "FastFile are emulated")
    if mode == "FastFile" and "S3DataSource" not in channel["DataSource"]:
        raise RequestError(f"channel {channel['ChannelName']}: FastFile mode streams S3 data; "
                           "this channel is not in S3")
    return mode


def _bucket_and_key(s3_uri: str) -> Tuple[str, str]:
    """'s3://bucket/a/b' -> ('bucket', 'a/b'): the key or key prefix as written."""
    s3_objects.split_s3_uri(s3_uri)  # raises for what is not an s3:// URI
    bucket, _, key = s3_uri[len("s3://"):].partition("/")
    return bucket, key


def _s3_relative(prefix: str, key: str) -> str:
    """A key's path below an S3Prefix channel's prefix (its folder part: what follows the
    prefix's last '/')."""
    return key[len(prefix[:prefix.rfind("/") + 1]):]


def _download_s3_channel(name: str, source: dict, s3, destination: str) -> None:
    if source.get("S3DataType") != "S3Prefix":
        raise RequestError(f"channel {name}: S3DataType {source.get('S3DataType')}; only S3Prefix "
                           "is emulated")
    if source.get("S3DataDistributionType", "FullyReplicated") != "FullyReplicated":
        raise RequestError(f"channel {name}: {source['S3DataDistributionType']}; only "
                           "FullyReplicated is emulated")
    if s3 is None:
        raise RequestError(f"channel {name} is in S3 ({source['S3Uri']}): no S3 client given")
    bucket, prefix = _bucket_and_key(source["S3Uri"])
    keys = [item["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix) for item in page.get("Contents", [])
        if not item["Key"].endswith("/")]
    if not keys:
        raise RequestError(f"channel {name}: No S3 objects found under S3 URL "
                           f"\"{source['S3Uri']}\" (CreateTrainingJob refuses it: SM-12)")
    shutil.rmtree(destination, ignore_errors=True)
    for key in keys:
        path = os.path.join(destination, _s3_relative(prefix, key))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s3.download_file(bucket, key, path)


def _file_system_directory(name: str, source: dict, inputs: Inputs) -> str:
    system_id, path = source["FileSystemId"], source["DirectoryPath"]
    if source.get("FileSystemAccessMode") != "ro":
        raise RequestError(f"channel {name}: access mode {source.get('FileSystemAccessMode')!r}; "
                           "only read-only file-system channels are emulated")
    if system_id not in inputs.file_systems:
        raise RequestError(f"channel {name}: no local directory stands for file system "
                           f"{system_id} (Inputs.file_systems)")
    system = inputs.file_systems[system_id]
    below = path
    if source["FileSystemType"] == "FSxLustre":
        mount = f"/{system.mount_name}/"
        if not path.startswith(mount):
            raise RequestError(f"channel {name}: FSx for Lustre DirectoryPath {path} does not "
                               f"start with the file system's mount name, {mount} (FSX-4)")
        below = path[len(mount):]
    directory = os.path.join(system.root, below.strip("/"))
    if not os.path.isdir(directory):
        raise RequestError(f"channel {name}: {source['FileSystemType']} {system_id}:{path} "
                           f"({directory} here) does not exist: the job would fail once its "
                           "instances are up (SM-12)")
    return directory


def materialize_channels(request: dict, work_dir: str, inputs: Inputs
                         ) -> Tuple[Dict[str, str], Dict[str, dict]]:
    """({channel: the local directory mounted at /opt/ml/input/data/<channel>},
    {channel: its inputdataconfig.json entry}); S3 channels are downloaded under
    <work_dir>/channels/."""
    directories, configs = {}, {}
    for channel in request.get("InputDataConfig") or []:
        name, source = channel["ChannelName"], channel["DataSource"]
        config = {"TrainingInputMode": _input_mode(request, channel),
                  "RecordWrapperType": channel.get("RecordWrapperType", "None")}
        if channel.get("ContentType"):
            config["ContentType"] = channel["ContentType"]
        if "S3DataSource" in source:
            s3_source = source["S3DataSource"]
            directory = os.path.join(work_dir, "channels", name)
            _download_s3_channel(name, s3_source, inputs.s3, directory)
            config["S3DistributionType"] = s3_source.get("S3DataDistributionType",
                                                         "FullyReplicated")
        elif "FileSystemDataSource" in source:
            directory = _file_system_directory(name, source["FileSystemDataSource"], inputs)
        else:
            raise RequestError(f"channel {name}: data source {sorted(source)} is not emulated")
        directories[name], configs[name] = os.path.abspath(directory), config
    return directories, configs


def _entries(directory: str) -> List[str]:
    """Every file and directory below `directory`, as relative paths."""
    found = []
    for folder, dirs, files in os.walk(directory):
        found += [os.path.relpath(os.path.join(folder, n), directory) for n in dirs + files]
    return found


def merge_model_dirs(model_dirs: Dict[str, str], destination: str) -> str:
    """Every host's model directory ({host: directory}) copied into `destination`, as SageMaker
    aggregates them into one model.tar.gz. Raises ModelClash naming each file or directory that
    two hosts wrote (SageMaker: "they should ensure no file/directory names clash")."""
    owners: Dict[str, List[str]] = {}
    for host, directory in model_dirs.items():
        for path in _entries(directory) if os.path.isdir(directory) else []:
            owners.setdefault(path, []).append(host)
    clashes = sorted(p for p, hosts in owners.items() if len(hosts) > 1)
    outermost = [p for p in clashes if not any(p.startswith(q + os.sep) for q in clashes)]
    if outermost:
        raise ModelClash("/opt/ml/model: " + "; ".join(
            f"{path} written on {', '.join(owners[path])}" for path in outermost)
            + " (SageMaker aggregates every host's /opt/ml/model into one model.tar.gz, and "
            "names must not clash: export from one host only)")
    shutil.rmtree(destination, ignore_errors=True)
    os.makedirs(destination)
    for directory in model_dirs.values():
        if os.path.isdir(directory):
            shutil.copytree(directory, destination, symlinks=True, dirs_exist_ok=True)
    return destination


def pack_model(model_dir: str, archive: str) -> str:
    """model.tar.gz of `model_dir`'s contents (entries `1/...`, `code/...`)."""
    with tarfile.open(archive, "w:gz") as tar:
        for name in sorted(os.listdir(model_dir)):
            tar.add(os.path.join(model_dir, name), arcname=name)
    return archive


def model_s3_uri(request: dict) -> str:
    """Where SageMaker puts the job's model: <S3OutputPath><job name>/output/model.tar.gz."""
    output = request["OutputDataConfig"]["S3OutputPath"]
    return f"{output.rstrip('/')}/{request['TrainingJobName']}/output/{MODEL_ARCHIVE}"


def aws_stand_ins(endpoint_port: int, region: str) -> Dict[str, str]:
    """Environment variables that point a container's AWS SDK at a stand-in endpoint on this
    machine (forwarded to the hosts at emulated_hosts.OUTSIDE), with placeholder credentials in
    place of the job role's (SageMaker's container credentials) and the job's region."""
    return {"AWS_ENDPOINT_URL": f"http://{emulated_hosts.OUTSIDE}:{endpoint_port}",
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing", "AWS_REGION": region, "AWS_DEFAULT_REGION": region}


def play(request: dict, work_dir: str, inputs: Inputs, *,
         environment: Optional[Dict[str, str]] = None, forwarded_ports: Sequence[int] = (),
         python: str = IMAGE_PYTHON, repo: str = REPO, timeout: float = 3600, echo=sys.stdout,
         keep_checkpoints: bool = False, upload_model: bool = False) -> Played:
    """Runs the request's job on emulated hosts (the module docstring says how) and returns
    what it left; raises RequestError before anything runs, ModelClash after."""
    emulated_hosts.check_available(python)
    hyperparameters = hyperparameters_json(request)
    checkpoints = (request.get("CheckpointConfig") or {}).get("LocalPath", CHECKPOINT_PATH)
    if checkpoints != CHECKPOINT_PATH:
        raise RequestError(f"CheckpointConfig.LocalPath {checkpoints}: only {CHECKPOINT_PATH} "
                           "is emulated")
    channels, configs = materialize_channels(request, work_dir, inputs)
    resources = request["ResourceConfig"]
    run_seconds = request.get("StoppingCondition", {}).get("MaxRuntimeInSeconds", timeout)
    cluster = emulated_hosts.Cluster(
        work_dir, resources["InstanceCount"], python, repo, hyperparameters, channels,
        environment=environment, keep_checkpoints=keep_checkpoints,
        instance_type=resources["InstanceType"], job_name=request["TrainingJobName"],
        request_environment=request.get("Environment") or {}, channel_configs=configs,
        forwarded_ports=forwarded_ports)
    with cluster:
        result = cluster.run(timeout=min(timeout, run_seconds), echo=echo)
    played = Played(request, result)
    if not result.succeeded:
        return played
    played.model_dir = merge_model_dirs(
        {host.name: os.path.join(host.opt_ml, "model") for host in result.hosts},
        os.path.join(work_dir, "model"))
    played.model_archive = pack_model(played.model_dir, os.path.join(work_dir, MODEL_ARCHIVE))
    if upload_model:
        played.model_s3_uri = model_s3_uri(request)
        bucket, key = _bucket_and_key(played.model_s3_uri)
        inputs.s3.upload_file(played.model_archive, bucket, key)
    return played
