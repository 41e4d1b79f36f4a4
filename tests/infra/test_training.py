"""Training stack: job roles with only what jobs do, the image asset, and the SSM parameters."""

import json

from maskrcnn_contract import ssm
from maskrcnn_launcher.deployment import settings

from tests.infra.templates import actions, actions_on, of_type, statements_of


def test_training_role_reads_data_and_writes_only_outputs_and_checkpoints(default_app):
    statements = statements_of(default_app.deployment, "TrainingJobRole")
    # Every dataset, not the raw exports of the imports prefix.
    assert actions_on(statements, "/datasets/*") == {"s3:GetObject"}
    assert actions_on(statements, "/imports/*") == set()
    assert actions_on(statements, "/pretrained/*") == {"s3:GetObject"}
    for prefix in ("/jobs/*", "/checkpoints/*"):
        assert {"s3:PutObject", "s3:GetObject"} <= actions_on(statements, prefix)
    every_action = actions(statements)
    assert not any(a.endswith("*") for a in every_action), every_action
    assert not any(a.startswith(("iam:", "sagemaker:", "fsx:Create", "elasticfilesystem:Create")) for a in every_action)


def test_staging_role_reads_the_imports_and_writes_the_datasets_and_pretrained_prefixes(
        default_app):
    statements = statements_of(default_app.deployment, "TrainingStagingRole")
    assert "s3:PutObject" in actions_on(statements, "/datasets/*")
    # It converts the exports users upload, and writes none.
    assert actions_on(statements, "/imports/*") == {"s3:GetObject"}
    # The staging job also uploads the backbone checkpoint.
    assert "s3:PutObject" in actions_on(statements, "/pretrained/*")
    assert actions_on(statements, "/checkpoints/*") == set()
    listing, = [s for s in statements if s["Action"] == "s3:ListBucket"]
    assert "pretrained/*" in listing["Condition"]["StringLike"]["s3:prefix"]


def test_job_roles_trust_sagemaker_of_this_account_only(default_app):
    roles = {k: r for k, r in of_type(default_app.deployment, "AWS::IAM::Role").items()
             if k.startswith(("TrainingJobRole", "TrainingStagingRole"))}
    assert len(roles) == 2
    for role in roles.values():
        statement, = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}
        assert "aws:SourceAccount" in statement["Condition"]["StringEquals"]
        source_arn = json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"])
        assert ":sagemaker:" in source_arn and "AWS::AccountId" in source_arn
        assert not role["Properties"].get("ManagedPolicyArns")


