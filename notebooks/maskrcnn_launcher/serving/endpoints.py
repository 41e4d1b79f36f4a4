"""Serving a trained model: a plan (endpoint_plan.py) -> an auto-scaling SageMaker endpoint ->
nothing.

    summary = endpoints.deploy(plan, boto_session)      # model, endpoint config, endpoint, idle
                                                        # alarm, auto scaling
    endpoints.endpoints(sagemaker_client, deployment, cloudwatch_client)  # what bills, how much
    endpoints.delete(deployment, name, boto_session)    # alarm, scaling, endpoint, config, model

When a step of `deploy` fails after something was created it deletes what it created (or, with
`rollback_on_failure=False` or on an interrupt, leaves it) and raises DeployError saying what
exists and how to delete it: never a silent half state. Boto3 only.
"""

import datetime
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from botocore.exceptions import ClientError

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import follow
from maskrcnn_launcher.runs.lookup import is_missing
from maskrcnn_launcher.serving.endpoint_plan import (
    SCALABLE_DIMENSION,
    SCALING_NAMESPACE,
    VARIANT,
    DeployRequestError,
    Plan,
    idle_alarm_name,
    name_problems,
    resource_id,
)

ENDPOINT_FAILED = ("Failed", "OutOfService")


class DeployError(RuntimeError):
    """A step failed after something was created; the message says what exists now and how to
    delete it."""


# --- deploying ------------------------------------------------------------------------------------

def wait_for_endpoint(sagemaker_client, name: str, timeout_s: float = 3600.0,
                      poll: Optional[float] = None, echo: Callable[[str], None] = print) -> dict:
    """Polls DescribeEndpoint, printing each status change with the time since the start, until
    InService. Raises DeployError with the FailureReason when it fails, TimeoutError after
    `timeout_s`."""
    poll = follow.poll_seconds(30.0) if poll is None else poll
    start = time.monotonic()
    last = None
    while True:
        endpoint = sagemaker_client.describe_endpoint(EndpointName=name)
        status = endpoint["EndpointStatus"]
        if status != last:
            echo(f"{name}: {status} after {time.monotonic() - start:.0f} s")
            last = status
        if status == "InService":
            return endpoint
        if status in ENDPOINT_FAILED:
            raise DeployError(f"endpoint {name} {status}: "
                              f"{endpoint.get('FailureReason', 'no reason given')}")
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"endpoint {name} still {status} after {timeout_s:.0f} s")
        time.sleep(poll)


def deploy(p: Plan, boto_session, echo: Callable[[str], None] = print,
           rollback_on_failure: bool = True, timeout_s: float = 3600.0,
           poll: Optional[float] = None) -> dict:
    """Creates the model, the endpoint configuration and the endpoint, waits until it is
    InService, puts its idle alarm, then registers its variant with Application Auto Scaling and
    puts the target tracking policy. On a failure after the first create: deletes what was
    created, the alarm too (unless `rollback_on_failure` is False or the user interrupted), and
    raises DeployError saying what exists and how to delete it."""
    sagemaker = boto_session.client("sagemaker")
    scaling = boto_session.client("application-autoscaling")
    created: List[str] = []
    steps = [
        ("model", p.name, lambda: sagemaker.create_model(**p.create_model)),
        ("endpoint configuration", p.name, lambda: sagemaker.create_endpoint_config(
            **p.create_endpoint_config)),
        ("endpoint", p.name, lambda: sagemaker.create_endpoint(**p.create_endpoint)),
        (None, None, lambda: wait_for_endpoint(sagemaker, p.name, timeout_s, poll, echo)),
    ]
    alarm = p.put_metric_alarm
    if alarm:
        steps.append(("idle alarm", alarm["AlarmName"], lambda: boto_session.client(
            "cloudwatch").put_metric_alarm(**alarm)))
    steps += [
        ("scalable target", p.name, lambda: scaling.register_scalable_target(
            **p.register_scalable_target)),
        ("scaling policy", p.put_scaling_policy["PolicyName"],
         lambda: scaling.put_scaling_policy(**p.put_scaling_policy)),
    ]
    try:
        for what, name, step in steps:
            step()
            if what:
                created.append(what)
                echo(f"created {what} {name}")
    except KeyboardInterrupt:
        echo(_left_behind(p.name, created, "interrupted"))
        raise
    except Exception as error:  # noqa: BLE001 - reported with what exists, then re-raised
        if not created:
            raise DeployError(f"{type(error).__name__}: {error}\nnothing was created") from error
        cause = f"{type(error).__name__}: {error}" if not isinstance(error, DeployError) \
            else str(error)
        if rollback_on_failure:
            try:
                deleted = _delete_names(boto_session, p.name, [p.name], [p.name], echo)
            except Exception as rollback_error:  # noqa: BLE001
                raise DeployError(f"{cause}\n{_left_behind(p.name, created, 'the rollback failed')}"
                                  f" ({rollback_error})") from error
            raise DeployError(f"{cause}\nrolled back: deleted {', '.join(deleted) or 'nothing'}; "
                              "nothing of this deployment is left") from error
        raise DeployError(f"{cause}\n{_left_behind(p.name, created, 'kept')}") from error
    return summary(p)


