"""Serving against the local AWS: a finished training job -> model, endpoint configuration,
endpoint, auto scaling -> invocations -> nothing. The requests are checked as sent; every refusal
happens before anything is created."""

import datetime
import io

import pytest
from maskrcnn_contract import job_io

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.runs import lookup
from maskrcnn_launcher.serving import endpoint_plan, endpoints, invocation
from maskrcnn_launcher.serving.endpoint_plan import DeployOptions, DeployRequestError
from maskrcnn_launcher.serving.endpoints import DeployError

from tests.launcher.conftest import (BUCKET, INFERENCE_IMAGES, JOB_PREFIX, captured,
                                     completed_training_job, model_key, shared_boto_session)
from tests.launcher.fake_aws import INVOCATION_ANSWER


def image_bytes(fmt: str = "JPEG") -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 30, 200)).save(out, fmt)
    return out.getvalue()


def session():
    return shared_boto_session()


def serving_resources(fake_aws, name: str) -> dict:
    """What exists under `name`: models, endpoint configurations, endpoints, scalable targets,
    scaling policies."""
    sm = fake_aws.client("sagemaker")
    scaling = fake_aws.client("application-autoscaling")
    rid = endpoint_plan.resource_id(name)
    return {
        "models": [m["ModelName"] for m in sm.list_models()["Models"]
                   if m["ModelName"].startswith(name)],
        "endpoint_configs": [c["EndpointConfigName"] for c in sm.list_endpoint_configs(
            NameContains=name)["EndpointConfigs"]],
        "endpoints": [e["EndpointName"] for e in sm.list_endpoints(NameContains=name)["Endpoints"]],
        "scalable_targets": [t["ResourceId"] for t in scaling.describe_scalable_targets(
            ServiceNamespace="sagemaker")["ScalableTargets"] if t["ResourceId"] == rid],
        "scaling_policies": [p["PolicyName"] for p in scaling.describe_scaling_policies(
            ServiceNamespace="sagemaker")["ScalingPolicies"] if p["ResourceId"] == rid],
        "alarms": [a["AlarmName"] for a in fake_aws.client("cloudwatch").describe_alarms(
            AlarmNamePrefix=name)["MetricAlarms"]],
    }


NOTHING = {"models": [], "endpoint_configs": [], "endpoints": [], "scalable_targets": [],
           "scaling_policies": [], "alarms": []}


def idle_alarm(fake_aws, name: str, hours: int = 8) -> dict:
    """The idle alarm's PutMetricAlarm as it must be sent (CW-3)."""
    return {
        "AlarmName": f"{name}-idle",
        "AlarmDescription": (
            f"Endpoint {name} has had no invocations for {hours} hours (or none since it was "
            f"deployed, if that is less) and bills its instances every hour until deleted: "
            f"python -m maskrcnn_launcher delete-endpoint {name}"),
        "Namespace": "AWS/SageMaker", "MetricName": "Invocations",
        "Dimensions": [{"Name": "EndpointName", "Value": name},
                       {"Name": "VariantName", "Value": "AllTraffic"}],
        "Statistic": "Sum", "Period": 3600, "EvaluationPeriods": hours,
        "DatapointsToAlarm": hours, "Threshold": 0.0,
        "ComparisonOperator": "LessThanOrEqualToThreshold", "TreatMissingData": "breaching",
        "AlarmActions": [fake_aws.parameters["notification-topic-arn"]]}


# moto's CreateEndpointConfig checks InstanceType against an enum list that predates the g5
# family (moto/sagemaker/models.py VALID_INSTANCE_TYPES), so a test that really creates an
# endpoint configuration uses a GPU type moto knows: g4dn has local NVMe (no KmsKeyId), p3 has
# none (KmsKeyId sent). The default, ml.g5.xlarge, is checked without a create call
# (test_the_default_instance_type_is_a_g5_without_a_volume_key).
GPU_WITH_INSTANCE_STORAGE = "ml.g4dn.xlarge"
GPU_WITHOUT_INSTANCE_STORAGE = "ml.p3.2xlarge"


