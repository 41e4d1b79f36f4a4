"""Deployment settings: `cdk.json` context read into one typed, validated object.

Every setting has a default that deploys a working system; `cdk deploy -c key=value` or the
`context` block of cdk.json overrides it. A bad value fails synth here, before any construct is
built, with a message naming the key, the value and what is allowed.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping

CONTEXT_PREFIX = "maskrcnn:"

# FSx for Lustre SSD storage: capacity steps (GiB) and throughput per TiB by deployment type.
# https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-storage-capacity.html
FSX_THROUGHPUT_PER_TIB = {
    "PERSISTENT_2": (125, 250, 500, 1000),
    "PERSISTENT_1": (50, 100, 200),
    "SCRATCH_2": (),
}
FSX_DEFAULT_THROUGHPUT = {"PERSISTENT_2": 250, "PERSISTENT_1": 200}
# Data repository associations (auto import from S3) are not available on SCRATCH_1.
FSX_DEPLOYMENT_TYPES = tuple(FSX_THROUGHPUT_PER_TIB)

EFS_ID = re.compile(r"^fs-[0-9a-f]{8,40}$")
# Also the CodeArtifact domain of an isolated deployment, whose names end in a letter or a digit
# (CodeArtifact API reference, CreateDomain `domain`: [a-z][a-z0-9\-]{0,48}[a-z0-9]).
DEPLOYMENT_NAME = re.compile(r"^[a-z][a-z0-9-]{0,22}[a-z0-9]$")
AVAILABILITY_ZONE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")
NOTEBOOK_INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9]+\.[a-z0-9]+$")
S3_PREFIX = re.compile(r"^[A-Za-z0-9!_.*'()/-]+/$")
CIDR = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})$")
CONNECTION_ARN = re.compile(
    r"^arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:\d{12}:connection/[0-9a-f-]{36}$"
)
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
GIT_URL = re.compile(r"^https://[^\s/$.?#].[^\s]*$")
ACCOUNT = re.compile(r"^\d{12}$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class ConfigError(ValueError):
    """A context value that cannot be deployed. The message names the key and what is allowed."""


@dataclass(frozen=True)
class BucketLayout:
    """The data bucket's key prefixes, each ending in '/'. Each role is granted its prefixes; the
    launcher learns them from SSM."""

    data: str                        # the staged dataset (maskrcnn:data_prefix)
    pretrained: str = "pretrained/"  # ImageNet backbone checkpoints (the `pretrained` channel)
    output: str = "jobs/"            # job outputs: model.tar.gz, output.tar.gz
    checkpoints: str = "checkpoints/"  # one folder per training run, synced by SageMaker
    samples: str = "samples/"        # images users upload for inference.ipynb to send to an endpoint


@dataclass(frozen=True)
class DeploymentConfig:
    """All deployment settings. Context keys are the field names with the `maskrcnn:` prefix."""

    # Names every resource and the SSM path `/<deployment_name>/...`: lets two deployments
    # (say, dev and prod) live in one account.
    deployment_name: str = "maskrcnn"
    # The region to deploy to. Empty: the CLI's region (CDK_DEFAULT_REGION), which `cdk deploy`
    # always knows; it picks the training image's base (the region's Deep Learning Container).
    region: str | None = None
    # Network
    vpc_cidr: str = "10.40.0.0/16"
    # Empty: two AZs from the deployment region (environment-agnostic synth). Name 2-3 AZs to use
    # three or to pin them, e.g. ["us-east-1a", "us-east-1b", "us-east-1c"].
    availability_zones: tuple[str, ...] = ()
    # NAT gateways give jobs and the notebook internet egress (COCO download, pip, git).
    # 0 builds an isolated VPC that relies on its VPC endpoints alone.
    nat_gateways: int = 1
    flow_log_retention_days: int = 365
    # Storage
    data_prefix: str = "datasets/coco2017/"
    existing_efs_id: str | None = None
    fsx_enabled: bool = True
    fsx_deployment_type: str = "PERSISTENT_2"
    fsx_storage_capacity_gib: int = 1200
    # MB/s per TiB; empty: 250 for PERSISTENT_2, 200 for PERSISTENT_1 (SCRATCH_2 has no setting).
    fsx_throughput_per_tib: int | None = None
    # Notebook
    notebook_instance_type: str = "ml.t3.large"
    notebook_volume_gib: int = 50
    git_repository_url: str | None = None
    git_branch: str = "main"
    # An existing Secrets Manager secret {"username": ..., "password": ...} for a private repo.
    git_secret_arn: str | None = None
    # Or: a Git user name, for which the stack creates a secret in that form; put the token in
    # it after deploying (docs/settings.md, "Private Git repository").
    git_username: str | None = None
    # Pipeline (CDK Pipelines), off unless enabled.
    pipeline_enabled: bool = False
    pipeline_connection_arn: str | None = None
    pipeline_repository: str | None = None
    pipeline_branch: str = "main"
    # The account and region the pipeline lives in and deploys to (CDK Pipelines needs them
    # concrete: the asset stage's registry login names the region).
    pipeline_account: str | None = None
    pipeline_region: str | None = None

    @property
    def bucket(self) -> BucketLayout:
        return BucketLayout(data=self.data_prefix)

    @property
    def data_path(self) -> str:
        """The dataset's path below the root of EFS and of FSx: `/<data_prefix>` without '/'."""
        return file_system_path(self.data_prefix)

    @property
    def pretrained_path(self) -> str:
        """The backbone checkpoints' path below the root of EFS and of FSx: `/pretrained`."""
        return file_system_path(self.bucket.pretrained)

    @property
    def mirrored_prefixes(self) -> tuple[tuple[str, str], ...]:
        """(bucket prefix, file-system path) of every prefix EFS and FSx receive: the inputs of a
        job whose channels come from a file system."""
        return ((self.data_prefix, self.data_path), (self.bucket.pretrained, self.pretrained_path))

    @property
    def ssm_path(self) -> str:
        """Every value a launcher needs is published under this SSM path."""
        return f"/{self.deployment_name}"

    @property
    def fsx_throughput(self) -> int | None:
        """The FSx throughput to deploy: the setting, or the deployment type's default."""
        if self.fsx_throughput_per_tib is not None:
            return self.fsx_throughput_per_tib
        return FSX_DEFAULT_THROUGHPUT.get(self.fsx_deployment_type)

    @property
    def max_azs(self) -> int:
        return len(self.availability_zones) or 2

    def context_arguments(self) -> list[str]:
        """`-c key=value` arguments that rebuild this config (settings that differ from defaults)."""
        defaults = DeploymentConfig()
        arguments = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value == getattr(defaults, f.name):
                continue
            if isinstance(value, bool):
                text = str(value).lower()
            elif isinstance(value, tuple):
                text = json.dumps(list(value))
            else:
                text = "" if value is None else str(value)
            arguments.append(shlex.quote(f"{CONTEXT_PREFIX}{f.name}={text}"))
        return [part for arg in arguments for part in ("-c", arg)]

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> "DeploymentConfig":
        """Builds the config from a context getter such as `app.node.try_get_context`."""
        raw = {}
        for f in fields(cls):
            value = get(CONTEXT_PREFIX + f.name)
            if value is not None:
                raw[f.name] = value
        return cls.from_mapping(raw)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> "DeploymentConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(
                f"unknown setting(s) {', '.join(CONTEXT_PREFIX + k for k in unknown)}; "
                f"known settings: {', '.join(CONTEXT_PREFIX + k for k in sorted(known))}"
            )
        values = {name: _coerce(name, value) for name, value in raw.items()}
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        _check(DEPLOYMENT_NAME.match(self.deployment_name), "deployment_name", self.deployment_name,
               "2-24 characters: a lowercase letter, then lowercase letters, digits or '-', "
               "ending in a letter or a digit")
        if self.region is not None:
            _check(REGION.match(self.region), "region", self.region, "a region name such as 'us-east-1'")
        _check_cidr(self.vpc_cidr)
        _check(self.availability_zones == () or 2 <= len(self.availability_zones) <= 3,
               "availability_zones", list(self.availability_zones), "empty, or 2 to 3 zone names")
        for zone in self.availability_zones:
            _check(AVAILABILITY_ZONE.match(zone), "availability_zones", zone,
                   "availability zone names such as 'us-east-1a'")
        _check(len(set(self.availability_zones)) == len(self.availability_zones),
               "availability_zones", list(self.availability_zones), "distinct zone names")
        _check(0 <= self.nat_gateways <= self.max_azs, "nat_gateways", self.nat_gateways,
               f"0 (isolated VPC) to {self.max_azs} (one per availability zone)")
        _check(self.flow_log_retention_days in _LOG_RETENTION_DAYS, "flow_log_retention_days",
               self.flow_log_retention_days, f"one of {sorted(_LOG_RETENTION_DAYS)}")
        _check(S3_PREFIX.match(self.data_prefix) and not self.data_prefix.startswith("/"),
               "data_prefix", self.data_prefix, "an S3 key prefix ending in '/', e.g. 'datasets/coco2017/'")
        # Both prefixes reach EFS and FSx (mirrored_prefixes). Rule FSX-5 (docs/aws-rules.md):
        # data repository associations cannot have nested paths; rule DS-1: nested DataSync
        # copies would delete each other's files (REMOVE).
        pretrained = self.bucket.pretrained
        _check(not (self.data_prefix.startswith(pretrained) or pretrained.startswith(self.data_prefix)),
               "data_prefix", self.data_prefix, f"a prefix that neither contains nor lies below "
               f"'{pretrained}', where the backbone checkpoints live")
        if self.existing_efs_id is not None:
            _check(EFS_ID.match(self.existing_efs_id), "existing_efs_id", self.existing_efs_id,
                   "an EFS file system id such as 'fs-0123456789abcdef0'")
        self._validate_fsx()
        _check(NOTEBOOK_INSTANCE_TYPE.match(self.notebook_instance_type), "notebook_instance_type",
               self.notebook_instance_type, "a SageMaker instance type such as 'ml.t3.large'")
        _check(5 <= self.notebook_volume_gib <= 16384, "notebook_volume_gib",
               self.notebook_volume_gib, "5 to 16384 GiB")
        self._validate_git()
        self._validate_pipeline()

    def _validate_fsx(self) -> None:
        if not self.fsx_enabled:
            return
        kind = self.fsx_deployment_type
        _check(kind in FSX_DEPLOYMENT_TYPES, "fsx_deployment_type", kind,
               f"one of {', '.join(FSX_DEPLOYMENT_TYPES)} (SCRATCH_1 cannot auto-import from S3)")
        capacity = self.fsx_storage_capacity_gib
        _check(capacity in (1200, 2400) or (capacity > 2400 and capacity % 2400 == 0),
               "fsx_storage_capacity_gib", capacity,
               f"1200, 2400 or a multiple of 2400 GiB for {kind}")
        allowed = FSX_THROUGHPUT_PER_TIB[kind]
        if allowed:
            _check(self.fsx_throughput_per_tib is None or self.fsx_throughput_per_tib in allowed,
                   "fsx_throughput_per_tib",
                   self.fsx_throughput_per_tib, f"one of {list(allowed)} MB/s per TiB for {kind}")
        else:
            _check(self.fsx_throughput_per_tib is None, "fsx_throughput_per_tib",
                   self.fsx_throughput_per_tib, f"null: {kind} has a fixed throughput")

    def _validate_git(self) -> None:
        if self.git_repository_url is None:
            for name in ("git_secret_arn", "git_username"):
                _check(getattr(self, name) is None, name, getattr(self, name),
                       "unset unless maskrcnn:git_repository_url is set")
            return
        _check(self.git_secret_arn is None or self.git_username is None, "git_username",
               self.git_username, "unset when maskrcnn:git_secret_arn names an existing secret")
        _check(GIT_URL.match(self.git_repository_url), "git_repository_url", self.git_repository_url,
               "an https:// clone URL")
        _check(self.nat_gateways > 0, "git_repository_url", self.git_repository_url,
               "unset with maskrcnn:nat_gateways=0: an isolated VPC reaches no Git host, and the "
               "notebook instance's clone would fail its creation")
        _check(bool(self.git_branch.strip()), "git_branch", self.git_branch, "a branch name")
        if self.git_secret_arn is not None:
            _check(SECRET_ARN.match(self.git_secret_arn), "git_secret_arn", self.git_secret_arn,
                   "a Secrets Manager secret ARN")

    def _validate_pipeline(self) -> None:
        if not self.pipeline_enabled:
            return
        _check(self.pipeline_connection_arn is not None and CONNECTION_ARN.match(self.pipeline_connection_arn),
               "pipeline_connection_arn", self.pipeline_connection_arn,
               "a CodeStar/CodeConnections connection ARN "
               "(arn:aws:codeconnections:<region>:<account>:connection/<uuid>) when "
               "maskrcnn:pipeline_enabled is true")
        _check(self.pipeline_repository is not None and REPOSITORY.match(self.pipeline_repository),
               "pipeline_repository", self.pipeline_repository,
               "'owner/name' of the repository the connection reads when maskrcnn:pipeline_enabled is true")
        _check(bool(self.pipeline_branch.strip()), "pipeline_branch", self.pipeline_branch, "a branch name")
        _check(self.pipeline_account is not None and ACCOUNT.match(self.pipeline_account), "pipeline_account",
               self.pipeline_account, "the 12-digit AWS account id when maskrcnn:pipeline_enabled is true")
        _check(self.pipeline_region is not None and REGION.match(self.pipeline_region), "pipeline_region",
               self.pipeline_region, "a region name such as 'us-east-1' when maskrcnn:pipeline_enabled is true")


