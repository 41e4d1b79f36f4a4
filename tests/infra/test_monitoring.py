"""Notifications and the dashboard (stacks/monitoring.py), read from the synthesized templates: the
rules' event patterns evaluated against events of the schema SageMaker documents, the messages
EventBridge would render from them, the topic's encryption and policies, the dashboard's metrics,
and the notebook role's idle-alarm permissions. Each test names its rule in docs/aws-rules.md."""

import copy
import importlib.util
import json
import re

import pytest
from maskrcnn_contract import metrics

from stacks import monitoring
from tests.infra import event_patterns
from tests.infra.conftest import EXISTING_TOPIC
from tests.infra.templates import (ACCOUNT, actions_on, data_key, evaluate, of_type, only,
                                  statements_of)

def resolve(node, template, region="eu-west-2"):
    """A CloudFormation value as deployed in `region` (templates.evaluate)."""
    return evaluate(node, template, region)


def rules(raw):
    return {r["Properties"]["Name"]: r["Properties"] for r in of_type(raw, "AWS::Events::Rule").values()}


# --- the event patterns (EB-1) ---------------------------------------------------------------

def training_job_event(name, status, region="eu-west-2", reason=None):
    """A training job's state change as the SageMaker developer guide's example shows it ("Events
    that Amazon SageMaker AI sends to Amazon EventBridge", "Training job state change"): the
    description of the job in `detail`, FailureReason when it failed, times in milliseconds."""
    event = {
        "version": "0", "id": "844e2571-85d4-695f-b930-0153b71dcb42",
        "detail-type": "SageMaker Training Job State Change", "source": "aws.sagemaker",
        "account": ACCOUNT, "time": "2026-01-01T14:26:13Z", "region": region,
        "resources": [f"arn:aws:sagemaker:{region}:{ACCOUNT}:training-job/{name}"],
        "detail": {
            "TrainingJobName": name,
            "TrainingJobArn": f"arn:aws:sagemaker:{region}:{ACCOUNT}:training-job/{name}",
            "TrainingJobStatus": status, "SecondaryStatus": status,
            "HyperParameters": {"max_steps": "1000"},
            "AlgorithmSpecification": {"TrainingImage": "image", "TrainingInputMode": "FastFile"},
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/training",
            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2,
                               "VolumeSizeInGB": 200},
            "StoppingCondition": {"MaxRuntimeInSeconds": 259200},
            "CreationTime": "1767270000000", "TrainingStartTime": "1767270300000",
            "TrainingEndTime": "1767277500000", "LastModifiedTime": "1767277560000",
            "SecondaryStatusTransitions": [], "Tags": {},
        },
    }
    if reason:
        event["detail"]["FailureReason"] = reason
    return event


def endpoint_event(name, status, reason=None):
    """An endpoint's state change as the guide's example ("Endpoint state change") shows it, which
    spells the status IN_SERVICE."""
    event = {
        "version": "0", "id": "d2921b5a-b0ad-cace-a8e3-0f159d018e06",
        "detail-type": "SageMaker Endpoint State Change", "source": "aws.sagemaker",
        "account": ACCOUNT, "time": "1583831889050", "region": "eu-west-2",
        "resources": [f"arn:aws:sagemaker:eu-west-2:{ACCOUNT}:endpoint/{name.lower()}"],
        "detail": {"EndpointName": name,
                   "EndpointArn": f"arn:aws:sagemaker:eu-west-2:{ACCOUNT}:endpoint/{name.lower()}",
                   "EndpointConfigName": name,
                   "ProductionVariants": [{"DesiredWeight": 1.0, "DesiredInstanceCount": 1.0}],
                   "EndpointStatus": status, "CreationTime": 1592411992203.0,
                   "LastModifiedTime": 1592411994287.0, "Tags": {}},
    }
    if reason:
        event["detail"]["FailureReason"] = reason
    return event


def matches(pattern, event) -> bool:
    """EventBridge's matching for the syntax these rules use, exact strings and `prefix`
    (tests/infra/event_patterns.py: it needs no moto, which the pipeline's synth step lacks)."""
    return event_patterns.matches(pattern, event)


def _syntax(node):
    """The pattern's operators: only exact strings and prefix, whose semantics are asserted."""
    if isinstance(node, dict):
        return {k for key, value in node.items() for k in _syntax(value)}
    return {"prefix" if isinstance(v, dict) and set(v) == {"prefix"} else
            "exact" if isinstance(v, str) else f"unexpected {v!r}" for v in node}


