"""Notebook: private, encrypted, no root, IMDSv2; a role that launches jobs into the VPC only."""

import json

from stacks.notebooks_asset import CONTRACT_PACKAGE_DIR, NOTEBOOKS_DIR
from tests.infra.templates import actions, actions_on, data_key, of_type, statements_of


def test_notebook_instance_is_private_encrypted_without_root_on_imdsv2(default_app):
    raw = default_app.deployment
    (_, notebook), = of_type(raw, "AWS::SageMaker::NotebookInstance").items()
    props = notebook["Properties"]
    assert props["DirectInternetAccess"] == "Disabled"
    assert props["RootAccess"] == "Disabled"
    assert props["PlatformIdentifier"] == "notebook-al2023-v1"
    assert props["InstanceMetadataServiceConfiguration"] == {"MinimumInstanceMetadataServiceVersion": "2"}
    key_id, _ = data_key(raw)
    assert props["KmsKeyId"] == {"Ref": key_id}
    assert props["SubnetId"]["Ref"].startswith("NetworkVpcprivateSubnet1")
    assert props["SecurityGroupIds"] == [{"Fn::GetAtt": [next(
        k for k in of_type(raw, "AWS::EC2::SecurityGroup") if k.startswith("NetworkNotebookSecurityGroup")),
        "GroupId"]}]
    assert "DefaultCodeRepository" not in props
    # No physical names: a replacing change creates the new instance before deleting the old.
    assert "NotebookInstanceName" not in props
    (_, lifecycle), = of_type(raw, "AWS::SageMaker::NotebookInstanceLifecycleConfig").items()
    assert "NotebookInstanceLifecycleConfigName" not in lifecycle["Properties"]


def test_notebook_url_uses_the_console_of_the_partition(default_app):
    output = next(o for k, o in default_app.deployment["Outputs"].items() if k == "NotebookUrl")
    text = json.dumps(output["Value"])
    assert '"Fn::FindInMap": [' in text and '"AWS::Partition"' in text
    mapping = next(m for k, m in default_app.deployment["Mappings"].items() if k.startswith("NotebookConsoleDomain"))
    assert mapping["aws-cn"] == {"domain": "console.amazonaws.cn"}
    assert mapping["aws"] == {"domain": "console.aws.amazon.com"}


def lifecycle_script(raw, hook):
    (_, config), = of_type(raw, "AWS::SageMaker::NotebookInstanceLifecycleConfig").items()
    content = config["Properties"][hook][0]["Content"]["Fn::Base64"]
    return content if isinstance(content, str) else "".join(
        part if isinstance(part, str) else "<token>" for part in content["Fn::Join"][1])


def test_lifecycle_mounts_efs_with_tls_and_fsx_and_copies_notebooks_once(default_app):
    raw = default_app.deployment
    on_start = lifecycle_script(raw, "OnStart")
    assert "mount -t efs -o tls" in on_start
    assert "mount -t lustre" in on_start
    assert 'SSM_PATH="/maskrcnn"' in on_start
    assert "@@" not in on_start and "exit 0" in on_start
    on_create = lifecycle_script(raw, "OnCreate")
    assert "aws s3 cp" in on_create and "unzip -q -n" in on_create


def test_notebook_role_passes_only_the_job_and_model_roles_and_only_to_sagemaker(default_app):
    """Rule IAM-3: the notebook passes the two job roles and the model role, each only to
    SageMaker, and no other role; it may create no role but the scaling service-linked role."""
    statements = statements_of(default_app.deployment, "NotebookRole")
    passes = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert len(passes) == 2
    for statement in passes:
        assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    # Logical ids are the construct path plus an 8-digit hash.
    passed = [[r["Fn::GetAtt"][0][:-8] for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])]
              for s in passes]
    assert sorted(map(sorted, passed)) == [["TrainingJobRole", "TrainingStagingRole"], ["TrainingModelRole"]]
    allowed = actions(statements)
    assert "sagemaker:*" not in allowed
    assert {a for a in allowed if a.startswith("iam:")} == {"iam:PassRole", "iam:CreateServiceLinkedRole"}
    assert not any(a.endswith("*") for a in allowed), allowed