def test_model_role_reads_models_writes_only_data_capture_and_pulls_the_inference_dlc(default_app):
    """Rule IAM-2: the model role reads model.tar.gz under the output prefix, writes only data
    capture below it, pulls only the inference DLC, logs to its endpoints' groups, and attaches
    to the VPC like the job roles (plus ec2:DescribeVpcEndpoints for hosting)."""
    statements = statements_of(default_app.deployment, "TrainingModelRole")
    assert actions_on(statements, "/jobs/*") == {"s3:GetObject"}
    assert actions_on(statements, "/jobs/data-capture/*") == {"s3:PutObject", "s3:AbortMultipartUpload"}
    for prefix in ("/datasets/coco2017/*", "/pretrained/*", "/checkpoints/*"):
        assert actions_on(statements, prefix) == set(), prefix
    assert actions_on(statements, ":repository/tensorflow-inference") == {
        "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"}
    assert actions_on(statements, "/aws/sagemaker/Endpoints/maskrcnn-*:*") >= {"logs:PutLogEvents"}
    assert {"kms:Decrypt", "kms:GenerateDataKey"} <= actions(statements)
    create = next(s for s in statements if s["Action"] == "ec2:CreateNetworkInterface")
    assert json.dumps(create["Resource"]).count(":subnet/") == 2
    assert "ec2:DescribeVpcEndpoints" in actions(statements)
    every_action = actions(statements)
    assert not any(a.endswith("*") for a in every_action), every_action
    assert not any(a.startswith(("iam:", "sagemaker:")) for a in every_action)
    # The SSM parameter the deploy path passes to CreateModel is this role.
    role_id = next(k for k in of_type(default_app.deployment, "AWS::IAM::Role") if k.startswith("TrainingModelRole"))
    assert published(default_app, "/maskrcnn/")["model-role-arn"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_network_interfaces_only_in_training_subnets_and_vpc(default_app):
    statements = statements_of(default_app.deployment, "TrainingJobRole")
    create = next(s for s in statements if s["Action"] == "ec2:CreateNetworkInterface")
    text = json.dumps(create["Resource"])
    assert text.count(":subnet/") == 2 and ":security-group/" in text
    delete = next(s for s in statements if "ec2:DeleteNetworkInterface" in s["Action"])
    assert "ec2:Vpc" in delete["Condition"]["ArnEquals"]


def test_image_asset_holds_the_training_code_and_the_contract_only(default_app):
    manifest = next(default_app.outdir.glob("maskrcnn.assets.json"))
    images = json.loads(manifest.read_text())["dockerImages"]
    source, = [image["source"] for image in images.values()]
    context = default_app.outdir / source["directory"]
    assert source["dockerFile"] == "training_code/Dockerfile" and source["platform"] == "linux/amd64"
    assert (context / "training_code" / "Dockerfile").is_file()
    assert (context / "training_code" / "maskrcnn_job" / "training" / "trainer.py").is_file()
    # The local tools stay out of the image: they run only on a developer's machine.
    from stacks.training import REPO_ROOT

    assert (REPO_ROOT / "training_code" / "maskrcnn_local" / "local_run.py").is_file()
    assert not (context / "training_code" / "maskrcnn_local").exists()
    assert (context / "contract" / "pyproject.toml").is_file()
    assert (context / "contract" / "maskrcnn_contract" / "hyperparameters.py").is_file()
    # The rest of the repository stays out of the build context (.dockerignore).
    assert sorted(p.name for p in context.iterdir()) == [".dockerignore", "contract", "horovod",
                                                         "training_code"]
    assert sorted(p.name for p in (context / "horovod").iterdir()) == [
        "build_wheel.sh", "horovod-0.28.1-tf2.19.patch"]
    assert not (context / "training_code" / "dlc-lock").exists()
    assert not list(context.rglob("__pycache__")) and not list(context.rglob("*.egg-info"))
    # The local environment's requirements stay out: the toolkit would pip-install them per job.
    assert not (context / "training_code" / "requirements.txt").exists()


def test_image_build_adds_to_the_deep_learning_container_without_reinstalling_it():
    """Every pip install in the Dockerfile (tests/dockerfile.py reads each installer a RUN line
    may name, and fails on one it cannot read) either pins the DLC's packages
    (-c dlc-constraints.txt) or installs without dependencies; none names TensorFlow; the one
    requirements file installed with its dependencies is image-requirements.txt, which names no
    package the DLC has; no system package is installed."""
    import re

    from stacks.training import REPO_ROOT
    from tests import dockerfile

    code = REPO_ROOT / "training_code"
    installs = dockerfile.pip_installs(code / "Dockerfile")
    # image-requirements, Model Garden, Horovod, the contract
    assert len(installs) == 4, installs
    for arguments in installs:
        def values(option, arguments=arguments):
            return [value for name, value in zip(arguments, arguments[1:], strict=False)
                    if name == option]

        assert "/tmp/dlc-constraints.txt" in values("-c") or "--no-deps" in arguments, arguments
        assert not any("tensorflow" in a for a in arguments), arguments
        if "--no-deps" not in arguments:
            assert values("-r") in ([], ["/tmp/image-requirements.txt"]), arguments
    assert dockerfile.system_installs(code / "Dockerfile") == []
    constraints = (code / "dlc-constraints.txt").read_text()
    assert "\ntensorflow==2.21.0\n" in constraints and "tf-models-official" not in constraints

    def names(text):
        return {re.split(r"[=<>!~\[ ]", line.strip())[0].lower() for line in text.splitlines()
                if line.strip() and not line.startswith("#")}

    added = names((code / "image-requirements.txt").read_text())
    assert added and not added & names(constraints), added & names(constraints)


def published(app, path):
    return {p["Properties"]["Name"].removeprefix(path): p["Properties"]["Value"]
            for p in of_type(app.deployment, "AWS::SSM::Parameter").values()}


def test_synthesized_parameters_are_exactly_what_the_launcher_reads(default_app, no_fsx_app,
                                                                    variant_app):
    # The default app has no MLflow tracking server (maskrcnn:mlflow), the variant has one.
    assert set(published(default_app, "/maskrcnn/")) == set(settings.parameter_names()) - set(
        ssm.MLFLOW)
    assert set(published(variant_app, "/mrcnn-dev/")) == set(settings.parameter_names())
    without_fsx = set(published(no_fsx_app, "/maskrcnn/"))
    assert without_fsx == set(ssm.REQUIRED)
    # What the launcher needs from a deployment without FSx: all it requires, none missing.
    settings.from_parameters("/maskrcnn", {name: "true" if name in ssm.BOOLEANS else "x/"
                                           for name in without_fsx})


def test_ssm_parameters_publish_every_launcher_value_under_the_deployment_path(default_app, variant_app):
    for app, path, expected in ((default_app, "/maskrcnn/", set(ssm.ALL) - set(ssm.MLFLOW)),
                                (variant_app, "/mrcnn-dev/", set(ssm.ALL))):
        parameters = {path + name: value for name, value in published(app, path).items()}
        assert {name.removeprefix(path) for name in parameters} == expected
        assert parameters[path + "datasets-prefix"] == "datasets/"
        assert parameters[path + "imports-prefix"] == "imports/"
        assert parameters[path + "efs-datasets-path"] == "/datasets"
        assert parameters[path + "efs-pretrained-path"] == "/pretrained"
        assert parameters[path + "job-name-prefix"] == path.strip("/")
        for name, expected in (("fsx-datasets-path", "/datasets"),
                               ("fsx-pretrained-path", "/pretrained")):
            fsx_path = parameters[path + name]["Fn::Join"][1]
            assert fsx_path[0] == "/" and fsx_path[-1] == expected
        # Every DataSync task of the deployment, comma-separated.
        delimiter, arns = parameters[path + "datasync-task-arns"]["Fn::Join"]
        tasks = sorted(of_type(app.deployment, "AWS::DataSync::Task"))
        assert arns[1] == "," and sorted(arns[i]["Fn::GetAtt"][0] for i in (0, 2)) == tasks
    # Whether jobs can reach the internet: the launcher refuses a staging job without it (SM-15).
    assert published(default_app, "/maskrcnn/")["internet-egress"] == "true"
    assert published(variant_app, "/mrcnn-dev/")["internet-egress"] == "false"  # nat_gateways=0
    variant = {p["Properties"]["Name"]: p["Properties"]["Value"]
               for p in of_type(variant_app.deployment, "AWS::SSM::Parameter").values()}
    assert variant["/mrcnn-dev/efs-id"] == "fs-0123456789abcdef0"


def test_the_dlc_constraints_are_the_dlcs_own_lock(capsys):
    """Rule DLC-3: dlc-constraints.txt is every package of the DLC's uv.lock at its version,
    regenerated by scripts/dlc_constraints.py (a hand edit, or a lock replaced without
    regenerating, fails here)."""
    from scripts import dlc_constraints

    assert dlc_constraints.main(["--check"]) == 0, capsys.readouterr().err
    locked = dlc_constraints.locked_packages(dlc_constraints.LOCK_DIR / "uv.lock")
    assert locked["tensorflow"] == "2.21.0" and locked["sagemaker-training"] == "5.1.1"
    assert "tensorflow-dlc" not in locked  # the lock's own project