# EventBridge user guide, "Amazon EventBridge event patterns" and "Content filtering in Amazon
# EventBridge event patterns": (pattern, event, whether it matches), the guide's examples first.
DOCUMENTED = {
    "prefix: the guide's example": (
        {"time": [{"prefix": "2017-10-02"}]}, {"time": "2017-10-02T18:43:48Z"}, True),
    "prefix: another start": (
        {"time": [{"prefix": "2017-10-02"}]}, {"time": "2017-10-03T18:43:48Z"}, False),
    "prefix: the start only, not a substring": (
        {"name": [{"prefix": "maskrcnn-"}]}, {"name": "x-maskrcnn-s3"}, False),
    "prefix: case-sensitive": (
        {"name": [{"prefix": "maskrcnn-"}]}, {"name": "MaskRCNN-s3"}, False),
    "prefix: the whole value": ({"name": [{"prefix": "a-"}]}, {"name": "a-"}, True),
    "exact: equal": ({"state": ["running"]}, {"state": "running"}, True),
    "exact: case-sensitive": ({"state": ["running"]}, {"state": "RUNNING"}, False),
    "exact: not a prefix": ({"name": ["maskrcnn"]}, {"name": "maskrcnn-s3"}, False),
    "exact: a string is not a number": ({"count": ["5"]}, {"count": 5}, False),
    "values of a field: any one": ({"state": ["a", "b"]}, {"state": "b"}, True),
    "values of a field: none": ({"state": ["a", {"prefix": "b"}]}, {"state": "c"}, False),
    "fields: all of them": ({"source": ["s"], "state": ["a"]}, {"source": "s", "state": "b"}, False),
    "fields: others ignored": (
        {"detail": {"state": ["a"]}}, {"source": "s", "detail": {"state": "a", "x": 1}}, True),
    "a missing field": ({"detail": {"state": ["x"]}}, {"detail": {}}, False),
    "a missing object": ({"detail": {"state": ["x"]}}, {"source": "s"}, False),
    "an object where a value is expected": ({"detail": ["x"]}, {"detail": {"x": "x"}}, False),
    "a value where an object is expected": ({"detail": {"state": ["x"]}}, {"detail": "x"}, False),
    "an event array: one element equal": (
        {"resources": ["arn:b"]}, {"resources": ["arn:a", "arn:b"]}, True),
    "an event array: one element with the prefix": (
        {"resources": [{"prefix": "arn:b"}]}, {"resources": ["arn:a", "arn:b/1"]}, True),
    "an event array: none": ({"resources": ["arn:c"]}, {"resources": ["arn:a", "arn:b"]}, False),
}


@pytest.mark.parametrize("case", DOCUMENTED)
def test_the_matcher_keeps_eventbridges_documented_semantics(case):
    """EB-1: strings match exactly and case-sensitively; prefix matches the start of a string;
    every field of the pattern must match, any one value of a field; a missing field matches
    nothing."""
    pattern, event, expected = DOCUMENTED[case]
    assert matches(pattern, event) is expected


@pytest.mark.parametrize("pattern", [
    {"name": [{"suffix": "-dev"}]}, {"name": [{"wildcard": "maskrcnn-*"}]},
    {"name": [{"anything-but": {"prefix": "maskrcnn-dev-"}}]}, {"name": [{"exists": True}]},
    {"name": [{"prefix": {"equals-ignore-case": "m"}}]}, {"name": [{"prefix": "a", "suffix": "b"}]},
    {"count": [5]}, {"name": [None]}, {"name": []}, {"name": "maskrcnn"},
    {"$or": [{"a": ["b"]}, {"c": ["d"]}]}, {}])
def test_the_matcher_refuses_what_it_does_not_implement(pattern):
    """A rule that uses other syntax needs the matcher extended (and held to the guide and moto)
    first: it is refused, not answered."""
    with pytest.raises(event_patterns.UnsupportedPattern):
        matches(pattern, {"name": "maskrcnn-s3", "count": 5})


def moto_matcher():
    """moto's EventBridge matcher (moto.events.models.EventPattern), which requirements-dev.txt
    installs and the pipeline's synth step (requirements-infra.txt) does not: the test is skipped
    there only. An environment with boto3 but not moto is the main suite's broken, and fails."""
    try:
        from moto.events.models import EventPattern, EventPatternParser
    except ImportError:
        if importlib.util.find_spec("boto3") is not None:
            raise AssertionError("boto3 without moto: requirements-dev.txt installs both")
        pytest.skip("moto is not installed (requirements-infra.txt): the cross-check against "
                    "moto's matcher runs in the main suite")

    def moto_matches(pattern, event):
        raw = json.dumps(pattern)
        return EventPattern(raw, EventPatternParser(raw).parse()).matches_event(event)
    return moto_matches


