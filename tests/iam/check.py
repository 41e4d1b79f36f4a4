"""Evaluates recorded AWS calls against the deployment's policies: each call's requests (the
table, tests/iam/operations.py, and the rules it implies, tests/iam/implied.py) for the role
that makes each one, decided by the engine (tests/iam/engine.py). Returns one message per request
AWS would refuse."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

from tests.iam import engine as engine_module
from tests.iam.implied import RULES, Known, Need
from tests.iam.operations import OPERATIONS

TABLE = "tests/iam/operations.py"
# Real clients reach AWS over TLS (the data bucket's policy denies anything else).
TRANSPORT = {"aws:SecureTransport": "true"}


class Unmapped(LookupError):
    pass


@dataclass(frozen=True)
class Denial:
    action: Optional[str]   # None: the call could not be evaluated (unmapped, unknown role, ...)
    text: str


def _value(params: dict, path: str):
    """The parameter at a dotted path; 'A[].B' collects B from each item of the list A."""
    values = [params]
    for part in path.split("."):
        many = part.endswith("[]")
        name = part[:-2] if many else part
        found = []
        for value in values:
            if isinstance(value, dict) and name in value:
                item = value[name]
                found += item if many and isinstance(item, list) else [item]
        values = found
    if not values:
        return None
    return values if "[]" in path or len(values) > 1 else values[0]


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [_text(v) for v in value]
    return str(value)


def _context(spec: dict, params: dict, resolve=None) -> dict:
    """The request's condition keys: each a parameter's dotted path, or "=<template>" for an ARN
    AWS derives from the request (resolved like a resource, e.g. the model a transform uses)."""
    context = {}
    for key, path in spec.items():
        if path.startswith("="):
            context[key] = resolve(path[1:])
            continue
        value = _value(params, path)
        if value is None or value == []:
            continue
        if key == "@tags":
            context["aws:TagKeys"] = [t["Key"] for t in value]
            context.update({f"aws:RequestTag/{t['Key']}": t["Value"] for t in value})
        elif key.startswith(("sagemaker:Vpc", "sagemaker:InstanceTypes", "sagemaker:FileSystem")):
            context[key] = _text(value if isinstance(value, list) else [value])
        else:
            context[key] = _text(value)
    return context


def _resource(template: str, call: dict, known: Known) -> str:
    if template == "*":
        return template
    names = {"partition": "aws", "region": call["region"] or known.deployment.region,
             "account": known.deployment.account}

    def fill(found):
        name, _, transform = found.group(1).partition("|")
        value = names[name] if name in names else _value(call["params"], name)
        if value is None:
            raise Unmapped(f"{call['service_name']}.{call['operation']}: the table's resource "
                           f"{template!r} needs the parameter {name}, which the request lacks")
        return str(value).lower() if transform == "lower" else str(value)

    return re.sub(r"\{([^}]+)\}", fill, template)


def needs_of(call: dict, known: Known) -> List[Need]:
    """The requests AWS authorizes for one call, the implied ones included."""
    key = f"{call['service_name']}.{call['operation']}"
    entry = OPERATIONS.get(key)
    if entry is None:
        raise Unmapped(f"{key} is not in the table: add {key} to the table ({TABLE}), with its "
                       "source")
    needs = [Need(n["action"], _resource(n["resource"], call, known),
                  _context(n["context"], call["params"],
                           lambda template: _resource(template, call, known)),
                  why=f"{key}: {entry['source']}")
             for n in entry["needs"]]
    for name in entry.get("implies", ()):
        needs += RULES[name](call, known)
    return needs


def _resource_policy(need: Need, deployment) -> Optional[dict]:
    if need.resource_policy is not None:
        return need.resource_policy
    if need.action.startswith("s3:"):
        bucket = need.resource.split(":::", 1)[-1].split("/", 1)[0]
        return deployment.bucket_policies.get(bucket)
    if need.action.startswith("kms:"):
        # KMS: a key's policy must allow (or delegate to IAM); a key outside the template has
        # none the tests know, and KMS refuses.
        return deployment.key_policies.get(need.resource, {"Version": "2012-10-17",
                                                            "Statement": []})
    return None


class Checker:
    """Decisions for one deployment, cached by (role, action, resource, context)."""

    def __init__(self, deployment):
        self.deployment = deployment
        self._decisions: Dict[Tuple, engine_module.Decision] = {}

    def decide(self, role_name: str, need: Need) -> engine_module.Decision:
        context = {**TRANSPORT, **{k: v for k, v in need.context.items() if v is not None}}
        key = (role_name, need.action, need.resource, json.dumps(context, sort_keys=True),
               json.dumps(need.resource_policy, sort_keys=True), need.resource_account)
        if key not in self._decisions:
            role = self.deployment.roles[role_name]
            self._decisions[key] = engine_module.engine().evaluate(engine_module.simulation(
                role.principal, need.action, need.resource,
                need.resource_account or self.deployment.account, context, role.policies,
                _resource_policy(need, self.deployment)))
        return self._decisions[key]

    def denials(self, calls: Iterable[dict], caller: str) -> List[Denial]:
        """One denial per request of `calls` (made by the `caller` role) AWS would refuse."""
        known = Known(self.deployment)
        messages, seen = [], set()
        for call in calls:
            name = f"{call['service_name']}.{call['operation']}"
            try:
                needs = needs_of(call, known)
            except LookupError as error:
                messages.append(Denial(None, f"{name}: {error}"))
                continue
            for need in needs:
                role = need.role or caller
                try:
                    decision = self.decide(role, need)
                except engine_module.EngineError as error:
                    messages.append(Denial(None, f"{name}: the engine refuses {need.action} on {need.resource} "
                                    f"with context {json.dumps(need.context)}: {error} "
                                    f"(fix the table or rule: {need.why})"))
                    continue
                if decision.allowed:
                    continue
                message = self.message(name, call, need, role, decision)
                if message not in seen:
                    seen.add(message)
                    messages.append(Denial(need.action, message))
        return messages

    def message(self, name: str, call: dict, need: Need, role_name: str,
                decision: engine_module.Decision) -> str:
        role = self.deployment.roles[role_name]
        context = {**TRANSPORT, **need.context}
        lines = [f"{name} would be refused by AWS: action {need.action} on resource "
                 f"{need.resource} is {decision.result} for the {role_name} role "
                 f"({role.logical_id}); request context {json.dumps(context, sort_keys=True)}",
                 f"    why the request needs it: {need.why}"]
        if decision.near_misses:
            lines.append("    statements naming the action and resource whose conditions fail: "
                         + "; ".join(decision.near_misses))
        if decision.decisive:
            lines.append("    decided by: " + "; ".join(decision.decisive))
        # A same-account request needs no resource policy's allow, but for a KMS key's.
        if decision.resource_result == "ExplicitlyDenied" or (
                need.action.startswith("kms:") and decision.resource_result not in (
                    None, "Allowed", "AllowedForAccount")):
            lines.append(f"    the resource policy's answer: {decision.resource_result}")
        tokens = sorted({t for p in role.policies for t in re.findall(
            r"UNRESOLVED\([^)]*\)", json.dumps(p["policy"]))})
        if tokens:
            lines.append("    the role's policies name references the fake deployment does not "
                         "bind: " + ", ".join(tokens))
        if call.get("status"):
            code = call.get("error_code")
            lines.append(f"    the test's answer was HTTP {call['status']}"
                         + (f" {code}" if code and code != str(call["status"]) else ""))
        return "\n".join(lines)
