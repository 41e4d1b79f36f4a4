"""Reading synthesized CloudFormation templates in tests: resources by type, policies of a role,
a value as deployed in a region."""

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


ACCOUNT = "123456789012"  # the account evaluate() deploys to


def evaluate(node, template, region):
    """A CloudFormation value as deployed in `region`: Fn::Join, Fn::If on the template's
    conditions (Fn::Equals of AWS::Region, Fn::Or), Fn::FindInMap of its mappings, and the
    region's pseudo parameters."""
    china = region.startswith("cn-")
    pseudo = {"AWS::Region": region, "AWS::Partition": "aws-cn" if china else "aws",
              "AWS::URLSuffix": "amazonaws.com.cn" if china else "amazonaws.com",
              "AWS::AccountId": ACCOUNT}
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return [evaluate(n, template, region) for n in node]
    (function, argument), = node.items()
    if function == "Ref":
        return pseudo[argument]
    if function == "Fn::Join":
        return argument[0].join(evaluate(argument[1], template, region))
    if function == "Fn::If":
        name, if_true, if_false = argument
        chosen = if_true if evaluate(template["Conditions"][name], template, region) else if_false
        return evaluate(chosen, template, region)
    if function == "Fn::Equals":
        return evaluate(argument[0], template, region) == evaluate(argument[1], template, region)
    if function == "Fn::Or":
        return any(evaluate(a, template, region) for a in argument)
    if function == "Condition":
        return evaluate(template["Conditions"][argument], template, region)
    if function == "Fn::FindInMap":
        name, first, second = (evaluate(a, template, region) for a in argument)
        return template["Mappings"][name][first][second]
    raise AssertionError(f"unexpected {function}")