def file_system_path(prefix: str) -> str:
    """Where a bucket prefix lands below the root of EFS and of FSx: '/' + prefix without its
    trailing '/' (`datasets/coco2017/` -> `/datasets/coco2017`)."""
    return "/" + prefix.rstrip("/")


# Retention spans the network stack maps onto CloudWatch Logs' RetentionDays.
_LOG_RETENTION_DAYS = {30, 90, 180, 365, 731, 1827, 3653}

_FIELD_TYPES = {f.name: f.type for f in fields(DeploymentConfig)}


def _coerce(name: str, value: Any) -> Any:
    """Context from `-c key=value` arrives as strings; cdk.json gives JSON types. Accept both."""
    kind = _FIELD_TYPES[name]
    optional = "None" in kind
    if optional and (value is None or value == "" or value == "null"):
        return None
    if kind.startswith("bool"):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"{CONTEXT_PREFIX}{name}: {value!r} is not allowed; use true or false")
    if kind.startswith("int"):
        if isinstance(value, bool):
            raise ConfigError(f"{CONTEXT_PREFIX}{name}: {value!r} is not allowed; use a whole number")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
        raise ConfigError(f"{CONTEXT_PREFIX}{name}: {value!r} is not allowed; use a whole number")
    if kind.startswith("tuple"):
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip().startswith("[") else value.split(",")
            except json.JSONDecodeError as err:
                raise ConfigError(f"{CONTEXT_PREFIX}{name}: {value!r} is not a JSON list ({err})") from None
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{CONTEXT_PREFIX}{name}: {value!r} is not allowed; use a list of strings")
        return tuple(v.strip() for v in value if v.strip())
    if not isinstance(value, str):
        raise ConfigError(f"{CONTEXT_PREFIX}{name}: {value!r} is not allowed; use a string")
    return value


def _check(ok: Any, name: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{CONTEXT_PREFIX}{name}: {value!r} is not allowed; expected {allowed}")


def _check_cidr(cidr: str) -> None:
    match = CIDR.match(cidr)
    ok = bool(match) and all(int(octet) <= 255 for octet in match.groups()[:4]) \
        and 16 <= int(match.group(5)) <= 22
    _check(ok, "vpc_cidr", cidr, "an IPv4 CIDR block from /16 to /22, e.g. '10.40.0.0/16'")


__all__ = ["BucketLayout", "ConfigError", "DeploymentConfig", "CONTEXT_PREFIX", "FSX_DEPLOYMENT_TYPES"]