def test_jobs_can_only_be_created_in_the_training_subnets_and_group(default_app):
    statements = statements_of(default_app.deployment, "NotebookRole")
    create, = [s for s in statements if s["Action"] == "sagemaker:CreateTrainingJob"]
    assert create["Condition"]["Null"] == {"sagemaker:VpcSubnets": "false", "sagemaker:VpcSecurityGroupIds": "false"}
    scoped = create["Condition"]["ForAllValues:StringEquals"]
    # Rule SM-6: exactly the private subnets and the training group, the ones the launcher sends.
    raw = default_app.deployment
    private = sorted(k for k in of_type(raw, "AWS::EC2::Subnet") if k.startswith("NetworkVpcprivate"))
    assert sorted(s["Ref"] for s in scoped["sagemaker:VpcSubnets"]) == private and len(private) == 2
    group, = scoped["sagemaker:VpcSecurityGroupIds"]
    assert group["Fn::GetAtt"][0].startswith("NetworkTrainingSecurityGroup")
    published = {p["Properties"]["Name"]: p["Properties"]["Value"]
                 for p in of_type(raw, "AWS::SSM::Parameter").values()}
    assert published["/maskrcnn/security-group-ids"] == group
    assert sorted(s["Ref"] for s in published["/maskrcnn/subnet-ids"]["Fn::Join"][1][::2]) == private
    assert json.dumps(create["Resource"]).count("training-job/maskrcnn-*") == 1


def test_tuning_jobs_are_the_deployments_names_only_and_their_candidates_in_the_training_vpc(
        default_app):
    """Rule TUN-5: CreateHyperParameterTuningJob only for '<prefix>-*', with the training
    definition's subnets and group (the same conditions as CreateTrainingJob, SM-6); following
    and stopping only those tuning jobs; the candidates' role passed as a launch's is."""
    statements = statements_of(default_app.deployment, "NotebookRole")
    create, = [s for s in statements if s["Action"] == "sagemaker:CreateHyperParameterTuningJob"]
    training, = [s for s in statements if s["Action"] == "sagemaker:CreateTrainingJob"]
    assert create["Condition"]["Null"] == training["Condition"]["Null"]
    assert create["Condition"]["ForAllValues:StringEquals"] == \
        training["Condition"]["ForAllValues:StringEquals"]
    assert json.dumps(create["Resource"]).count("hyper-parameter-tuning-job/maskrcnn-*") == 1
    follow, = [s for s in statements
               if "sagemaker:ListTrainingJobsForHyperParameterTuningJob" in s["Action"]]
    assert set(follow["Action"]) == {"sagemaker:DescribeHyperParameterTuningJob",
                                     "sagemaker:ListTrainingJobsForHyperParameterTuningJob",
                                     "sagemaker:StopHyperParameterTuningJob"}
    assert json.dumps(follow["Resource"]).count("hyper-parameter-tuning-job/maskrcnn-*") == 1
    assert not [s for s in statements if "HyperParameterTuning" in json.dumps(s["Action"])
                and "*" in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])]


def test_notebook_reads_its_parameters_and_runs_and_follows_every_datasync_task(default_app):
    raw = default_app.deployment
    statements = statements_of(raw, "NotebookRole")
    ssm, = [s for s in statements if "ssm:GetParametersByPath" in s["Action"]]
    assert json.dumps(ssm["Resource"]).count("parameter/maskrcnn") == 2
    tasks = sorted(of_type(raw, "AWS::DataSync::Task"))
    assert len(tasks) == 2
    start, = [s for s in statements if "datasync:StartTaskExecution" in s["Action"]]
    assert {"datasync:DescribeTask", "datasync:ListTaskExecutions"} <= set(start["Action"])
    assert sorted(r["Fn::GetAtt"][0] for r in start["Resource"]) == tasks
    follow, = [s for s in statements if s["Action"] == "datasync:DescribeTaskExecution"]
    executions = [r["Fn::Join"][1] for r in follow["Resource"]]
    assert sorted(parts[0]["Fn::GetAtt"][0] for parts in executions) == tasks
    assert all(parts[1] == "/execution/*" for parts in executions)


def test_notebook_lists_and_reads_the_pretrained_prefix(default_app):
    statements = statements_of(default_app.deployment, "NotebookRole")
    assert actions_on(statements, "/pretrained/*") == {"s3:GetObject"}
    listing, = [s for s in statements if s["Action"] == "s3:ListBucket"]
    assert "pretrained/*" in listing["Condition"]["StringLike"]["s3:prefix"]


def test_the_notebook_role_lists_endpoints_and_describes_alarms_on_star_alone(default_app):
    """List actions are authorized on '*' only (docs/aws-rules.md IAM-1): the CLI's `endpoints`
    and inference.ipynb list the endpoints; the alarms target tracking makes are described."""
    statements = statements_of(default_app.deployment, "NotebookRole")
    on_star = {s["Action"] for s in statements if s["Resource"] == "*" and isinstance(s["Action"], str)}
    assert {"sagemaker:ListEndpoints", "cloudwatch:DescribeAlarms"} <= on_star
    alarms = next(s for s in statements if "cloudwatch:PutMetricAlarm" in s["Action"])
    assert set(alarms["Action"]) == {"cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"}
    assert "TargetTracking-endpoint/maskrcnn-*" in json.dumps(alarms["Resource"])