@pytest.mark.parametrize("instance_type, volume_key", [
    (GPU_WITH_INSTANCE_STORAGE, False), (GPU_WITHOUT_INSTANCE_STORAGE, True)])
def test_deploy_sends_the_expected_requests_and_delete_returns_to_nothing(
        fake_aws, deployment, instance_type, volume_key):
    """EP-1, EP-2, EP-3, AAS-1, AAS-3: one name with the deployment's prefix; the region's GPU
    TensorFlow Serving image and the job's model.tar.gz, no environment; the model role and the
    deployment's VPC; EP-4: the deployment's key for the EBS volume only of a type without
    instance storage; CW-3: the idle alarm on the variant's invocations, to the deployment's
    topic; the variant registered by `endpoint/<name>/variant/AllTraffic` without a role, then
    target tracking on SageMakerVariantInvocationsPerInstance; AAS-2: delete removes the alarm,
    the policy and the target itself, then the endpoint, its configuration and model."""
    job = completed_training_job(fake_aws)
    before = len(fake_aws.serving_requests_since(0))
    name = f"{JOB_PREFIX}-endpoint-first-{instance_type.split('.')[1]}"
    options = DeployOptions(job_name=job, endpoint_name=name, instance_type=instance_type,
                            min_instances=1, max_instances=3, target_invocations=90)
    lines = []
    with captured(session(), "cloudwatch", "PutMetricAlarm") as alarms:
        result = endpoints.deploy(endpoint_plan.plan(deployment, options, session()), session(),
                               echo=lines.append)
    assert alarms == [idle_alarm(fake_aws, name)]
    sent = dict(fake_aws.serving_requests_since(before))
    assert list(sent) == ["CreateModel", "CreateEndpointConfig", "CreateEndpoint",
                          "RegisterScalableTarget", "PutScalingPolicy"]
    params = fake_aws.parameters
    model_url = f"s3://{BUCKET}/{model_key(job)}"
    assert sent["CreateModel"] == {
        "ModelName": name, "ExecutionRoleArn": params["model-role-arn"],
        "PrimaryContainer": {"Image": INFERENCE_IMAGES["gpu"], "ModelDataUrl": model_url},
        "VpcConfig": {"Subnets": params["subnet-ids"].split(","),
                      "SecurityGroupIds": params["security-group-ids"].split(",")}}
    assert sent["CreateEndpointConfig"] == dict({
        "EndpointConfigName": name,
        "ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": name,
                                "InstanceType": instance_type, "InitialInstanceCount": 1,
                                "InitialVariantWeight": 1.0}]},
        # g4dn: local NVMe, no KmsKeyId; p3: an EBS volume, encrypted with the deployment's key
        **({"KmsKeyId": params["kms-key-arn"]} if volume_key else {}))
    assert sent["CreateEndpoint"] == {"EndpointName": name, "EndpointConfigName": name}
    target = {"ServiceNamespace": "sagemaker",
              "ResourceId": f"endpoint/{name}/variant/AllTraffic",
              "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"}
    assert sent["RegisterScalableTarget"] == dict(target, MinCapacity=1, MaxCapacity=3)
    assert sent["PutScalingPolicy"] == dict(
        target, PolicyName=f"{name}-invocations", PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": 90.0,
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
            "ScaleInCooldown": 300, "ScaleOutCooldown": 60})
    assert result["endpoint_name"] == name and result["training_job"] == job
    assert result["idle_alarm"] == f"{name}-idle"
    assert any(line.startswith(f"{name}: InService after") for line in lines)
    assert f"created idle alarm {name}-idle" in lines
    assert serving_resources(fake_aws, name) == {
        "models": [name], "endpoint_configs": [name], "endpoints": [name],
        "scalable_targets": [target["ResourceId"]], "scaling_policies": [f"{name}-invocations"],
        "alarms": [f"{name}-idle"]}

    deleted = endpoints.delete(deployment, name, session(), echo=lines.append)
    assert deleted == [f"idle alarm {name}-idle", f"scaling policy {name}-invocations",
                       f"scalable target endpoint/{name}/variant/AllTraffic",
                       f"endpoint {name}", f"endpoint configuration {name}", f"model {name}"]
    assert serving_resources(fake_aws, name) == NOTHING
    # Idempotent: what is gone is skipped.
    assert endpoints.delete(deployment, name, session(), echo=lines.append) == []
    assert lines[-1] == f"nothing named {name} to delete"


