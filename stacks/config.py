"""Deployment settings: `cdk.json` context read into one typed, validated object.

Every setting has a default that deploys a working system; `cdk deploy -c key=value` or the
`context` block of cdk.json overrides it. Every `maskrcnn:*` key of the app's context must be a
setting. A bad value fails synth here, before any construct is built, with a message naming the
key, the value and what is allowed (every bad setting at once); an unknown key is named with the
nearest known one.

The settings are a pydantic model: each field declares its type, how a `-c` string becomes that
type, and the rule of its own value; `_rules_across_settings` checks what depends on several.
"""

import dataclasses
import difflib
import json
import re
import shlex
from dataclasses import dataclass
from typing import Annotated, Any, Iterator, List, Mapping, Optional

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

CONTEXT_PREFIX = "maskrcnn:"
UNKNOWN = "unknown setting"

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
S3_PREFIX = re.compile(r"^[A-Za-z0-9!_.*'()-][A-Za-z0-9!_.*'()/-]*/$")
CIDR = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})$")
CONNECTION_ARN = re.compile(
    r"^arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:\d{12}:connection/[0-9a-f-]{36}$"
)
SECRET_ARN = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
GIT_URL = re.compile(r"^https://[^\s/$.?#].[^\s]*$")
# One address, as SNS's email protocol takes it (a subscription, confirmed from the mailbox):
# local part, '@', a domain with a dot; no spaces, no second '@', no display name.
EMAIL = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                   r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$")
# A standard SNS topic (SNS API reference, CreateTopic Name: 1-256 letters, digits, '-', '_'). A
# FIFO topic's name ends in '.fifo': it takes messages with a message group id, which the
# deployment's rules and alarms do not set (not verified whether EventBridge would add one).
SNS_TOPIC_ARN = re.compile(
    r"^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d:\d{12}:[A-Za-z0-9_-]{1,256}$")