def test_users_may_upload_and_read_inference_samples(default_app):
    """inference.ipynb reads s3://<bucket>/samples/ by default: the notebook role's prefix."""
    statements = statements_of(default_app.deployment, "NotebookRole")
    assert {"s3:GetObject", "s3:PutObject"} <= actions_on(statements, "/samples/*")
    listing, = [s for s in statements if s["Action"] == "s3:ListBucket"]
    assert "samples/*" in listing["Condition"]["StringLike"]["s3:prefix"]


def test_git_repository_gets_a_secret_in_the_form_sagemaker_reads(no_fsx_app):
    raw = no_fsx_app.deployment
    (_, secret), = of_type(raw, "AWS::SecretsManager::Secret").items()
    generator = secret["Properties"]["GenerateSecretString"]
    assert json.loads(generator["SecretStringTemplate"]) == {"username": "ml-bot"}
    assert generator["GenerateStringKey"] == "password"
    (repo_id, repo), = of_type(raw, "AWS::SageMaker::CodeRepository").items()
    git = repo["Properties"]["GitConfig"]
    assert git["RepositoryUrl"] == "https://github.com/acme/maskrcnn-notebooks.git" and git["Branch"] == "main"
    assert git["SecretArn"] == {"Ref": next(iter(of_type(raw, "AWS::SecretsManager::Secret")))}
    (_, notebook), = of_type(raw, "AWS::SageMaker::NotebookInstance").items()
    assert notebook["Properties"]["DefaultCodeRepository"] == {"Fn::GetAtt": [repo_id, "CodeRepositoryName"]}
    statements = statements_of(raw, "NotebookRole")
    assert any(s["Action"] == "secretsmanager:GetSecretValue" for s in statements)


def test_notebooks_asset_ships_the_contract_package_whole_beside_the_notebooks(default_app):
    manifest = json.loads(next(default_app.outdir.glob("maskrcnn.assets.json")).read_text())
    shipped, = [default_app.outdir / f["source"]["path"] for f in manifest["files"].values()
                if (default_app.outdir / f["source"]["path"] / "maskrcnn_launcher").is_dir()]
    assert (shipped / "README.md").read_text() == (NOTEBOOKS_DIR / "README.md").read_text()
    modules = sorted(p.name for p in CONTRACT_PACKAGE_DIR.glob("*.py"))
    assert "__init__.py" in modules and "ssm.py" in modules
    assert sorted(p.name for p in (shipped / "maskrcnn_contract").iterdir()) == modules
    for module in modules:
        assert (shipped / "maskrcnn_contract" / module).read_text() == \
            (CONTRACT_PACKAGE_DIR / module).read_text()
    assert not (shipped / "maskrcnn_job").exists()


def _resources(statement):
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    return [json.dumps(r) for r in resources]