@pytest.mark.parametrize("instance_type, allow_cpu, processor, volume_key", [
    ("ml.g5.xlarge", False, "gpu", False), ("ml.g4dn.xlarge", False, "gpu", False),
    ("ml.g6.2xlarge", False, "gpu", False), ("ml.p3.2xlarge", False, "gpu", True),
    ("ml.m5.xlarge", True, "cpu", True), ("ml.c5.2xlarge", True, "cpu", True),
    ("ml.c5d.xlarge", True, "cpu", False), ("ml.m6id.large", True, "cpu", False),
])
def test_image_by_processor_and_volume_key_only_without_instance_storage(
        fake_aws, deployment, instance_type, allow_cpu, processor, volume_key):
    """EP-2: the GPU or CPU inference image by instance family. EP-4: CreateEndpointConfig's
    KmsKeyId (the EBS volume's key) only for types without local NVMe instance storage, whose
    storage the instance's hardware encrypts (as SM-1 for training)."""
    job = completed_training_job(fake_aws)
    p = endpoint_plan.plan(deployment, DeployOptions(job_name=job, instance_type=instance_type,
                                              require_gpu=not allow_cpu), session())
    assert p.create_model["PrimaryContainer"]["Image"] == INFERENCE_IMAGES[processor]
    assert instances.has_local_storage(instance_type) is not volume_key
    assert p.create_endpoint_config.get("KmsKeyId") == (
        fake_aws.parameters["kms-key-arn"] if volume_key else None)


def test_the_default_instance_type_is_a_g5_without_a_volume_key(fake_aws, deployment):
    """EP-4: the default ml.g5.xlarge (local NVMe) gets no KmsKeyId. Planned only: moto's
    CreateEndpointConfig refuses ml.g5.* (its list of instance types predates g5), which AWS
    accepts, so no test creates an endpoint configuration with it."""
    p = endpoint_plan.plan(deployment, DeployOptions(job_name=completed_training_job(fake_aws)),
                    session())
    assert DeployOptions().instance_type == endpoint_plan.DEFAULT_INSTANCE_TYPE == "ml.g5.xlarge"
    variant, = p.create_endpoint_config["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g5.xlarge"
    assert "KmsKeyId" not in p.create_endpoint_config
    assert p.create_model["PrimaryContainer"]["Image"] == INFERENCE_IMAGES["gpu"]


def test_data_capture_is_optional_encrypted_and_keeps_answers_as_text(fake_aws, deployment):
    """EP-5: DataCaptureConfig with its required fields, to the output prefix, with the
    deployment's key; JSON answers stored as text (other content types base64)."""
    job = completed_training_job(fake_aws)
    assert "DataCaptureConfig" not in endpoint_plan.plan(
        deployment, DeployOptions(job_name=job), session()).create_endpoint_config
    p = endpoint_plan.plan(deployment, DeployOptions(job_name=job, data_capture_percent=20), session())
    assert p.create_endpoint_config["DataCaptureConfig"] == {
        "EnableCapture": True, "InitialSamplingPercentage": 20,
        "DestinationS3Uri": f"s3://{BUCKET}/jobs/data-capture/",
        "KmsKeyId": fake_aws.parameters["kms-key-arn"],
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
        "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"]}}


