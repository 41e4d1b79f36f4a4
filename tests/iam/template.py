"""The deployment's IAM policies as AWS would hold them: the synthesized template's policies of
each role, its bucket policy and key policy, with CloudFormation intrinsics resolved to the
concrete values of the tests' fake deployment.

What a reference resolves to is learned from the SSM parameters the template publishes
(contract/maskrcnn_contract/ssm.py names them): each parameter's Value expression is matched
against the value the tests publish for it (tests/launcher/conftest.py `_seed`), which binds each
Ref and Fn::GetAtt in the expression (`Fn::Join` of refs and commas binds a comma-separated
list element by element). Pseudo parameters are the deployment's region and account. A reference
no parameter binds resolves to an UNRESOLVED(...) token that matches no request, and a denial
names it. A published value the template's expression cannot produce fails loudly: the fake
deployment would not be the one the template deploys.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from maskrcnn_contract import ssm

PARTITION = "aws"
URL_SUFFIX = "amazonaws.com"
# CDK asset hashes (the training image's tag): they change with every change to what they hash,
# so a published value may carry any tag where the template has one.
_ASSET_HASH = re.compile(r"[0-9a-f]{64}")
# The roles the harness evaluates, by the SSM parameter that publishes each one's ARN; the
# notebook role is the notebook instance's (not published: the notebook is its own caller).
PUBLISHED_ROLES = {"training": "training-role-arn", "staging": "staging-role-arn",
                   "model": "model-role-arn"}
NOTEBOOK = "notebook"


class TemplateMismatch(AssertionError):
    """The tests' fake deployment publishes a value the template cannot."""


def unresolved(kind: str, *names: str) -> str:
    return f"UNRESOLVED({kind}.{'.'.join(names)})"


@dataclass
class Role:
    name: str                 # notebook, training, staging, model
    logical_id: str
    arn: str
    policies: List[dict]      # [{"name": logical id of the policy, "policy": document}]

    @property
    def principal(self) -> str:
        """The ARN a request of this role's session carries (SageMaker assumes the role)."""
        account = self.arn.split(":")[4]
        return f"arn:{PARTITION}:sts::{account}:assumed-role/{self.arn.rsplit('/', 1)[1]}/SageMaker"


@dataclass
class Deployment:
    """The deployment as the engine sees it."""

    region: str
    account: str
    roles: Dict[str, Role]
    bucket_policies: Dict[str, dict]          # bucket name -> policy
    bucket_keys: Dict[str, str]               # SSE-KMS bucket name -> its default key ARN
    key_policies: Dict[str, dict]             # key ARN -> key policy
    unresolved: List[str] = field(default_factory=list)
    vpc_id: Optional[str] = None              # the VPC the jobs' network interfaces are in

    def role_by_arn(self, arn: str) -> Optional[Role]:
        return next((r for r in self.roles.values() if r.arn == arn), None)