def _rule_cases():
    """The rules' patterns of four deployments, two pairs of which overlap, against their own,
    each other's and unrelated events of every status."""
    names = ("maskrcnn", "maskrcnn-dev", "mrcnn", "mrcnn-dev")
    jobs = [f"{n}-s3-1a2b3c-20260101120000" for n in names] + [
        "maskrcnn-dev-s3-1a2b3c-20260101120000", "x-maskrcnn-s3-1a2b3c-20260101120000",
        "maskrcnnx-s3-1a2b3c-20260101120000", "MASKRCNN-s3-1a2b3c-20260101120000"]
    for name in names:
        pattern = monitoring.training_job_pattern(name)
        for job in jobs:
            for status in ("Completed", "Failed", "Stopped", "InProgress", "Stopping"):
                yield pattern, training_job_event(job, status, reason="AlgorithmError: x")
        pattern = monitoring.endpoint_failure_pattern(name)
        for job in jobs:
            for status in monitoring.ENDPOINT_FAILED + ("InService", "IN_SERVICE", "Creating"):
                yield pattern, endpoint_event(job.replace("-s3-", "-endpoint-"), status)
    foreign = training_job_event("maskrcnn-s3-1a2b3c-20260101120000", "Completed")
    foreign["source"] = "com.example"
    yield monitoring.training_job_pattern("maskrcnn"), foreign


def test_the_matcher_answers_as_motos_does(default_app, variant_app):
    """EB-1, cross-checked where moto is installed: the documented cases and the rules' own
    patterns (as synthesized, and for the overlapping names) answer the same in both matchers,
    and moto too answers the documented cases as the guide says."""
    moto_matches = moto_matcher()
    for case, (pattern, event, expected) in DOCUMENTED.items():
        assert moto_matches(pattern, event) is expected is matches(pattern, event), case
    synthesized = [r["EventPattern"] for app in (default_app, variant_app)
                   for r in rules(app.deployment).values()]
    cases = list(_rule_cases())
    assert {json.dumps(p, sort_keys=True) for p in synthesized} <= {
        json.dumps(p, sort_keys=True) for p, _ in cases}
    outcomes = set()
    for pattern, event in cases:
        ours = matches(pattern, event)
        assert ours is moto_matches(pattern, event), (pattern, event["detail"])
        outcomes.add(ours)
    assert outcomes == {True, False}


@pytest.mark.parametrize("app_name, prefix", [("default_app", "maskrcnn"), ("variant_app", "mrcnn-dev")])
def test_the_rule_hears_of_every_finished_job_of_this_deployment(request, app_name, prefix):
    """EB-1: SageMaker's training job state changes of this deployment's jobs (`<prefix>-...`,
    the staging job too) that reached Completed, Failed or Stopped; not a job still running, not a
    name that merely contains the prefix, not another source's event."""
    raw = request.getfixturevalue(app_name).deployment
    rule = rules(raw)[f"{prefix}-training-jobs-finished"]
    pattern = rule["EventPattern"]
    assert pattern == monitoring.training_job_pattern(prefix)
    assert _syntax(pattern) == {"exact", "prefix"}
    ours = f"{prefix}-s3-1a2b3c-20260101120000"
    for status in ("Completed", "Failed", "Stopped"):
        assert matches(pattern, training_job_event(ours, status, reason="AlgorithmError: x"))
    assert matches(pattern, training_job_event(f"{prefix}-stage-coco-20260101120000", "Failed"))
    for status in ("InProgress", "Stopping"):
        assert not matches(pattern, training_job_event(ours, status))
    assert not matches(pattern, training_job_event("other-team-s3-1a2b3c-20260101120000", "Failed"))
    # A job name that only contains the prefix, the prefix without its '-', another case.
    assert not matches(pattern, training_job_event(f"x-{ours}", "Completed"))
    assert not matches(pattern, training_job_event(f"{prefix}x-s3-1a2b3c-20260101120000", "Failed"))
    assert not matches(pattern, training_job_event(ours.upper(), "Completed"))
    foreign = training_job_event(ours, "Completed")
    foreign["source"] = "com.example"
    assert not matches(pattern, foreign)


@pytest.mark.parametrize("app_name, synthesized, shorter, longer", [
    ("default_app", "maskrcnn", "maskrcnn", "maskrcnn-dev"),
    ("variant_app", "mrcnn-dev", "mrcnn", "mrcnn-dev")])