def test_the_latest_completed_training_job_is_served_by_default(fake_aws, deployment):
    """Not a staging job (it trains no model), not another deployment's job."""
    older = completed_training_job(fake_aws, run="older")
    newest = completed_training_job(fake_aws, run="newest")
    # Named as the launcher names it, and known by the program it runs as well.
    completed_training_job(fake_aws, run="stage-coco2017", environment={
        job_io.PROGRAM_ENV: job_io.STAGING_PROGRAM}, hyperparameters={
        job_io.STAGING_S3_URI: f"s3://{BUCKET}/datasets/coco2017/",
        job_io.STAGING_PRETRAINED_S3_URI: f"s3://{BUCKET}/pretrained/",
        job_io.STAGING_BACKBONES: "resnet50"})
    jobs = fake_aws.sagemaker_backend().training_jobs  # one second apart, as real jobs would be
    jobs[older].creation_time -= datetime.timedelta(seconds=1)
    p = endpoint_plan.plan(deployment, DeployOptions(), session())
    assert p.training_job == newest
    assert p.model_data_url == f"s3://{BUCKET}/{model_key(newest)}"
    assert p.name.startswith(f"{JOB_PREFIX}-endpoint-") and len(p.name) <= 63


def _fail_job(fake_aws, name: str, status: str, reason: str = None):
    job = fake_aws.sagemaker_backend().training_jobs[name]
    job.training_job_status = status
    job.failure_reason = reason


@pytest.mark.parametrize("case, message", [
    ("unknown job", f"training job '{JOB_PREFIX}-nothing-20260101000000' does not exist in eu-west-2"),
    ("failed job", "is Failed: AlgorithmError: rank 0 ran out of memory; only a Completed job"),
    ("running job", "is InProgress; only a Completed job has a model"),
    ("no model", "/output/model.tar.gz do not exist"),
    ("other deployment's job", "training job 'other-run-20260101000000' is not this deployment's"),
    ("cpu where gpu required", "instance type 'ml.m5.xlarge' has no GPU"),
    ("malformed instance type", "instance type 'g5.xlarge' is not a SageMaker hosting instance type"),
    ("unknown family", "family 'x9' is not a known hosting family"),
    ("neuron family", "family 'inf2' is not a known hosting family"),
    ("name outside the prefix", f"endpoint name 'other-endpoint' must start with {JOB_PREFIX}-"),
    ("name too long", "has 64 characters; SageMaker allows 63"),
    ("name with underscore", "SageMaker names are letters, digits and hyphens"),
    ("min above max", "max instances 1 is below min instances 2"),
    ("count outside min..max", "instance count 5 is outside min..max (1..2)"),
    ("no target", "target invocations 0: expected requests per instance per minute, above 0"),
])
def test_a_deployment_that_cannot_work_is_refused_and_nothing_created(
        fake_aws, deployment, case, message):
    """EP-1 (names), EP-2 (image by family): refused before the first create, naming the value."""
    job = completed_training_job(fake_aws, with_model=case != "no model")
    options = {"job_name": job, "endpoint_name": f"{JOB_PREFIX}-refused"}
    options.update({
        "unknown job": {"job_name": f"{JOB_PREFIX}-nothing-20260101000000"},
        "other deployment's job": {"job_name": "other-run-20260101000000"},
        "cpu where gpu required": {"instance_type": "ml.m5.xlarge"},
        "malformed instance type": {"instance_type": "g5.xlarge"},
        "unknown family": {"instance_type": "ml.x9.xlarge"},
        "neuron family": {"instance_type": "ml.inf2.xlarge"},
        "name outside the prefix": {"endpoint_name": "other-endpoint"},
        "name too long": {"endpoint_name": f"{JOB_PREFIX}-" + "e" * (63 - len(JOB_PREFIX))},
        "name with underscore": {"endpoint_name": f"{JOB_PREFIX}-my_endpoint"},
        "min above max": {"min_instances": 2, "max_instances": 1, "instance_count": 2},
        "count outside min..max": {"instance_count": 5},
        "no target": {"target_invocations": 0},
    }.get(case, {}))
    if case == "failed job":
        _fail_job(fake_aws, job, "Failed", "AlgorithmError: rank 0 ran out of memory")
    if case == "running job":
        _fail_job(fake_aws, job, "InProgress")
    before = len(fake_aws.serving_requests_since(0))
    with pytest.raises(DeployRequestError) as error:
        endpoint_plan.plan(deployment, DeployOptions(**options), session())
    assert message in str(error.value)
    assert fake_aws.serving_requests_since(before) == []
    name = options["endpoint_name"]
    assert serving_resources(fake_aws, name) == NOTHING