def _left_behind(name: str, created: List[str], why: str) -> str:
    return (f"{why}: {', '.join(created)} named {name} exist (an endpoint costs its instances' "
            f"hourly price while it exists). Delete them with `python -m maskrcnn_launcher "
            f"delete-endpoint {name}` or endpoints.delete(deployment, {name!r}, boto_session)")


def summary(p: Plan) -> dict:
    variant = p.create_endpoint_config["ProductionVariants"][0]
    return {
        "endpoint_name": p.name, "model_name": p.name, "endpoint_config_name": p.name,
        "training_job": p.training_job, "model_data_url": p.model_data_url,
        "image": p.image, "model_package": p.model_package,
        "instance_type": variant["InstanceType"],
        "instance_count": variant["InitialInstanceCount"],
        "volume_kms_key": "KmsKeyId" in p.create_endpoint_config,
        "data_capture": p.create_endpoint_config.get("DataCaptureConfig", {}).get(
            "DestinationS3Uri"),
        "idle_alarm": p.put_metric_alarm["AlarmName"] if p.put_metric_alarm else None,
        "price_class": instances.price_class(variant["InstanceType"]),
        "scaling": {"resource_id": p.register_scalable_target["ResourceId"],
                    "min": p.register_scalable_target["MinCapacity"],
                    "max": p.register_scalable_target["MaxCapacity"],
                    "policy": p.put_scaling_policy["PolicyName"],
                    "target_invocations_per_instance_per_minute":
                        p.put_scaling_policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"]},
    }


# --- deleting -------------------------------------------------------------------------------------

def delete(deployment: Deployment, endpoint_name: str, boto_session,
           echo: Callable[[str], None] = print) -> List[str]:
    """Deletes the endpoint's idle alarm, scaling policies and scalable target, the endpoint, its
    endpoint configuration and its model(s); whatever is already gone is skipped, so it can run
    again.
    Refuses a name outside the deployment's prefix (DeployRequestError); the configuration and
    models are found from the endpoint (falling back to its name), and any outside the prefix
    are left alone and named. Returns what it deleted."""
    problems = name_problems(deployment, endpoint_name)
    if problems:
        raise DeployRequestError("; ".join(problems))
    sagemaker = boto_session.client("sagemaker")
    config_names, model_names = [endpoint_name], [endpoint_name]
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=endpoint_name)
        config_names = [endpoint["EndpointConfigName"]]
    except ClientError as error:
        if not is_missing(error):
            raise
    for config in list(config_names):
        try:
            described = sagemaker.describe_endpoint_config(EndpointConfigName=config)
            model_names = [v["ModelName"] for v in described["ProductionVariants"]
                           if v.get("ModelName")] or model_names
        except ClientError as error:
            if not is_missing(error):
                raise
    outside = [n for n in config_names + model_names if name_problems(deployment, n)]
    if outside:
        echo(f"left alone (not named {deployment.job_name_prefix}-*): {', '.join(outside)}")
    return _delete_names(boto_session, endpoint_name,
                         [n for n in config_names if n not in outside],
                         [n for n in model_names if n not in outside], echo)


