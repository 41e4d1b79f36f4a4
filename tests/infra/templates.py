"""Reading synthesized CloudFormation templates in tests: resources by type, policies of a role."""

import json
import re


def of_type(raw, kind):
    """{logical id: resource} of one resource type."""
    return {k: v for k, v in raw["Resources"].items() if v["Type"] == kind}


def only(raw, kind):
    """(logical id, resource) of the one resource of that type."""
    found = list(of_type(raw, kind).items())
    assert len(found) == 1, [k for k, _ in found]
    return found[0]


def data_key(raw):
    """(logical id, resource) of the deployment's data key (stacks/key.py `deployment_key`, the
    stack's construct "Key"); the notification topic's own key (MonitoringTopicKey...) is not it."""
    found = [(k, v) for k, v in of_type(raw, "AWS::KMS::Key").items()
             if re.fullmatch(r"Key[0-9A-F]{8}", k)]
    assert len(found) == 1, sorted(of_type(raw, "AWS::KMS::Key"))
    return found[0]


def statements_of(raw, role_prefix):
    """All statements of the policies attached to the role whose logical id starts with the prefix."""
    role_id = next(k for k in of_type(raw, "AWS::IAM::Role") if k.startswith(role_prefix))
    statements = []
    for policy in of_type(raw, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def actions_on(statements, suffix):
    """Actions allowed on resources whose (flattened) text ends with `suffix`."""
    allowed = set()
    for s in statements:
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        if any(json.dumps(r).rstrip('"]}').endswith(suffix) for r in resources):
            allowed |= set([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    return allowed


def actions(statements):
    """Every action the statements name."""
    return {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