def test_every_problem_of_a_request_is_named_at_once(fake_aws, deployment):
    with pytest.raises(DeployRequestError) as error:
        endpoint_plan.plan(deployment, DeployOptions(instance_type="ml.m5.xlarge", min_instances=0,
                                              endpoint_name="other"), session())
    text = str(error.value)
    assert "has no GPU" in text and "min instances 0" in text and "must start with" in text


def test_a_name_in_use_is_refused(fake_aws, deployment):
    job = completed_training_job(fake_aws)
    name = f"{JOB_PREFIX}-endpoint-taken"
    fake_aws.client("sagemaker").create_model(
        ModelName=name, ExecutionRoleArn=fake_aws.parameters["model-role-arn"],
        PrimaryContainer={"Image": INFERENCE_IMAGES["gpu"]})
    with pytest.raises(DeployRequestError, match=f"a model named '{name}' exist"):
        endpoint_plan.plan(deployment, DeployOptions(job_name=job, endpoint_name=name), session())
    endpoints.delete(deployment, name, session(), echo=lambda _: None)
    assert serving_resources(fake_aws, name) == NOTHING


def test_a_failed_endpoint_names_its_reason_and_is_rolled_back(fake_aws, deployment):
    """A step that fails after something was created: the reason, and nothing left behind
    (AAS-2: the same deletion as `delete`)."""
    job = completed_training_job(fake_aws)
    name = f"{JOB_PREFIX}-endpoint-fails"
    fake_aws.fail_endpoints[name] = "The primary container for production variant AllTraffic " \
                                    "did not pass the ping health check."
    p = endpoint_plan.plan(deployment, DeployOptions(job_name=job, endpoint_name=name,
                                              instance_type=GPU_WITH_INSTANCE_STORAGE), session())
    with pytest.raises(DeployError) as error:
        endpoints.deploy(p, session(), echo=lambda _: None)
    text = str(error.value)
    assert f"endpoint {name} Failed: The primary container" in text
    assert f"rolled back: deleted endpoint {name}, endpoint configuration {name}, model {name}" \
        in text
    assert serving_resources(fake_aws, name) == NOTHING


def test_a_failure_after_the_idle_alarm_rolls_the_alarm_back_too(fake_aws, deployment):
    """CW-3, AAS-2: the alarm is created once the endpoint is InService; a step that fails after
    it (auto scaling refused) deletes it with the rest."""
    job = completed_training_job(fake_aws)
    name = f"{JOB_PREFIX}-endpoint-unscalable"
    fake_aws.fail_scaling[endpoint_plan.resource_id(name)] = "Quota exceeded for scalable targets"
    p = endpoint_plan.plan(deployment, DeployOptions(job_name=job, endpoint_name=name, idle_hours=2,
                                              instance_type=GPU_WITH_INSTANCE_STORAGE), session())
    lines = []
    with pytest.raises(DeployError) as error:
        endpoints.deploy(p, session(), echo=lines.append)
    assert f"created idle alarm {name}-idle" in lines
    text = str(error.value)
    assert "Quota exceeded for scalable targets" in text
    assert (f"rolled back: deleted idle alarm {name}-idle, endpoint {name}, endpoint "
            f"configuration {name}, model {name}") in text
    assert serving_resources(fake_aws, name) == NOTHING