def test_a_deployment_hears_of_the_deployment_named_after_it_plus_a_suffix(
        request, app_name, synthesized, shorter, longer):
    """EB-1, the overlap that no pattern can remove: two deployments of one account and region,
    one named as the other plus `-dev`. The shorter's rules hear of the longer's jobs and
    endpoints; the longer's do not hear of the shorter's. No pattern on the name can tell them
    apart (prefix, suffix, wildcard and anything-but all look at the name): the shorter's run
    `dev-s3-1a2b3c` (a valid run name, notebooks/maskrcnn_launcher/training/plan.py) is the very job name
    of the longer's run `s3-1a2b3c`, and both rules hear of it. One rule of each pair is the
    synthesized one, the other the same function's for the other name."""
    raw = request.getfixturevalue(app_name).deployment
    synthesized_rules = rules(raw)
    patterns = {name: (monitoring.training_job_pattern(name),
                       monitoring.endpoint_failure_pattern(name)) for name in (shorter, longer)}
    assert patterns[synthesized] == (
        synthesized_rules[f"{synthesized}-training-jobs-finished"]["EventPattern"],
        synthesized_rules[f"{synthesized}-endpoints-failed"]["EventPattern"])
    (short_jobs, short_endpoints), (long_jobs, long_endpoints) = patterns[shorter], patterns[longer]
    time = "20260101120000"
    long_job = training_job_event(f"{longer}-s3-1a2b3c-{time}", "Completed")
    short_job = training_job_event(f"{shorter}-s3-1a2b3c-{time}", "Completed")
    assert matches(long_jobs, long_job) and matches(short_jobs, long_job)  # the overlap
    assert matches(short_jobs, short_job) and not matches(long_jobs, short_job)
    long_endpoint = endpoint_event(f"{longer}-endpoint-{time}", "Failed")
    short_endpoint = endpoint_event(f"{shorter}-endpoint-{time}", "Failed")
    assert matches(long_endpoints, long_endpoint) and matches(short_endpoints, long_endpoint)
    assert matches(short_endpoints, short_endpoint) and not matches(long_endpoints, short_endpoint)
    # One name, either deployment's: the names themselves overlap, not only the patterns.
    assert f"{shorter}-dev-s3-1a2b3c-{time}" == f"{longer}-s3-1a2b3c-{time}"


def test_the_endpoint_rule_hears_of_this_deployments_failed_endpoints(default_app):
    """EB-1: endpoint state changes to Failed (either spelling: the guide's example spells states
    IN_SERVICE, the API InService), or an update that failed to roll back, of `<prefix>-...`."""
    pattern = rules(default_app.deployment)["maskrcnn-endpoints-failed"]["EventPattern"]
    assert pattern == monitoring.endpoint_failure_pattern("maskrcnn")
    assert _syntax(pattern) == {"exact", "prefix"}
    for status in ("Failed", "FAILED", "UpdateRollbackFailed", "UPDATE_ROLLBACK_FAILED"):
        assert matches(pattern, endpoint_event("maskrcnn-endpoint-20260101", status))
    for status in ("IN_SERVICE", "InService", "Creating", "Deleting"):
        assert not matches(pattern, endpoint_event("maskrcnn-endpoint-20260101", status))
    assert not matches(pattern, endpoint_event("other-endpoint", "Failed"))
    assert not matches(pattern, endpoint_event("maskrcnnx-endpoint", "Failed"))


# --- the messages (EB-2) ---------------------------------------------------------------------

def _path(event, path):
    """A JSON path of dot notation (what InputPathsMap takes) in the event; None if absent."""
    node = event
    for part in path.removeprefix("$.").split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def render(target, template, event, region="eu-west-2"):
    """The message EventBridge makes of `event` (EventBridge user guide, "Amazon EventBridge
    input transformation"): each <variable> of InputTemplate replaced by the value its JSON path
    finds, not escaped; a variable whose path the event lacks is not created and does not appear.
    The template's lines are JSON strings, one per line, as SNS receives them."""
    transformer = target["InputTransformer"]
    text = resolve(transformer["InputTemplate"], template, region)
    for name, path in transformer["InputPathsMap"].items():
        value = _path(event, path)
        text = text.replace(f"<{name}>", "" if value is None else str(value))
    assert not re.search(r"<[\w.-]+>", text), text  # every placeholder is a variable
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("region, console", [
    ("eu-west-2", "https://console.aws.amazon.com"), ("cn-north-1", "https://console.amazonaws.cn")])