ACCOUNT = re.compile(r"^\d{12}$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# What `git check-ref-format --branch` refuses anywhere in a branch name: control characters,
# space, ~ ^ : ? * [ \, "..", "@{", "//", and a component that starts with '.' or ends in ".lock".
GIT_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|(^|/)\.|\.lock(/|$)")
# Retention spans the network stack maps onto CloudWatch Logs' RetentionDays.
LOG_RETENTION_DAYS = (30, 90, 180, 365, 731, 1827, 3653)
# Experiment tracking (stacks/experiments.py): off, or a SageMaker managed MLflow tracking server,
# the one kind reachable from a VPC without internet (docs/experiments.md, "Why a tracking
# server, not an MLflow App").
MLFLOW_MODES = ("off", "tracking-server")
# CreateMlflowTrackingServer TrackingServerSize (botocore's enum; docs/aws-rules.md MLF-1).
MLFLOW_SIZES = ("Small", "Medium", "Large")


class ConfigError(ValueError):
    """A context value that cannot be deployed. The message names the key and what is allowed."""


@dataclass(frozen=True)
class BucketLayout:
    """The data bucket's key prefixes, each ending in '/'. Each role is granted its prefixes; the
    launcher learns them from SSM."""

    datasets: str                    # every dataset, <datasets><name>/ (maskrcnn:datasets_prefix)
    pretrained: str = "pretrained/"  # ImageNet backbone checkpoints (the `pretrained` channel)
    imports: str = "imports/"        # labeling tools' exports users upload, <imports><name>/
    output: str = "jobs/"            # job outputs: model.tar.gz, output.tar.gz
    mlflow: str = "mlflow/"          # the MLflow tracking server's artifact store (maskrcnn:mlflow)
    checkpoints: str = "checkpoints/"  # one folder per training run, synced by SageMaker
    samples: str = "samples/"        # images uploaded for inference.ipynb to send to an endpoint


# --- what a value may be: `-c` strings and cdk.json's JSON types, then each setting's rule --------

def _refuse(tail: str, value: Any = None) -> None:
    """Fails one setting: `tail` says what is allowed; `value`, the value as read, when it differs
    from what was given."""
    raise PydanticCustomError("maskrcnn", "{tail}", {"tail": tail, "value": value})


def _boolean(value: Any) -> Any:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value if isinstance(value, bool) else _refuse("use true or false")


def _whole(value: Any) -> Any:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return (value if isinstance(value, int) and not isinstance(value, bool)
            else _refuse("use a whole number"))


def _text(value: Any) -> Any:
    return value if isinstance(value, str) else _refuse("use a string")


def _names(value: Any) -> Any:
    """A JSON list (cdk.json), or a `-c` string: a JSON list or comma-separated names."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip().startswith("[") else value.split(",")
        except json.JSONDecodeError as err:
            _refuse(f"use a JSON list or comma-separated names ({err})")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        _refuse("use a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def _unset_if_empty(value: Any) -> Any:
    return None if isinstance(value, str) and value in ("", "null") else value


def _checked(kind: Any, ok: Any, expected: str) -> Any:
    """`kind`, whose value must pass `ok`: a function, or a pattern the whole value matches."""
    test = ok.fullmatch if isinstance(ok, re.Pattern) else ok

    def check(value: Any) -> Any:
        if not test(value):
            _refuse(f"expected {expected}", value)
        return value
    return Annotated[kind, AfterValidator(check)]


def _unset_or(kind: Any) -> Any:
    """An optional setting: unset (null, or an empty `-c key=`), or a value of `kind`."""
    return Annotated[Optional[kind], BeforeValidator(_unset_if_empty)]


def _is_cidr(cidr: str) -> bool:
    match = CIDR.match(cidr)
    return match is not None and all(int(octet) <= 255 for octet in match.groups()[:4]) \
        and 16 <= int(match.group(5)) <= 22


def _is_branch(name: str) -> bool:
    return (bool(name) and name != "@" and not name.startswith(("-", "/"))
            and not name.endswith(("/", ".")) and not GIT_REF_FORBIDDEN.search(name))


def _is_repository(name: str) -> bool:
    return bool(REPOSITORY.fullmatch(name)) and not set(name.split("/")) & {".", ".."}


Bool = Annotated[bool, BeforeValidator(_boolean)]
Int = Annotated[int, BeforeValidator(_whole)]
Text = Annotated[str, BeforeValidator(_text)]
# What is allowed, where a rule across settings says it too.
CONNECTION = ("a CodeStar/CodeConnections connection ARN "
              "(arn:aws:codeconnections:<region>:<account>:connection/<uuid>)")
OWNER_NAME = "'owner/name' of the repository the connection reads"
ACCOUNT_ID = "the 12-digit AWS account id"
REGION_NAME = "a region name such as 'us-east-1'"
BRANCH = ("a Git branch name (`git check-ref-format --branch`: no spaces, '..', '@{', any of "
          "~^:?*[\\, or a leading '-')")
Zone = _checked(str, AVAILABILITY_ZONE, "availability zone names such as 'us-east-1a'")
Zones = _checked(_checked(Annotated[tuple[Zone, ...], BeforeValidator(_names)],
                          lambda zones: len(zones) in (0, 2, 3), "empty, or 2 to 3 zone names"),
                 lambda zones: len(set(zones)) == len(zones), "distinct zone names")
# The datasets prefix and pretrained/ reach EFS and FSx (mirrored_prefixes). Rule FSX-5
# (docs/aws-rules.md): data repository associations cannot have nested paths; rule DS-1: nested
# DataSync copies would delete each other's files (REMOVE). Nor may it nest with the bucket's other
# prefixes: the file systems would receive the users' raw exports, outputs or checkpoints, and the
# training role, which reads every dataset, would read those.
OTHER_PREFIXES: tuple[str, ...] = tuple(
    field.default  # type: ignore[misc]  # each of BucketLayout's fields has a str default
    for field in dataclasses.fields(BucketLayout) if field.name != "datasets")


def _nests(prefix: str, other: str) -> bool:
    return prefix.startswith(other) or other.startswith(prefix)


Prefix = _checked(_checked(Text, S3_PREFIX, "an S3 key prefix ending in '/', e.g. 'datasets/'"),
                  lambda prefix: not any(_nests(prefix, other) for other in OTHER_PREFIXES),
                  "a prefix that neither contains nor lies below any of the bucket's other "
                  f"prefixes ({', '.join(repr(p) for p in OTHER_PREFIXES)}): "
                  f"'{BucketLayout.pretrained}' holds the backbone checkpoints")


class DeploymentConfig(BaseModel):
    """All deployment settings. Context keys are the field names with the `maskrcnn:` prefix."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    # Names every resource and the SSM path `/<deployment_name>/...`: lets two deployments
    # (say, dev and prod) live in one account.
    deployment_name: _checked(Text, DEPLOYMENT_NAME, "2-24 characters: a lowercase letter, then "
                              "lowercase letters, digits or '-', ending in a letter or a "
                              "digit") = "maskrcnn"
    # The region to deploy to. Empty: the CLI's region (CDK_DEFAULT_REGION), which `cdk deploy`
    # always knows; it picks the training image's base (the region's Deep Learning Container).
    region: _unset_or(_checked(Text, REGION, REGION_NAME)) = None
    # Network
    vpc_cidr: _checked(Text, _is_cidr,
                       "an IPv4 CIDR block from /16 to /22, e.g. '10.40.0.0/16'") = "10.40.0.0/16"
    # Empty: two AZs from the deployment region (environment-agnostic synth). Name 2-3 AZs to use
    # three or to pin them, e.g. ["us-east-1a", "us-east-1b", "us-east-1c"].
    availability_zones: Zones = ()
    # NAT gateways give jobs and the notebook internet egress (COCO download, pip, git).
    # 0 builds an isolated VPC that relies on its VPC endpoints alone.
    nat_gateways: Int = 1
    flow_log_retention_days: _checked(Int, lambda days: days in LOG_RETENTION_DAYS,
                                      f"one of {list(LOG_RETENTION_DAYS)}") = 365
    # Storage: every dataset below one prefix, <datasets_prefix><name>/ (COCO 2017 is 'coco2017').
    datasets_prefix: Prefix = "datasets/"
    existing_efs_id: _unset_or(_checked(
        Text, EFS_ID, "an EFS file system id such as 'fs-0123456789abcdef0'")) = None
    fsx_enabled: Bool = True
    fsx_deployment_type: _checked(Text, lambda kind: kind in FSX_DEPLOYMENT_TYPES,
                                  f"one of {', '.join(FSX_DEPLOYMENT_TYPES)} (SCRATCH_1 cannot "
                                  "auto-import from S3)") = "PERSISTENT_2"
    fsx_storage_capacity_gib: Int = 1200
    # MB/s per TiB; empty: 250 for PERSISTENT_2, 200 for PERSISTENT_1 (SCRATCH_2 has no setting).
    fsx_throughput_per_tib: _unset_or(Int) = None
    # Notebook
    notebook_instance_type: _checked(
        Text, NOTEBOOK_INSTANCE_TYPE, "a SageMaker instance type such as 'ml.t3.large'"
    ) = "ml.t3.large"
    notebook_volume_gib: _checked(Int, lambda gib: 5 <= gib <= 16384, "5 to 16384 GiB") = 50
    git_repository_url: _unset_or(_checked(Text, GIT_URL, "an https:// clone URL")) = None
    git_branch: _checked(Text, _is_branch, BRANCH) = "main"
    # An existing Secrets Manager secret {"username": ..., "password": ...} for a private repo.
    git_secret_arn: _unset_or(_checked(Text, SECRET_ARN, "a Secrets Manager secret ARN")) = None
    # Or: a Git user name, for which the stack creates a secret in that form; put the token in
    # it after deploying (docs/settings.md, "Private Git repository").
    git_username: _unset_or(Text) = None
    # Notifications (stacks/monitoring.py): finished, failed and stopped training jobs, failed
    # endpoints and idle endpoints go to an SNS topic. The stack creates one, encrypted with a
    # key of its own, unless an existing topic is named; an email address is subscribed to
    # whichever it is (the address confirms the subscription from the message SNS sends it).
    notification_email: _unset_or(_checked(Text, EMAIL, "an email address such as "
                                                        "'ml-team@example.com'")) = None
    notification_topic_arn: _unset_or(_checked(
        Text, SNS_TOPIC_ARN, "the ARN of an existing standard SNS topic "
                             "(arn:aws:sns:<region>:<account>:<name>, not a .fifo topic)")) = None
    # Experiment tracking: "tracking-server" deploys a SageMaker managed MLflow tracking server
    # (stacks/experiments.py) that training jobs log to unless launched with --no-mlflow; it bills
    # by the hour while it runs, whatever its use (docs/experiments.md: its cost, Stop/Start).
    mlflow: _checked(Text, lambda mode: mode in MLFLOW_MODES,
                     f"one of {', '.join(MLFLOW_MODES)}") = "off"
    mlflow_size: _checked(Text, lambda size: size in MLFLOW_SIZES,
                          f"one of {', '.join(MLFLOW_SIZES)} (AWS: up to 25, 50, 100 users)"
                          ) = "Small"
    # Pipeline (CDK Pipelines), off unless enabled. Each value given is checked, enabled or not.
    pipeline_enabled: Bool = False
    pipeline_connection_arn: _unset_or(_checked(Text, CONNECTION_ARN, CONNECTION)) = None
    pipeline_repository: _unset_or(_checked(Text, _is_repository, OWNER_NAME)) = None
    pipeline_branch: _checked(Text, _is_branch, BRANCH) = "main"
    # The account and region the pipeline lives in and deploys to (CDK Pipelines needs them
    # concrete: the asset stage's registry login names the region).
    pipeline_account: _unset_or(_checked(Text, ACCOUNT, ACCOUNT_ID)) = None
    pipeline_region: _unset_or(_checked(Text, REGION, REGION_NAME)) = None

    @property
    def bucket(self) -> BucketLayout:
        return BucketLayout(datasets=self.datasets_prefix)

    @property
    def datasets_path(self) -> str:
        """The datasets' directory below the root of EFS and of FSx: `/<datasets_prefix>` without
        '/' (`/datasets`); a dataset's is `<datasets_path>/<name>`."""
        return file_system_path(self.datasets_prefix)

    @property
    def pretrained_path(self) -> str:
        """The backbone checkpoints' path below the root of EFS and of FSx: `/pretrained`."""
        return file_system_path(self.bucket.pretrained)

    @property
    def mirrored_prefixes(self) -> tuple[tuple[str, str], ...]:
        """(bucket prefix, file-system path) of every prefix EFS and FSx receive: the inputs of a
        job whose channels come from a file system."""
        return ((self.datasets_prefix, self.datasets_path),
                (self.bucket.pretrained, self.pretrained_path))

    @property
    def mlflow_enabled(self) -> bool:
        return self.mlflow != "off"

    @property
    def ssm_path(self) -> str:
        """Every value a launcher needs is published under this SSM path."""
        return f"/{self.deployment_name}"

    @property
    def fsx_throughput(self) -> Optional[int]:
        """The FSx throughput to deploy: the setting, or the deployment type's default."""
        if self.fsx_throughput_per_tib is not None:
            return self.fsx_throughput_per_tib
        return FSX_DEFAULT_THROUGHPUT.get(self.fsx_deployment_type)

    @property
    def max_azs(self) -> int:
        return len(self.availability_zones) or 2

    def context_arguments(self) -> List[str]:
        """`-c key=value` arguments that rebuild this config (settings that differ from
        defaults)."""
        defaults = DeploymentConfig()
        arguments = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            if value == getattr(defaults, name):
                continue
            if isinstance(value, bool):
                text = str(value).lower()
            elif isinstance(value, tuple):
                text = json.dumps(list(value))
            else:
                text = "" if value is None else str(value)
            arguments.append(shlex.quote(f"{CONTEXT_PREFIX}{name}={text}"))
        return [part for arg in arguments for part in ("-c", arg)]

    @classmethod
    def from_context(cls, context: Any) -> "DeploymentConfig":
        """Builds the config from the app's whole context: `app.node.get_all_context()`, the node,
        or its `try_get_context` (whose node's whole context is read). Every `maskrcnn:*` key must
        be a setting; CDK's own keys (`@aws-cdk/...`) are not ours. A setting's name without the
        prefix, or `maskrcnn` with another separator, is refused as a likely slip."""
        node = getattr(context, "__self__", context)  # a bound try_get_context: its node
        if hasattr(node, "get_all_context"):
            context = node.get_all_context()
        raw, strays = {}, []
        for key, value in context.items():
            if key.startswith(CONTEXT_PREFIX):
                raw[key[len(CONTEXT_PREFIX):]] = value
            elif key.lower().startswith("maskrcnn") or key in cls.model_fields:
                strays.append(_unknown(key, re.sub(r"^maskrcnn[^a-z0-9]?", "", key, flags=re.I)))
        return cls._build(raw, strays)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> "DeploymentConfig":
        """Builds the config from settings named without the prefix (tests, tools)."""
        return cls._build(raw, [])

    @classmethod
    def _build(cls, raw: Mapping[str, Any], problems: List[str]) -> "DeploymentConfig":
        try:
            config = cls.model_validate(dict(raw))
        except ValidationError as error:
            problems += [_message(e) for e in error.errors(include_url=False)]
        else:
            problems += [_not_allowed(*problem) for problem in config._rules_across_settings()]
        if any(UNKNOWN in problem for problem in problems):
            problems.append("known settings: "
                            + ", ".join(CONTEXT_PREFIX + name for name in sorted(cls.model_fields)))
        if problems:
            raise ConfigError("\n".join(problems))
        return config

    def _rules_across_settings(self) -> Iterator[tuple[str, Any, str]]:
        """(key, value, what is allowed) of each rule that depends on more than one setting. Plain
        checks, run once every field is valid: a pydantic model validator stops at its first error
        and names no key, and these name the key and every problem."""
        if not 0 <= self.nat_gateways <= self.max_azs:
            yield ("nat_gateways", self.nat_gateways,
                   f"0 (isolated VPC) to {self.max_azs} (one per availability zone)")
        # The availability zones of the region deployed to.
        region = self.pipeline_region if self.pipeline_enabled else self.region
        # Zones is made at run time (pydantic's Annotated), which mypy cannot read as a type.
        outside = [zone for zone in self.availability_zones  # type: ignore[attr-defined]
                   if region and zone[:-1] != region]
        if outside:
            yield ("availability_zones", list(self.availability_zones), f"zones of {region}")
        # Checked with FSx off too, so that turning it on cannot meet a bad value. The capacity
        # steps are the same for each type, but the message names the type, as FSx's guide does.
        kind, capacity = self.fsx_deployment_type, self.fsx_storage_capacity_gib
        if not (capacity in (1200, 2400) or (capacity > 2400 and capacity % 2400 == 0)):
            yield ("fsx_storage_capacity_gib", capacity,
                   f"1200, 2400 or a multiple of 2400 GiB for {kind}")
        allowed, throughput = FSX_THROUGHPUT_PER_TIB[kind], self.fsx_throughput_per_tib
        if allowed and throughput is not None and throughput not in allowed:
            yield ("fsx_throughput_per_tib", throughput,
                   f"one of {list(allowed)} MB/s per TiB for {kind}")
        if not allowed and throughput is not None:
            yield ("fsx_throughput_per_tib", throughput, f"null: {kind} has a fixed throughput")
        # EventBridge delivers to an SNS target in the rule's own region (docs/aws-rules.md SNS-1).
        topic_region = (self.notification_topic_arn or "").split(":")[3:4]
        if topic_region and region and topic_region[0] != region:
            yield ("notification_topic_arn", self.notification_topic_arn,
                   f"a topic in {region}, the region deployed to: EventBridge rules publish only "
                   "to topics in their own region")
        if self.mlflow == "off" and "mlflow_size" in self.model_fields_set:
            # Ignored without a tracking server: refused rather than dropped.
            yield ("mlflow_size", self.mlflow_size,
                   "unset unless maskrcnn:mlflow is tracking-server")
        yield from self._git_rules()
        yield from self._pipeline_rules()

    def _git_rules(self) -> Iterator[tuple[str, Any, str]]:
        if self.git_repository_url is None:
            # Each would be ignored without a repository: refused rather than dropped.
            for name in ("git_branch", "git_secret_arn", "git_username"):
                if name in self.model_fields_set and getattr(self, name) is not None:
                    yield (name, getattr(self, name),
                           "unset unless maskrcnn:git_repository_url is set")
            return
        if self.git_secret_arn is not None and self.git_username is not None:
            yield ("git_username", self.git_username,
                   "unset when maskrcnn:git_secret_arn names an existing secret")
        if self.nat_gateways == 0:
            yield ("git_repository_url", self.git_repository_url,
                   "unset with maskrcnn:nat_gateways=0: an isolated VPC reaches no Git host, and "
                   "the notebook instance's clone would fail its creation")

    def _pipeline_rules(self) -> Iterator[tuple[str, Any, str]]:
        if not self.pipeline_enabled:
            return
        when = "when maskrcnn:pipeline_enabled is true"
        for name, what in (("pipeline_connection_arn", CONNECTION),
                           ("pipeline_repository", OWNER_NAME),
                           ("pipeline_account", ACCOUNT_ID), ("pipeline_region", REGION_NAME)):
            if getattr(self, name) is None:
                yield (name, None, f"{what} {when}")
        # The pipeline deploys to pipeline_region: another region would be ignored.
        if self.region is not None and self.region != self.pipeline_region:
            yield ("region", self.region,
                   f"unset, or maskrcnn:pipeline_region ({self.pipeline_region}), {when}: the "
                   "pipeline deploys its stage there")


def file_system_path(prefix: str) -> str:
    """Where a bucket prefix lands below the root of EFS and of FSx: '/' + prefix without its
    trailing '/' (`datasets/` -> `/datasets`)."""
    return "/" + prefix.rstrip("/")


def _not_allowed(name: str, value: Any, expected: str) -> str:
    return f"{CONTEXT_PREFIX}{name}: {value!r} is not allowed; expected {expected}"


def _unknown(key: str, name: str) -> str:
    """An unknown key, with the known setting nearest to `name`: one it begins, else the closest
    spelling (difflib). `_build` lists every known setting after it."""
    known = list(DeploymentConfig.model_fields)
    near = [k for k in known if k.startswith(name)] if len(name) >= 3 else []
    near = near or difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return f"{key}: {UNKNOWN}" + (f"; did you mean {CONTEXT_PREFIX}{near[0]}?" if near else "")


def _message(error: Mapping[str, Any]) -> str:
    """One pydantic error as `maskrcnn:<key>: <value> is not allowed; <what is allowed>`."""
    name, context = str(error["loc"][0]), error.get("ctx") or {}
    if error["type"] == "extra_forbidden":
        return _unknown(CONTEXT_PREFIX + name, name)
    value = context["value"] if context.get("value") is not None else error["input"]
    return f"{CONTEXT_PREFIX}{name}: {value!r} is not allowed; {context.get('tail', error['msg'])}"


__all__ = ["BucketLayout", "ConfigError", "DeploymentConfig", "CONTEXT_PREFIX",
           "FSX_DEPLOYMENT_TYPES"]