@pytest.mark.parametrize("hours", [0, 169, 2.5, True, "8"])
def test_idle_hours_outside_what_an_alarm_evaluates_are_refused(fake_aws, deployment, hours):
    """CW-3: 1 to 168 whole hours (7 days of hourly periods); refused before anything exists."""
    before = len(fake_aws.serving_requests_since(0))
    with pytest.raises(DeployRequestError, match=r"idle hours .* from 1 to 168"):
        endpoint_plan.plan(deployment, DeployOptions(job_name=completed_training_job(fake_aws),
                                              idle_hours=hours), session())
    assert fake_aws.serving_requests_since(before) == []


def test_without_an_idle_alarm_none_is_created(fake_aws, deployment):
    p = endpoint_plan.plan(deployment, DeployOptions(job_name=completed_training_job(fake_aws),
                                              idle_hours=None), session())
    assert p.put_metric_alarm is None and "PutMetricAlarm" not in p.requests()
    assert "idle alarm:    off" in endpoint_plan.describe_plan(p)
    with_alarm = endpoint_plan.plan(deployment, DeployOptions(job_name=completed_training_job(fake_aws),
                                                       idle_hours=24), session())
    assert list(with_alarm.requests()) == ["CreateModel", "CreateEndpointConfig",
                                           "CreateEndpoint", "PutMetricAlarm",
                                           "RegisterScalableTarget", "PutScalingPolicy"]
    assert with_alarm.put_metric_alarm == idle_alarm(fake_aws, with_alarm.name, 24)


def test_the_listing_shows_instances_price_class_age_and_idle_alarm(fake_aws, deployment):
    """What bills: each endpoint's instance type and count, the type's hourly price class, its
    age (from CreationTime) and its idle alarm's state."""
    job = completed_training_job(fake_aws)
    name = f"{JOB_PREFIX}-endpoint-listed"
    endpoints.deploy(endpoint_plan.plan(deployment, DeployOptions(
        job_name=job, endpoint_name=name, instance_type=GPU_WITH_INSTANCE_STORAGE,
        instance_count=2, max_instances=3), session()), session(), echo=lambda _: None)
    created = fake_aws.sagemaker_backend().endpoints[name].creation_time
    later = created.replace(tzinfo=datetime.timezone.utc) + datetime.timedelta(hours=26,
                                                                                 minutes=5)
    listed = {e["name"]: e for e in endpoints.endpoints(
        session().client("sagemaker"), deployment, session().client("cloudwatch"), now=later)}
    entry = listed[name]
    assert entry["instance_type"] == GPU_WITH_INSTANCE_STORAGE and entry["instance_count"] == 2
    assert entry["price_class"] == "$$" and entry["age"] == "1 d 2 h"
    assert entry["idle_alarm"] in ("INSUFFICIENT_DATA", "OK", "ALARM")
    assert f"{name}: InService, 2 x ml.g4dn.xlarge ($$ per instance-hour), up 1 d 2 h, idle " \
        f"alarm {entry['idle_alarm']}" in endpoints.endpoint_lines(list(listed.values()))
    endpoints.delete(deployment, name, session(), echo=lambda _: None)
    assert name not in {e["name"] for e in endpoints.endpoints(session().client("sagemaker"),
                                                           deployment)}


@pytest.mark.parametrize("instance_type, price_class", [
    ("ml.m5.xlarge", "$"), ("ml.g5.xlarge", "$$"), ("ml.g6e.2xlarge", "$$"),
    ("ml.g5.12xlarge", "$$$"), ("ml.p3.8xlarge", "$$$"), ("ml.g6.48xlarge", "$$$$"),
    ("ml.p3.16xlarge", "$$$$"), ("ml.p4d.24xlarge", "$$$$$"), ("ml.p5.48xlarge", "$$$$$"),
    ("ml.inf2.xlarge", "?"),
])
def test_price_class_by_accelerators(instance_type, price_class):
    assert instances.price_class(instance_type) == price_class