def test_a_finished_job_reads_its_name_status_reason_times_and_console_page(default_app, region,
                                                                            console):
    """EB-2: the job's name and status, its FailureReason, start and end (EventBridge cannot
    subtract: SageMaker's milliseconds, and the console page shows the duration), and the job's
    console page in the partition's console."""
    raw = default_app.deployment
    target, = rules(raw)["maskrcnn-training-jobs-finished"]["Targets"]
    assert "RoleArn" not in target  # SNS targets use the topic's policy (SNS-1)
    name = "maskrcnn-fsx-1a2b3c-20260101120000"
    failed = render(target, raw, training_job_event(
        name, "Failed", region, reason="AlgorithmError: rank 0 ran out of GPU memory"), region)
    assert failed == [
        f"SageMaker training job {name}: Failed (Failed)",
        "FailureReason: AlgorithmError: rank 0 ran out of GPU memory",
        "Training started at 1767270300000 and ended at 1767277500000 (milliseconds since "
        "1970-01-01 UTC); this state change at 2026-01-01T14:26:13Z. The duration is on the job's "
        "page:",
        f"{console}/sagemaker/home?region={region}#/jobs/{name}"]
    completed = render(target, raw, training_job_event(name, "Completed", region), region)
    assert completed[0] == f"SageMaker training job {name}: Completed (Completed)"
    assert completed[1] == "FailureReason: "  # no reason: the variable is not created


def test_a_failed_endpoint_reads_its_name_reason_and_how_to_delete_it(default_app):
    raw = default_app.deployment
    target, = rules(raw)["maskrcnn-endpoints-failed"]["Targets"]
    name = "maskrcnn-endpoint-20260101120000"
    assert render(target, raw, endpoint_event(name, "FAILED", reason="ping health check")) == [
        f"SageMaker endpoint {name}: FAILED", "FailureReason: ping health check",
        "A failed endpoint bills nothing more but stays until deleted: python -m maskrcnn_launcher "
        f"delete-endpoint {name}",
        f"https://console.aws.amazon.com/sagemaker/home?region=eu-west-2#/endpoints/{name}"]


# --- the topic (SNS-1, SNS-2) ----------------------------------------------------------------

def _statement(statements, sid):
    found, = [s for s in statements if s.get("Sid") == sid]
    return found


def _topic_key(raw):
    """(logical id, resource) of the notification topic's own key."""
    data_key_id, _ = data_key(raw)
    found = [(k, v) for k, v in of_type(raw, "AWS::KMS::Key").items() if k != data_key_id]
    assert len(found) == 1, sorted(of_type(raw, "AWS::KMS::Key"))
    return found[0]


def _services(statements):
    return {s["Principal"]["Service"] for s in statements
            if isinstance(s.get("Principal"), dict) and isinstance(s["Principal"].get("Service"), str)}


