"""The model registry in the stack: one model package group per deployment, named from it,
published to SSM, retained on destroy, and the notebook role's registry permissions on its
versions only (docs/aws-rules.md REG-1..REG-5)."""

import json
import re

from tests.infra.templates import of_type, only, statements_of

# CreateModelPackageGroup ModelPackageGroupName (botocore's model; the CloudFormation schema's
# AWS::SageMaker::ModelPackageGroup says the same): 1-63 characters.
GROUP_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def test_one_group_per_deployment_named_from_it_published_and_retained(default_app, variant_app):
    """REG-1, REG-5: `<deployment name>-models`, within SageMaker's name rules, its name under
    the deployment's SSM path (the launcher's zero configuration), kept by `cdk destroy` and on
    replacement."""
    for app in (default_app, variant_app):
        raw = app.deployment
        group_id, group = only(raw, "AWS::SageMaker::ModelPackageGroup")
        name = group["Properties"]["ModelPackageGroupName"]
        assert name == f"{app.deployment_name}-models" and GROUP_NAME.match(name)
        assert group["DeletionPolicy"] == group["UpdateReplacePolicy"] == "Retain"
        published, = [p for p in of_type(raw, "AWS::SSM::Parameter").values()
                      if p["Properties"]["Name"].endswith("/model-package-group")]
        assert published["Properties"]["Value"] == name
        assert group_id in published["DependsOn"]


def test_the_notebook_role_registers_and_decides_on_its_groups_versions_only(default_app):
    """REG-2, REG-3, REG-4: CreateModelPackage pending approval only, UpdateModelPackage to
    Approved or Rejected only, DescribeModelPackage, all on model-package/<group>/*;
    DescribeModelPackageGroup on the group; ListModelPackages (read-only) on '*'; nothing that
    deletes a version or the group."""
    statements = statements_of(default_app.deployment, "NotebookRole")
    name = f"{default_app.deployment_name}-models"
    registry = {s["Action"]: s for s in statements
                if str(s["Action"]).startswith("sagemaker:") and "ModelPackage" in str(s["Action"])}
    assert set(registry) == {"sagemaker:CreateModelPackage", "sagemaker:UpdateModelPackage",
                             "sagemaker:DescribeModelPackage",
                             "sagemaker:DescribeModelPackageGroup",
                             "sagemaker:ListModelPackages"}

    def resource(action):
        return json.dumps(registry[action]["Resource"]).rstrip('"]}')

    for action in ("sagemaker:CreateModelPackage", "sagemaker:UpdateModelPackage",
                   "sagemaker:DescribeModelPackage"):
        assert resource(action).endswith(f":model-package/{name}/*"), action
    assert resource("sagemaker:DescribeModelPackageGroup").endswith(
        f":model-package-group/{name}")
    assert registry["sagemaker:ListModelPackages"]["Resource"] == "*"
    assert registry["sagemaker:CreateModelPackage"]["Condition"] == {
        "StringEquals": {"sagemaker:ModelApprovalStatus": "PendingManualApproval"}}
    assert registry["sagemaker:UpdateModelPackage"]["Condition"] == {
        "StringEquals": {"sagemaker:ModelApprovalStatus": ["Approved", "Rejected"]}}