def test_a_failure_kept_for_inspection_says_what_exists_and_how_to_delete_it(fake_aws, deployment):
    job = completed_training_job(fake_aws)
    name = f"{JOB_PREFIX}-endpoint-kept"
    fake_aws.fail_endpoints[name] = "ping health check failed"
    p = endpoint_plan.plan(deployment, DeployOptions(job_name=job, endpoint_name=name,
                                              instance_type=GPU_WITH_INSTANCE_STORAGE), session())
    with pytest.raises(DeployError) as error:
        endpoints.deploy(p, session(), echo=lambda _: None, rollback_on_failure=False)
    text = str(error.value)
    assert f"kept: model, endpoint configuration, endpoint named {name} exist" in text
    assert f"python -m maskrcnn_launcher delete-endpoint {name}" in text
    assert serving_resources(fake_aws, name)["endpoints"] == [name]
    endpoints.delete(deployment, name, session(), echo=lambda _: None)
    assert serving_resources(fake_aws, name) == NOTHING


def test_delete_refuses_a_name_outside_the_prefix(fake_aws, deployment):
    """EP-1: the notebook role may delete only the deployment's names; nothing is touched."""
    sm = fake_aws.client("sagemaker")
    sm.create_model(ModelName="someone-elses", PrimaryContainer={"Image": INFERENCE_IMAGES["cpu"]},
                    ExecutionRoleArn=fake_aws.parameters["model-role-arn"])
    with pytest.raises(DeployRequestError, match="'someone-elses' must start with maskrcnn-test-"):
        endpoints.delete(deployment, "someone-elses", session())
    assert [m["ModelName"] for m in sm.list_models()["Models"]].count("someone-elses") == 1
    sm.delete_model(ModelName="someone-elses")


def test_invoke_sends_the_image_and_returns_the_detections(fake_aws, deployment):
    """EP-6: image/jpeg or image/png bytes in (at most 6 MB), application/json out."""
    job = completed_training_job(fake_aws)
    name = f"{JOB_PREFIX}-endpoint-invoke"
    endpoints.deploy(endpoint_plan.plan(deployment, DeployOptions(
        job_name=job, endpoint_name=name, instance_type=GPU_WITH_INSTANCE_STORAGE),
        session()), session(), echo=lambda _: None)
    runtime = session().client("sagemaker-runtime")
    start = len(fake_aws.invocations)
    jpeg, png = image_bytes("JPEG"), image_bytes("PNG")
    assert invocation.invoke(runtime, name, jpeg) == INVOCATION_ANSWER
    assert invocation.invoke(runtime, name, png, score_threshold=0.5)["detections"]
    first, second = fake_aws.invocations[start:]
    assert first == {"EndpointName": name, "ContentType": "image/jpeg",
                     "Accept": "application/json", "CustomAttributes": None, "Body": jpeg}
    assert second["ContentType"] == "image/png"
    assert second["CustomAttributes"] == "score_threshold=0.5"
    with pytest.raises(DeployRequestError, match="neither JPEG nor PNG"):
        invocation.invoke(runtime, name, b"GIF89a...")
    with pytest.raises(DeployRequestError, match="InvokeEndpoint takes at most 6291456"):
        invocation.invoke(runtime, name, b"\xff\xd8\xff" + bytes(6 * 1024 * 1024))
    assert len(fake_aws.invocations) == start + 2  # the refused ones were not sent
    endpoints.delete(deployment, name, session(), echo=lambda _: None)
    with pytest.raises(invocation.InvokeError, match=f"Endpoint {name} of account .* not found"):
        invocation.invoke(runtime, name, jpeg)


def test_name_rules():
    """EP-1: at most 63 characters of letters, digits and hyphens, starting and ending with a
    letter or digit (CreateModel ModelName, CreateEndpointConfig, CreateEndpoint)."""
    ok = ["a", "maskrcnn-endpoint-20260101120000", "A" * 63, "a--b"]
    bad = ["-a", "a-", "a_b", "a.b", "A" * 64, ""]
    assert all(endpoint_plan.NAME_PATTERN.match(n) and len(n) <= endpoint_plan.NAME_MAX for n in ok)
    assert not any(endpoint_plan.NAME_PATTERN.match(n) and len(n) <= endpoint_plan.NAME_MAX for n in bad)