def test_the_topic_has_a_key_of_its_own_which_eventbridge_and_the_alarms_may_use(default_app):
    """SNS-1: EventBridge publishes to the encrypted topic with sns:Publish in the topic policy
    and kms:GenerateDataKey and kms:Decrypt in the key policy, neither with a condition (the SNS
    guide: aws:SourceAccount/aws:SourceArn in the key policy are not supported for
    EventBridge-to-encrypted-topic delivery; the EventBridge guide: no Condition in the topic
    policy's statement for it). So the topic has a key of its own, rotating, deleted with the
    stack (it protects no stored data; a kept key bills monthly), used by nothing else, and the data key's policy names neither publisher. SNS-2: the
    deployment's CloudWatch alarms (alarm:<prefix>-*) by aws:SourceArn and aws:SourceAccount. The
    topic refuses publishing without TLS."""
    raw = default_app.deployment
    topic_id, topic = only(raw, "AWS::SNS::Topic")
    key_id, key = _topic_key(raw)
    assert key_id.startswith("MonitoringTopicKey")
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == key["UpdateReplacePolicy"] == "Delete"
    assert key["Properties"]["PendingWindowInDays"] == 7
    users = sorted(k for k, r in raw["Resources"].items() if k != key_id and key_id in json.dumps(r))
    assert users == [topic_id], users  # nothing but the topic uses the key
    assert key_id not in json.dumps(raw.get("Outputs", {}))
    data_statements = data_key(raw)[1]["Properties"]["KeyPolicy"]["Statement"]
    assert not _services(data_statements) & {"events.amazonaws.com", "cloudwatch.amazonaws.com"}
    assert not {s.get("Sid") for s in data_statements} & {"EventBridgeRulesUseTheTopicsKey",
                                                          "IdleEndpointAlarmsUseTheTopicsKey"}
    assert topic["Properties"]["TopicName"] == "maskrcnn-notifications"
    policy = only(raw, "AWS::SNS::TopicPolicy")[1]["Properties"]
    assert policy["Topics"] == [{"Ref": topic_id}]
    statements = policy["PolicyDocument"]["Statement"]
    events = _statement(statements, "EventBridgeRulesPublish")
    assert events == {"Sid": "EventBridgeRulesPublish", "Effect": "Allow", "Action": "sns:Publish",
                      "Principal": {"Service": "events.amazonaws.com"},
                      "Resource": {"Ref": topic_id}}
    alarms = f"arn:aws:cloudwatch:eu-west-2:{ACCOUNT}:alarm:maskrcnn-*"
    cloudwatch = _statement(statements, "IdleEndpointAlarmsPublish")
    assert cloudwatch["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert resolve(cloudwatch["Condition"]["ArnLike"]["aws:SourceArn"], raw) == alarms
    assert resolve(cloudwatch["Condition"]["StringEquals"]["aws:SourceAccount"], raw) == ACCOUNT
    deny, = [s for s in statements if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert {s["Sid"] for s in statements} == {"EventBridgeRulesPublish", "IdleEndpointAlarmsPublish",
                                              deny["Sid"]}
    key_statements = key["Properties"]["KeyPolicy"]["Statement"]
    # The account's administration of the key (CDK's default key policy) and the two publishers.
    assert len(key_statements) == 3
    assert _services(key_statements) == {"events.amazonaws.com", "cloudwatch.amazonaws.com"}
    for sid, principal in (("EventBridgeRulesUseTheTopicsKey", "events.amazonaws.com"),
                           ("IdleEndpointAlarmsUseTheTopicsKey",
                            "cloudwatch.amazonaws.com")):
        statement = _statement(key_statements, sid)
        assert statement["Principal"] == {"Service": principal}
        assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
        assert statement["Resource"] == "*"  # a key policy's: this key
    assert "Condition" not in _statement(key_statements, "EventBridgeRulesUseTheTopicsKey")
    alarms_key = _statement(key_statements, "IdleEndpointAlarmsUseTheTopicsKey")["Condition"]
    assert resolve(alarms_key["ArnLike"]["aws:SourceArn"], raw) == alarms
    assert resolve(alarms_key["StringEquals"]["aws:SourceAccount"], raw) == ACCOUNT
    # Both rules publish to it, and the launcher learns it from SSM.
    for rule in rules(raw).values():
        target, = rule["Targets"]
        assert target["Arn"] == {"Ref": topic_id}
    parameter = next(p["Properties"] for p in of_type(raw, "AWS::SSM::Parameter").values()
                     if p["Properties"]["Name"] == "/maskrcnn/notification-topic-arn")
    assert parameter["Value"] == {"Ref": topic_id}
    assert not of_type(raw, "AWS::SNS::Subscription")  # no email address given


def test_an_email_address_is_subscribed_to_the_topic(no_fsx_app):
    raw = no_fsx_app.deployment
    topic_id, _ = only(raw, "AWS::SNS::Topic")
    subscription = only(raw, "AWS::SNS::Subscription")[1]["Properties"]
    assert subscription == {"Protocol": "email", "Endpoint": "ml-team@example.com",
                            "TopicArn": {"Ref": topic_id}}


def test_an_existing_topic_is_used_as_it_is(variant_app):
    """SNS-1: with maskrcnn:notification_topic_arn the stack creates no topic, no key for it, and
    writes neither its policy nor its key's (the topic's owner allows EventBridge and the alarms,
    docs/settings.md "Notifications"); the data key's policy names neither publisher; the rules,
    the SSM parameter and the idle alarms' IAM name the existing topic."""
    raw = variant_app.deployment
    assert not of_type(raw, "AWS::SNS::Topic") and not of_type(raw, "AWS::SNS::TopicPolicy")
    key_id, key = only(raw, "AWS::KMS::Key")  # the data key only
    assert (key_id, key) == data_key(raw)
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    assert not _services(statements) & {"events.amazonaws.com", "cloudwatch.amazonaws.com"}
    assert not {s.get("Sid") for s in statements} & {"EventBridgeRulesUseTheTopicsKey",
                                                     "IdleEndpointAlarmsUseTheTopicsKey"}
    for rule in rules(raw).values():
        target, = rule["Targets"]
        assert target["Arn"] == EXISTING_TOPIC
    parameter = next(p["Properties"] for p in of_type(raw, "AWS::SSM::Parameter").values()
                     if p["Properties"]["Name"] == "/mrcnn-dev/notification-topic-arn")
    assert parameter["Value"] == EXISTING_TOPIC
    put = _statement(statements_of(raw, "NotebookRole"), "IdleAlarmsNotifyTheDeploymentsTopicOnly")
    assert put["Condition"]["ForAllValues:StringEquals"] == {"cloudwatch:AlarmActions": [EXISTING_TOPIC]}


# --- the idle alarms' permissions (CW-3) --------------------------------------------------------

def test_the_notebook_role_may_create_idle_alarms_that_notify_the_deployments_topic_only(default_app):
    """CW-3: PutMetricAlarm and DeleteAlarms on alarms named `<prefix>-*` only; an alarm it puts
    must have actions, all of them the deployment's topic (the Null guard). TensorBoard's
    summaries need nothing new: the notebook role reads the output prefix already (TRN-2)."""
    raw = default_app.deployment
    topic_id, _ = only(raw, "AWS::SNS::Topic")
    statements = statements_of(raw, "NotebookRole")
    put = _statement(statements, "IdleAlarmsNotifyTheDeploymentsTopicOnly")
    delete = _statement(statements, "DeleteIdleAlarms")
    alarms = f"arn:aws:cloudwatch:eu-west-2:{ACCOUNT}:alarm:maskrcnn-*"
    assert put["Action"] == "cloudwatch:PutMetricAlarm" and resolve(put["Resource"], raw) == alarms
    assert put["Condition"] == {"Null": {"cloudwatch:AlarmActions": "false"},
                                "ForAllValues:StringEquals": {
                                    "cloudwatch:AlarmActions": [{"Ref": topic_id}]}}
    assert delete["Action"] == "cloudwatch:DeleteAlarms" and resolve(delete["Resource"], raw) == alarms
    assert "Condition" not in delete
    # Every other alarm action of the role is target tracking's (IAM-5) or a read on '*'.
    others = [s for s in statements if any(a.startswith("cloudwatch:") for a in
                                           ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
              and s not in (put, delete)]
    for statement in others:
        resources = json.dumps(statement["Resource"])
        assert "TargetTracking-endpoint/maskrcnn-*" in resources or statement["Resource"] == "*", \
            statement
    assert {"s3:GetObject"} <= actions_on(statements, "/jobs/*")


# --- the dashboard (CW-1, CW-2) --------------------------------------------------------------

SEARCH = re.compile(r"^SEARCH\('\{\"(?P<namespace>[^\"]+)\",(?P<dimensions>[\w,]+)\} "
                    r"MetricName=\"(?P<metric>[^\"]+)\" (?P<scope>\w+)=(?P<name>[\w-]+)', "
                    r"'(?P<statistic>\w+)', (?P<period>\d+)\)$")


def dashboard_searches(app, region):
    body = json.loads(resolve(only(app.deployment, "AWS::CloudWatch::Dashboard")[1]["Properties"]
                              ["DashboardBody"], app.deployment, region))
    found = []
    for widget in body["widgets"]:
        for line in widget["properties"].get("metrics", []):
            expression, = [m["expression"] for m in line if isinstance(m, dict)]
            match = SEARCH.match(expression)
            assert match, expression
            found.append({**match.groupdict(), "title": widget["properties"]["title"],
                          "region": widget["properties"]["region"]})
    return found


@pytest.mark.parametrize("app_name, prefix, region", [
    ("default_app", "maskrcnn", "eu-west-2"),  # a region known at deploy only
    ("variant_app", "mrcnn-dev", "eu-south-1")])
def test_the_dashboard_shows_the_jobs_metrics_their_gpus_and_the_endpoints(request, app_name, prefix,
                                                                           region):
    """CW-1: the metric definitions' metrics in /aws/sagemaker/TrainingJobs by TrainingJobName
    (images/s, loss, box and mask AP, names from the contract), the training instances'
    GPUUtilization and GPUMemoryUtilization there by Host (`<job>/algo-N`), the endpoints'
    Invocations, ModelLatency and 4XX/5XX errors in AWS/SageMaker by EndpointName and VariantName.
    CW-2: every series a SEARCH of the deployment's name in the dimension that holds it."""
    app = request.getfixturevalue(app_name)
    searches = dashboard_searches(app, region)
    by_metric = {s["metric"]: s for s in searches}
    assert len(by_metric) == len(searches)  # each metric once
    training = {"train/images_per_sec", "train/loss", "eval/bbox_AP", "eval/segm_AP"}
    assert training <= set(metrics.ALL_METRICS)
    for name in training:
        assert by_metric[name]["namespace"] == "/aws/sagemaker/TrainingJobs"
        assert (by_metric[name]["dimensions"], by_metric[name]["scope"]) == (
            "TrainingJobName", "TrainingJobName")
    for name in ("GPUUtilization", "GPUMemoryUtilization"):
        assert by_metric[name]["namespace"] == "/aws/sagemaker/TrainingJobs"
        assert (by_metric[name]["dimensions"], by_metric[name]["scope"]) == ("Host", "Host")
    serving = {"Invocations": "Sum", "ModelLatency": "Average", "Invocation4XXErrors": "Sum",
               "Invocation5XXErrors": "Sum"}
    for name, statistic in serving.items():
        assert by_metric[name]["namespace"] == "AWS/SageMaker"
        assert by_metric[name]["dimensions"] == "EndpointName,VariantName"
        assert (by_metric[name]["scope"], by_metric[name]["statistic"]) == ("EndpointName", statistic)
    assert set(by_metric) == training | {"GPUUtilization", "GPUMemoryUtilization"} | set(serving)
    assert {s["name"] for s in searches} == {prefix}
    assert {s["region"] for s in searches} == {region}  # the stack's
    assert all(int(s["period"]) == 60 for s in searches)
    dashboard = only(app.deployment, "AWS::CloudWatch::Dashboard")[1]["Properties"]
    assert resolve(dashboard["DashboardName"], app.deployment, region) == f"{prefix}-{region}"
    url = resolve(app.deployment["Outputs"]["DashboardUrl"]["Value"], app.deployment, region)
    assert url == (f"https://console.aws.amazon.com/cloudwatch/home?region={region}"
                   f"#dashboards:name={prefix}-{region}")


def search_shows(term, name):
    """Whether a SEARCH term shows the series of a dimension value `name`, by the CloudWatch user
    guide's rule as CW-2 states it, for names of lowercase letters, digits and '-': the value is
    split into tokens at non-alphanumeric characters, and a term of several tokens matches them
    consecutively. A model of the rule for these names, not CloudWatch."""
    tokens, wanted = re.split(r"[^a-z0-9]+", name), re.split(r"[^a-z0-9]+", term)
    return any(tokens[i:i + len(wanted)] == wanted for i in range(len(tokens)))


@pytest.mark.parametrize("app_name, region", [("default_app", "eu-west-2"),
                                              ("variant_app", "eu-south-1")])
def test_the_dashboard_shows_other_deployments_whose_names_hold_this_ones_and_says_so(
        request, app_name, region):
    """CW-2: a SEARCH term matches tokens, not prefixes, and SEARCH has no prefix operator (an
    exact match, a quoted term, is the whole value: no job is named `<prefix>` alone). Like the
    rules (EB-1), the dashboard of `maskrcnn` shows `maskrcnn-dev`'s jobs, and more than the rules:
    any name holding the name's tokens (`team-maskrcnn-...`); `mrcnn-dev`'s does not show
    `mrcnn`'s. The dashboard's header says so."""
    app = request.getfixturevalue(app_name)
    term, = {s["name"] for s in dashboard_searches(app, region)}
    job = "s3-1a2b3c-20260101120000"
    assert search_shows(term, f"{term}-{job}") and search_shows(term, f"{term}-{job}/algo-1")
    assert search_shows(term, f"{term}-dev-{job}")  # another deployment's, as the rules hear it
    assert search_shows(term, f"team-{term}-{job}")  # not even a prefix
    assert not search_shows(term, f"{term}x-{job}")
    if "-" in term:
        assert not search_shows(term, f"{term.rsplit('-', 1)[0]}-{job}")  # the shorter name's
    body = json.loads(resolve(only(app.deployment, "AWS::CloudWatch::Dashboard")[1]["Properties"]
                              ["DashboardBody"], app.deployment, region))
    header, = [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    assert f"holds `{term}`" in header
    assert "not prefixes: another deployment whose name holds this one's shows too" in header


def test_a_search_holds_the_names_tokens_and_nothing_a_search_would_misread():
    """CW-2: deployment names are lowercase letters, digits and '-': no character a SEARCH term
    must escape (" \\ ( )), and '-' joins tokens into one composite term."""
    expression = monitoring.search("/aws/sagemaker/TrainingJobs", ("TrainingJobName",),
                                   "train/loss", ("TrainingJobName", "mrcnn-dev"), "Average")
    assert expression == ("SEARCH('{\"/aws/sagemaker/TrainingJobs\",TrainingJobName} "
                          "MetricName=\"train/loss\" TrainingJobName=mrcnn-dev', 'Average', 60)")
    assert len(expression) <= 1024  # a search expression's longest query
    unknown = copy.deepcopy(monitoring.TRAINING_GRAPHS) + (("x", ("train/unknown",)),)
    with pytest.raises(ValueError, match="not the jobs' metric definitions"):
        original = monitoring.TRAINING_GRAPHS
        try:
            monitoring.TRAINING_GRAPHS = unknown
            monitoring.dashboard_widgets("maskrcnn")
        finally:
            monitoring.TRAINING_GRAPHS = original