def test_hosting_resources_only_under_the_prefix_and_models_only_in_the_training_vpc(default_app):
    """Rule IAM-4: models, endpoint configurations and endpoints are this deployment's
    ('maskrcnn-...'), and a model attaches only to the training subnets and security group."""
    statements = statements_of(default_app.deployment, "NotebookRole")
    # Not sagemaker:ListEndpoints, a List action that takes '*' alone (IAM-1), nor the registry's
    # model packages (tests/infra/test_registry.py).
    hosting = [s for s in statements
               if any(a.startswith("sagemaker:") and ("Endpoint" in a or "Model" in a or "Tags" in a)
                      and not a.startswith("sagemaker:List") and "ModelPackage" not in a
                      for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
               and not any("training-job/" in r for r in _resources(s))]
    assert {"sagemaker:CreateModel", "sagemaker:DeleteModel", "sagemaker:CreateEndpointConfig",
            "sagemaker:DeleteEndpointConfig", "sagemaker:CreateEndpoint", "sagemaker:DeleteEndpoint",
            "sagemaker:DescribeEndpoint", "sagemaker:InvokeEndpoint", "sagemaker:AddTags"} <= actions(hosting)
    for statement in hosting:
        for resource in _resources(statement):
            assert any(f":{kind}/maskrcnn-*" in resource for kind in ("model", "endpoint-config", "endpoint")), \
                (statement.get("Sid"), resource)
    create, = [s for s in statements if s["Action"] == "sagemaker:CreateModel"]
    assert _resources(create) == [r for r in _resources(create) if ":model/maskrcnn-*" in r]
    assert create["Condition"]["Null"] == {"sagemaker:VpcSubnets": "false", "sagemaker:VpcSecurityGroupIds": "false"}
    scoped = create["Condition"]["ForAllValues:StringEquals"]
    assert len(scoped["sagemaker:VpcSubnets"]) == 2 and len(scoped["sagemaker:VpcSecurityGroupIds"]) == 1
    # The model's group is the training group, as for jobs.
    job, = [s for s in statements if s["Action"] == "sagemaker:CreateTrainingJob"]
    assert scoped == job["Condition"]["ForAllValues:StringEquals"]


def test_endpoint_scaling_is_limited_to_sagemaker_variants_and_its_service_linked_role(default_app):
    """Rule IAM-5: Application Auto Scaling's writes only for SageMaker variants' instance counts,
    the alarms target tracking makes for this deployment's endpoints, and only the SageMaker
    scaling service-linked role may be created."""
    statements = statements_of(default_app.deployment, "NotebookRole")
    writes, = [s for s in statements if "application-autoscaling:RegisterScalableTarget" in s["Action"]]
    assert set(writes["Action"]) == {"application-autoscaling:RegisterScalableTarget",
                                     "application-autoscaling:DeregisterScalableTarget",
                                     "application-autoscaling:PutScalingPolicy",
                                     "application-autoscaling:DeleteScalingPolicy"}
    assert writes["Condition"] == {"StringEquals": {
        "application-autoscaling:service-namespace": "sagemaker",
        "application-autoscaling:scalable-dimension": "sagemaker:variant:DesiredInstanceCount"}}
    reads, = [s for s in statements if "application-autoscaling:DescribeScalableTargets" in s["Action"]]
    assert all(a.startswith("application-autoscaling:Describe") for a in reads["Action"])
    # The other statements that create alarms are the idle alarms' (CW-3).
    alarms, = [s for s in statements if "cloudwatch:PutMetricAlarm" in s["Action"]
               and s.get("Sid") != "IdleAlarmsNotifyTheDeploymentsTopicOnly"]
    assert all(":alarm:TargetTracking-endpoint/maskrcnn-*" in r for r in _resources(alarms))
    slr, = [s for s in statements if s["Action"] == "iam:CreateServiceLinkedRole"]
    assert slr["Condition"] == {"StringLike": {"iam:AWSServiceName": "sagemaker.application-autoscaling.amazonaws.com"}}
    resource, = _resources(slr)
    assert resource.endswith('role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/'
                             'AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"]]}')
    # What Application Auto Scaling requires of its caller for SageMaker, on this deployment's endpoints.
    assert {"sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpointWeightsAndCapacities"} <= \
        actions_on(statements, ":endpoint/maskrcnn-*")
    assert "sagemaker:DescribeEndpointConfig" in actions_on(statements, ":endpoint-config/maskrcnn-*")


def test_warm_pools_are_capped_and_only_ended_for_the_deployments_jobs(default_app):
    """Rule TRN-5: CreateTrainingJob carries at most the contract's keep-alive
    (sagemaker:KeepAlivePeriod, IfExists: a launch without a warm pool has no such key) beside
    the VPC conditions of SM-6; UpdateTrainingJob only for the deployment's jobs and only with a
    keep-alive of 0 (the key required, so no profiler or remote-debug update), the one way to end
    a warm pool (TRN-4)."""
    from maskrcnn_contract import job_io

    statements = statements_of(default_app.deployment, "NotebookRole")
    create, = [s for s in statements if s["Action"] == "sagemaker:CreateTrainingJob"]
    assert job_io.MAX_KEEP_ALIVE_SECONDS == 3600
    assert create["Condition"]["NumericLessThanEqualsIfExists"] == {
        "sagemaker:KeepAlivePeriod": str(job_io.MAX_KEEP_ALIVE_SECONDS)}
    assert set(create["Condition"]) == {"Null", "ForAllValues:StringEquals",
                                        "NumericLessThanEqualsIfExists"}
    update, = [s for s in statements if "sagemaker:UpdateTrainingJob" in s["Action"]]
    assert update["Action"] == "sagemaker:UpdateTrainingJob"
    assert update["Condition"] == {"NumericLessThanEquals": {"sagemaker:KeepAlivePeriod": "0"}}
    resource, = _resources(update)
    assert resource == _resources(create)[0] and resource.count("training-job/maskrcnn-*") == 1