def test_a_staging_job_is_known_by_the_program_its_environment_starts(deployment):
    """Whatever its name: the staging program is chosen by the request's Environment (SM-14)."""
    staging = {"Environment": {job_io.PROGRAM_ENV: job_io.STAGING_PROGRAM}}
    assert lookup.is_staging_job(deployment, f"{JOB_PREFIX}-renamed", staging)
    assert not lookup.is_staging_job(deployment, f"{JOB_PREFIX}-run", {"Environment": {}})


@pytest.mark.parametrize("threshold", [7, -0.1, float("nan"), "0.5"])
def test_a_score_threshold_outside_0_to_1_is_refused_before_the_endpoint_is_called(fake_aws,
                                                                                 threshold):
    """The endpoint would refuse it only after running the model (endpoint_handler.py)."""
    runtime = session().client("sagemaker-runtime")
    before = len(fake_aws.invocations)
    with pytest.raises(DeployRequestError,
                       match=r"score threshold .* expected a number from 0 to 1"):
        invocation.invoke(runtime, f"{JOB_PREFIX}-endpoint-any", image_bytes(),
                      score_threshold=threshold)
    assert len(fake_aws.invocations) == before


def _put_alarm(name: str, actions: list) -> dict:
    """A PutMetricAlarm call as the IAM evaluation records one (tests/iam/recorder.py)."""
    return {"service": "cloudwatch", "service_name": "cloudwatch", "operation": "PutMetricAlarm",
            "region": "eu-west-2", "params": {"AlarmName": name, "AlarmActions": actions},
            "status": 200, "error_code": None}


def test_the_notebook_role_puts_alarms_that_notify_the_deployments_topic_and_nothing_else(
        request, fake_aws):
    """CW-3, against the synthesized template's notebook role (tests/iam): an idle alarm of
    the deployment's with the deployment's topic is allowed; another topic, an EC2 action beside
    the topic, no action at all, or a name outside the prefix is refused."""
    from tests.iam.plugin import checker

    check, topic = checker(request), fake_aws.parameters["notification-topic-arn"]
    name = f"{JOB_PREFIX}-endpoint-any-idle"
    assert check.denials([_put_alarm(name, [topic])], "notebook") == []
    for call in (_put_alarm(name, [topic.replace("notifications", "elsewhere")]),
                 _put_alarm(name, [topic, "arn:aws:automate:eu-west-2:ec2:terminate"]),
                 _put_alarm(name, []),
                 _put_alarm("other-endpoint-idle", [topic])):
        denial, = check.denials([call], "notebook")
        assert denial.action == "cloudwatch:PutMetricAlarm", denial.text


def test_a_drawn_mask_is_blended_at_the_mask_opacity():
    """A sure mask (probability 1) colours its pixels MASK_OPACITY of the way from the image to
    the class's colour, once (pasting the layer with itself as the mask squared the opacity)."""
    from PIL import Image

    from maskrcnn_contract.palette import colour
    from maskrcnn_launcher.serving import detections

    background = (160, 40, 160)
    out = io.BytesIO()
    Image.new("RGB", (120, 80), background).save(out, "PNG")
    answer = {"detections": [{"bbox": [10.0, 10.0, 60.0, 40.0], "category_id": 1, "score": 0.9,
                              "mask": [[1.0] * 28 for _ in range(28)]}]}
    drawn = detections.draw(out.getvalue(), answer)
    alpha = round(255 * detections.MASK_OPACITY) / 255
    expected = tuple(round(b + (c - b) * alpha) for b, c in zip(background, colour(1)))
    pixel = drawn.getpixel((40, 30))  # inside the box, away from its outline and label
    assert all(abs(p - e) <= 2 for p, e in zip(pixel, expected)), (pixel, expected)