def _delete_names(boto_session, endpoint_name: str, config_names: List[str],
                  model_names: List[str], echo: Callable[[str], None]) -> List[str]:
    sagemaker = boto_session.client("sagemaker")
    scaling = boto_session.client("application-autoscaling")
    cloudwatch = boto_session.client("cloudwatch")
    deleted = []
    # DeleteAlarms of a name that does not exist fails: only what DescribeAlarms finds.
    alarm = idle_alarm_name(endpoint_name)
    if cloudwatch.describe_alarms(AlarmNames=[alarm], AlarmTypes=["MetricAlarm"])["MetricAlarms"]:
        cloudwatch.delete_alarms(AlarmNames=[alarm])
        deleted.append(f"idle alarm {alarm}")
    target = {"ServiceNamespace": SCALING_NAMESPACE, "ResourceId": resource_id(endpoint_name),
              "ScalableDimension": SCALABLE_DIMENSION}
    # Deregistering deletes the target's policies too (AAS-2); deleting them first keeps the
    # order explicit and the alarms they own go with them.
    for policy in scaling.describe_scaling_policies(
            ServiceNamespace=SCALING_NAMESPACE, ResourceId=target["ResourceId"],
            ScalableDimension=SCALABLE_DIMENSION).get("ScalingPolicies", []):
        if policy["ResourceId"] != target["ResourceId"]:
            continue
        scaling.delete_scaling_policy(PolicyName=policy["PolicyName"], **target)
        deleted.append(f"scaling policy {policy['PolicyName']}")
    registered = scaling.describe_scalable_targets(
        ServiceNamespace=SCALING_NAMESPACE, ResourceIds=[target["ResourceId"]],
        ScalableDimension=SCALABLE_DIMENSION).get("ScalableTargets", [])
    if any(t["ResourceId"] == target["ResourceId"] for t in registered):
        scaling.deregister_scalable_target(**target)
        deleted.append(f"scalable target {target['ResourceId']}")
    for what, call, key, names in (
            ("endpoint", sagemaker.delete_endpoint, "EndpointName", [endpoint_name]),
            ("endpoint configuration", sagemaker.delete_endpoint_config, "EndpointConfigName",
             config_names),
            ("model", sagemaker.delete_model, "ModelName", model_names)):
        for name in dict.fromkeys(names):
            try:
                call(**{key: name})
                deleted.append(f"{what} {name}")
            except ClientError as error:
                if not is_missing(error):
                    raise
    for line in deleted:
        echo(f"deleted {line}")
    if not deleted:
        echo(f"nothing named {endpoint_name} to delete")
    return deleted


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    return f"{days} d {hours} h" if days else f"{hours} h {minutes} min"


def _instances(sagemaker_client, name: str) -> Tuple[Optional[str], Optional[int]]:
    """(instance type, current instance count) of the endpoint's variant; (None, None) for what is
    gone meanwhile or has no instances (a failed endpoint)."""
    try:
        endpoint = sagemaker_client.describe_endpoint(EndpointName=name)
        config = sagemaker_client.describe_endpoint_config(
            EndpointConfigName=endpoint["EndpointConfigName"])
    except ClientError as error:
        if is_missing(error):
            return None, None
        raise
    variants = {v["VariantName"]: v for v in config.get("ProductionVariants", [])}
    current = {v["VariantName"]: v for v in endpoint.get("ProductionVariants", [])}
    variant: Dict[str, Any] = variants.get(VARIANT) or next(iter(variants.values()), {})
    count = current.get(variant.get("VariantName"), {}).get("CurrentInstanceCount")
    return variant.get("InstanceType"), count


def endpoints(sagemaker_client, deployment: Deployment, cloudwatch_client=None,
              now: Optional[datetime.datetime] = None) -> List[dict]:
    """The deployment's endpoints, newest first: what costs money now. Each: name, status,
    created, age, instance type and count, the type's hourly price class per instance
    (instances.PRICE_CLASSES), and with `cloudwatch_client` its idle alarm's state (None: no
    alarm)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    found = []
    for page in sagemaker_client.get_paginator("list_endpoints").paginate(
            NameContains=deployment.job_name_prefix, SortBy="CreationTime",
            SortOrder="Descending"):
        for e in page["Endpoints"]:
            name = e["EndpointName"]
            if not name.startswith(f"{deployment.job_name_prefix}-"):
                continue
            instance_type, count = _instances(sagemaker_client, name)
            created = e["CreationTime"]
            if created.tzinfo is None:
                created = created.replace(tzinfo=datetime.timezone.utc)
            found.append({"name": name, "status": e["EndpointStatus"], "created": str(created),
                          "age": _age((now - created).total_seconds()),
                          "instance_type": instance_type, "instance_count": count,
                          "price_class": instances.price_class(instance_type) if instance_type
                          else None})
    if cloudwatch_client is not None and found:
        states = {}
        names = [idle_alarm_name(e["name"]) for e in found]
        for start in range(0, len(names), 100):  # DescribeAlarms takes 100 names at most
            for alarm in cloudwatch_client.describe_alarms(
                    AlarmNames=names[start:start + 100],
                    AlarmTypes=["MetricAlarm"])["MetricAlarms"]:
                states[alarm["AlarmName"]] = alarm["StateValue"]
        for e in found:
            e["idle_alarm"] = states.get(idle_alarm_name(e["name"]))
    return found


def endpoint_lines(found: List[dict]) -> List[str]:
    """One line per endpoint of `endpoints`, for people: what bills, how much, since when."""
    lines = []
    for e in found:
        shape = (f"{e['instance_count'] if e['instance_count'] is not None else '?'} x "
                 f"{e['instance_type']} ({e['price_class']} per instance-hour)"
                 if e["instance_type"] else "no instances")
        alarm = e.get("idle_alarm", "n/a") or "no idle alarm"
        lines.append(f"{e['name']}: {e['status']}, {shape}, up {e['age']}, idle alarm {alarm}")
    return lines
