"""Training stack: job roles with only what jobs do, the image asset, and the SSM parameters."""

import json

EXPECTED_PARAMETERS = {
    "region", "job-name-prefix", "data-bucket", "data-prefix", "pretrained-prefix", "output-prefix",
    "checkpoint-prefix", "kms-key-arn", "efs-id", "efs-data-path", "datasync-task-arn", "subnet-ids",
    "security-group-ids", "training-role-arn", "staging-role-arn", "training-image-uri",
}
FSX_PARAMETERS = {"fsx-id", "fsx-mount-name", "fsx-data-path"}


def of_type(raw, kind):
    return {k: v for k, v in raw["Resources"].items() if v["Type"] == kind}


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


def test_training_role_reads_data_and_writes_only_outputs_and_checkpoints(default_app):
    statements = statements_of(default_app.raw("-training"), "TrainingRole")
    assert actions_on(statements, "/datasets/coco2017/*") == {"s3:GetObject"}
    assert actions_on(statements, "/pretrained/*") == {"s3:GetObject"}
    for prefix in ("/jobs/*", "/checkpoints/*"):
        assert {"s3:PutObject", "s3:GetObject"} <= actions_on(statements, prefix)
    every_action = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not any(a.endswith("*") for a in every_action), every_action
    assert not any(a.startswith(("iam:", "sagemaker:", "fsx:Create", "elasticfilesystem:Create")) for a in every_action)


def test_staging_role_writes_the_dataset_prefix(default_app):
    statements = statements_of(default_app.raw("-training"), "DataStagingRole")
    assert "s3:PutObject" in actions_on(statements, "/datasets/coco2017/*")
    assert actions_on(statements, "/checkpoints/*") == set()


def test_job_roles_trust_sagemaker_of_this_account_only(default_app):
    for role in of_type(default_app.raw("-training"), "AWS::IAM::Role").values():
        statement, = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}
        assert "aws:SourceAccount" in statement["Condition"]["StringEquals"]
        source_arn = json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"])
        assert ":sagemaker:" in source_arn and "AWS::AccountId" in source_arn
        assert not role["Properties"].get("ManagedPolicyArns")


def test_network_interfaces_only_in_training_subnets_and_vpc(default_app):
    statements = statements_of(default_app.raw("-training"), "TrainingRole")
    create = next(s for s in statements if s["Action"] == "ec2:CreateNetworkInterface")
    text = json.dumps(create["Resource"])
    assert text.count(":subnet/") == 2 and ":security-group/" in text
    delete = next(s for s in statements if "ec2:DeleteNetworkInterface" in s["Action"])
    assert "ec2:Vpc" in delete["Condition"]["ArnEquals"]


def test_image_asset_is_built_from_training_code(default_app):
    manifest = next(default_app.outdir.glob("*training.assets.json"))
    images = json.loads(manifest.read_text())["dockerImages"]
    source, = [image["source"] for image in images.values()]
    assert (default_app.outdir / source["directory"] / "Dockerfile").is_file()
    assert source["platform"] == "linux/amd64"


def test_ssm_parameters_publish_every_launcher_value_under_the_deployment_path(default_app, variant_app):
    for app, path, expected in ((default_app, "/maskrcnn/", EXPECTED_PARAMETERS | FSX_PARAMETERS),
                                (variant_app, "/mrcnn-dev/", EXPECTED_PARAMETERS | FSX_PARAMETERS)):
        parameters = {p["Properties"]["Name"]: p["Properties"]["Value"]
                      for p in of_type(app.raw("-training"), "AWS::SSM::Parameter").values()}
        assert {name.removeprefix(path) for name in parameters} == expected
        assert parameters[path + "data-prefix"] == "datasets/coco2017/"
        assert parameters[path + "efs-data-path"] == "/datasets/coco2017"
        assert parameters[path + "job-name-prefix"] == path.strip("/")
        fsx_path = parameters[path + "fsx-data-path"]["Fn::Join"][1]
        assert fsx_path[0] == "/" and fsx_path[-1] == "/datasets/coco2017"
    variant = {p["Properties"]["Name"]: p["Properties"]["Value"]
               for p in of_type(variant_app.raw("-training"), "AWS::SSM::Parameter").values()}
    assert variant["/mrcnn-dev/efs-id"] == "fs-0123456789abcdef0"