class Resolver:
    def __init__(self, template: dict, region: str, account: str):
        self.template = template
        self.resources = template["Resources"]
        self.pseudo = {"AWS::Region": region, "AWS::AccountId": account,
                       "AWS::Partition": PARTITION, "AWS::URLSuffix": URL_SUFFIX,
                       "AWS::NoValue": None}
        self.bindings: Dict[Tuple[str, ...], str] = {}
        self.unresolved: set = set()

    # --- binding from published values ------------------------------------------------------

    def bind_published(self, ssm_path: str, published: Dict[str, str]) -> None:
        mismatches = []
        for resource in self.resources.values():
            if resource["Type"] != "AWS::SSM::Parameter":
                continue
            name = resource["Properties"]["Name"]
            leaf = name[len(ssm_path.rstrip("/")) + 1:] if isinstance(name, str) else None
            if leaf not in published:
                continue
            expression = resource["Properties"]["Value"]
            pattern, refs = self._pattern(expression)
            found = re.fullmatch(pattern, published[leaf])
            if not found:
                mismatches.append(f"{name}: the template publishes {json.dumps(expression)}, "
                                  f"the tests publish {published[leaf]!r}")
                continue
            for group, ref in zip(found.groups(), refs):
                if ref in self.bindings and self.bindings[ref] != group:
                    mismatches.append(f"{name}: {'.'.join(ref)} bound to both "
                                      f"{self.bindings[ref]!r} and {group!r}")
                self.bindings[ref] = group
        if mismatches:
            raise TemplateMismatch("the fake deployment differs from the template:\n  "
                                   + "\n  ".join(mismatches))

    def bind(self, ref: Tuple[str, ...], value: str) -> None:
        self.bindings.setdefault(ref, value)

    def derive(self) -> None:
        """The other spelling of each bound resource whose Ref and Arn determine each other."""
        for logical_id, resource in self.resources.items():
            ref, arn = ("Ref", logical_id), ("GetAtt", logical_id, "Arn")
            kind = resource["Type"]
            if kind == "AWS::S3::Bucket":
                if ref in self.bindings:
                    self.bind(arn, f"arn:{PARTITION}:s3:::{self.bindings[ref]}")
                elif arn in self.bindings:
                    self.bind(ref, self.bindings[arn].rsplit(":", 1)[1])
            elif kind in ("AWS::KMS::Key", "AWS::IAM::Role") and arn in self.bindings:
                self.bind(ref, self.bindings[arn].rsplit("/", 1)[1])

    def _pattern(self, node) -> Tuple[str, List[Tuple[str, ...]]]:
        """(regex, the references its groups bind, in order) of a Value expression."""
        if isinstance(node, str):
            return _literal(node), []
        if isinstance(node, dict) and len(node) == 1:
            (kind, arg), = node.items()
            if kind == "Ref" and arg in self.pseudo:
                return re.escape(self.pseudo[arg]), []
            if kind == "Ref":
                return "([^,]+?)", [("Ref", arg)]
            if kind == "Fn::GetAtt":
                return "([^,]+?)", [("GetAtt", *_getatt(arg))]
            if kind == "Fn::Join":
                delimiter, items = arg
                parts = [self._pattern(item) for item in items]
                return (re.escape(delimiter).join(p for p, _ in parts),
                        [r for _, refs in parts for r in refs])
            if kind == "Fn::Sub":
                text = arg if isinstance(arg, str) else arg[0]
                pattern, refs, last = "", [], 0
                for found in re.finditer(r"\$\{([^}!]+)\}", text):
                    pattern += _literal(text[last:found.start()])
                    sub, sub_refs = self._pattern(_sub_reference(found.group(1)))
                    pattern, refs, last = pattern + sub, refs + sub_refs, found.end()
                return pattern + _literal(text[last:]), refs
        raise TemplateMismatch(f"cannot match a published value against {json.dumps(node)}")

    # --- resolution ---------------------------------------------------------------------------

    def resolve(self, node):
        if isinstance(node, list):
            return [self.resolve(item) for item in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (kind, arg), = node.items()
            if kind == "Ref":
                if arg in self.pseudo:
                    return self.pseudo[arg]
                return self._bound(("Ref", arg))
            if kind == "Fn::GetAtt":
                return self._bound(("GetAtt", *_getatt(arg)))
            if kind == "Fn::Join":
                delimiter, items = arg
                return delimiter.join(str(self.resolve(item)) for item in self.resolve_list(items))
            if kind == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                return re.sub(r"\$\{([^}!]+)\}", lambda m: str(
                    self.resolve(variables[m.group(1)]) if m.group(1) in variables
                    else self.resolve(_sub_reference(m.group(1)))), text)
            if kind == "Fn::Select":
                index, items = arg
                return self.resolve_list(items)[int(self.resolve(index))]
            if kind == "Fn::Split":
                delimiter, text = arg
                return str(self.resolve(text)).split(delimiter)
            if kind.startswith("Fn::"):
                raise TemplateMismatch(f"{kind} is not resolved by tests/iam/template.py: "
                                       f"{json.dumps(node)}")
        return {k: self.resolve(v) for k, v in node.items()}

    def resolve_list(self, node) -> list:
        value = self.resolve(node)
        return value if isinstance(value, list) else [value]

    def _bound(self, ref: Tuple[str, ...]) -> str:
        if ref in self.bindings:
            return self.bindings[ref]
        token = unresolved(*ref)
        self.unresolved.add(token)
        return token


def _literal(text: str) -> str:
    """A regex of literal text, where an asset hash matches any tag."""
    return "".join(re.escape(part) if i % 2 == 0 else "[^/:,]+"
                   for i, part in enumerate(_split_hashes(text)))


def _split_hashes(text: str) -> List[str]:
    """Alternating literal text and asset hashes."""
    parts, last = [], 0
    for found in _ASSET_HASH.finditer(text):
        parts += [text[last:found.start()], found.group(0)]
        last = found.end()
    return parts + [text[last:]]


def _getatt(arg) -> Tuple[str, str]:
    if isinstance(arg, str):
        logical, _, attribute = arg.partition(".")
        return logical, attribute
    return arg[0], arg[1]


def _sub_reference(name: str) -> dict:
    if "." in name:
        return {"Fn::GetAtt": name.split(".", 1)}
    return {"Ref": name}


def _of_type(template: dict, kind: str) -> Dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _role_logical_id(expression) -> Optional[str]:
    if isinstance(expression, dict) and "Fn::GetAtt" in expression:
        logical, attribute = _getatt(expression["Fn::GetAtt"])
        return logical if attribute == "Arn" else None
    return None


def load(template: dict, ssm_path: str, published: Dict[str, str], region: str, account: str,
         extra_bindings: Optional[Dict[str, str]] = None) -> Deployment:
    """The deployment's roles and resource policies, resolved with the published values.
    `extra_bindings`: {resource type: physical id} for a resource type the template has once
    and no parameter publishes (the VPC)."""
    resolver = Resolver(template, region, account)
    resolver.bind_published(ssm_path, published)
    for kind, value in (extra_bindings or {}).items():
        found = list(_of_type(template, kind))
        if len(found) != 1:
            raise TemplateMismatch(f"{kind}: {len(found)} resources in the template, expected 1")
        resolver.bind(("Ref", found[0]), value)
    resolver.derive()

    # The roles: the published ones by the parameter that names their ARN, the notebook role
    # by the notebook instance's RoleArn.
    parameters = {r["Properties"]["Name"]: r["Properties"]["Value"]
                  for r in _of_type(template, "AWS::SSM::Parameter").values()}
    role_ids = {name: _role_logical_id(parameters.get(ssm.parameter_name(ssm_path, leaf)))
                for name, leaf in PUBLISHED_ROLES.items()}
    notebook, = _of_type(template, "AWS::SageMaker::NotebookInstance").values()
    role_ids[NOTEBOOK] = _role_logical_id(notebook["Properties"]["RoleArn"])
    # The notebook role's ARN is not published: the name CDK would give it does not matter.
    resolver.bind(("GetAtt", role_ids[NOTEBOOK], "Arn"),
                  f"arn:{PARTITION}:iam::{account}:role/{ssm_path.strip('/')}-notebook")

    roles = {}
    for name, logical_id in role_ids.items():
        if logical_id is None:
            raise TemplateMismatch(f"the {name} role is not a Fn::GetAtt of a role")
        role = template["Resources"][logical_id]
        if role["Properties"].get("ManagedPolicyArns"):
            raise TemplateMismatch(f"{logical_id} has managed policies, which tests/iam does not "
                                   "read")
        policies = [{"name": f"{logical_id}/{p['PolicyName']}",
                     "policy": resolver.resolve(p["PolicyDocument"])}
                    for p in role["Properties"].get("Policies", [])]
        for policy_id, policy in _of_type(template, "AWS::IAM::Policy").items():
            if {"Ref": logical_id} in policy["Properties"]["Roles"]:
                policies.append({"name": policy_id,
                                 "policy": resolver.resolve(policy["Properties"]["PolicyDocument"])})
        roles[name] = Role(name, logical_id, resolver.resolve({"Fn::GetAtt": [logical_id, "Arn"]}),
                           policies)

    bucket_policies = {}
    for policy in _of_type(template, "AWS::S3::BucketPolicy").values():
        bucket = resolver.resolve(policy["Properties"]["Bucket"])
        bucket_policies[bucket] = resolver.resolve(policy["Properties"]["PolicyDocument"])
    bucket_keys = {}
    for logical_id, bucket in _of_type(template, "AWS::S3::Bucket").items():
        for rule in bucket["Properties"].get("BucketEncryption", {}).get(
                "ServerSideEncryptionConfiguration", []):
            default = rule.get("ServerSideEncryptionByDefault", {})
            if default.get("SSEAlgorithm") == "aws:kms":
                bucket_keys[resolver.resolve({"Ref": logical_id})] = resolver.resolve(
                    default["KMSMasterKeyID"])
    key_policies = {resolver.resolve({"Fn::GetAtt": [logical_id, "Arn"]}):
                    resolver.resolve(key["Properties"]["KeyPolicy"])
                    for logical_id, key in _of_type(template, "AWS::KMS::Key").items()}
    return Deployment(region, account, roles, bucket_policies, bucket_keys, key_policies,
                      sorted(resolver.unresolved), (extra_bindings or {}).get("AWS::EC2::VPC"))
