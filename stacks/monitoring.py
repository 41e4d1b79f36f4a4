"""Monitoring: who hears of a finished job, and what a run looks like while it runs.

- Notifications: an SNS topic (the stack's own, encrypted with a key of its own, or an existing
  one named in maskrcnn:notification_topic_arn), an optional email subscription, and two
  EventBridge rules: this deployment's training jobs (names `<prefix>-...`) reaching Completed,
  Failed or Stopped, and its endpoints failing, each with a readable message. The launcher's idle
  endpoint alarms (notebooks/maskrcnn_launcher/serving/endpoint_plan.py) notify the same topic.
- A CloudWatch dashboard of the deployment: the jobs' metrics from the metric definitions
  (images/s, loss, AP), the training instances' GPU utilization and memory, and the endpoints'
  invocations, latency and errors. Jobs and endpoints are created at run time, so every graph is
  a SEARCH expression scoped to the deployment's name.

The AWS rules behind each piece: docs/aws-rules.md EB-1, EB-2, SNS-1, SNS-2, CW-1, CW-2.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from maskrcnn_contract import metrics

from stacks.config import DeploymentConfig
from stacks.key import notification_key
from stacks.outputs import console_domain, output

EVENTS = "events.amazonaws.com"
CLOUDWATCH = "cloudwatch.amazonaws.com"
SOURCE = "aws.sagemaker"
# SageMaker developer guide, "Events that Amazon SageMaker AI sends to Amazon EventBridge" (EB-1).
TRAINING_JOB_EVENT = "SageMaker Training Job State Change"
ENDPOINT_EVENT = "SageMaker Endpoint State Change"
FINISHED = ("Completed", "Failed", "Stopped")
# The guide's endpoint example spells a status IN_SERVICE, the API InService: both spellings of
# the failed ones (Failed; UpdateRollbackFailed, an update that failed and could not roll back).
ENDPOINT_FAILED = ("Failed", "FAILED", "UpdateRollbackFailed", "UPDATE_ROLLBACK_FAILED")
# The jobs' own metrics (the contract's metric definitions) each graph shows, by title.
TRAINING_GRAPHS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("Images per second (all ranks)", ("train/images_per_sec",)),
    ("Loss", ("train/loss",)),
    ("COCO AP (box, mask)", ("eval/bbox_AP", "eval/segm_AP")),
)
TRAINING_NAMESPACE = "/aws/sagemaker/TrainingJobs"
ENDPOINT_NAMESPACE = "AWS/SageMaker"
PERIOD = Duration.minutes(1)


def training_job_pattern(prefix: str) -> Dict[str, Any]:
    """The deployment's training jobs that finished: names `<prefix>-...`, whatever the run."""
    return {"source": [SOURCE], "detail-type": [TRAINING_JOB_EVENT],
            "detail": {"TrainingJobName": [{"prefix": f"{prefix}-"}],
                       "TrainingJobStatus": list(FINISHED)}}


def endpoint_failure_pattern(prefix: str) -> Dict[str, Any]:
    return {"source": [SOURCE], "detail-type": [ENDPOINT_EVENT],
            "detail": {"EndpointName": [{"prefix": f"{prefix}-"}],
                       "EndpointStatus": list(ENDPOINT_FAILED)}}


def training_job_message(console: str) -> List[str]:
    """The lines of a finished job's message. EventBridge substitutes values only, it cannot
    subtract: the start and end are SageMaker's (milliseconds since 1970-01-01 UTC), the event's
    time is ISO 8601, and the console page shows the duration (EB-2)."""
    job = events.EventField.from_path("$.detail.TrainingJobName")
    region = events.EventField.from_path("$.region")
    return [
        f"SageMaker training job {job}: "
        f"{events.EventField.from_path('$.detail.TrainingJobStatus')} "
        f"({events.EventField.from_path('$.detail.SecondaryStatus')})",
        f"FailureReason: {events.EventField.from_path('$.detail.FailureReason')}",
        f"Training started at {events.EventField.from_path('$.detail.TrainingStartTime')} "
        "and ended "
        f"at {events.EventField.from_path('$.detail.TrainingEndTime')} (milliseconds since "
        f"1970-01-01 UTC); this state change at {events.EventField.time}. The duration is on the "
        "job's page:",
        f"https://{console}/sagemaker/home?region={region}#/jobs/{job}",
    ]


def endpoint_failure_message(console: str) -> List[str]:
    endpoint = events.EventField.from_path("$.detail.EndpointName")
    region = events.EventField.from_path("$.region")
    return [
        f"SageMaker endpoint {endpoint}: {events.EventField.from_path('$.detail.EndpointStatus')}",
        f"FailureReason: {events.EventField.from_path('$.detail.FailureReason')}",
        "A failed endpoint bills nothing more but stays until deleted: python -m maskrcnn_launcher "
        f"delete-endpoint {endpoint}",
        f"https://{console}/sagemaker/home?region={region}#/endpoints/{endpoint}",
    ]


@jsii.implements(events.IRuleTarget)
class _Topic:
    """An SNS topic as a rule's target, with a message and no role: EventBridge publishes under
    the topic's resource policy, which this stack writes itself (SNS-1), or the owner of an
    existing topic writes (docs/settings.md, "Notifications")."""

    def __init__(self, topic_arn: str, message: events.RuleTargetInput) -> None:
        self.topic_arn, self.message = topic_arn, message

    def bind(self, _rule, _id=None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self.topic_arn, input=self.message)


class Monitoring(Construct):
    """The notification topic and its rules, and the deployment's dashboard."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.prefix = prefix = config.deployment_name  # the job-name prefix (stacks/training.py)
        self.owns_topic = config.notification_topic_arn is None
        # The topic's own key, not the data key: EventBridge's use of it cannot be conditioned
        # (SNS-1), so it may use a key that encrypts nothing else. None with an existing topic.
        self.topic_key: Optional[kms.Key] = None
        topic: sns.ITopic
        if self.owns_topic:
            self.topic_key = notification_key(self, "TopicKey", prefix)
            topic = sns.Topic(self, "Topic", topic_name=f"{prefix}-notifications",
                              display_name=f"{prefix} training", master_key=self.topic_key,
                              enforce_ssl=True)
            self._allow_publishers(topic, self.topic_key, stack)
        else:
            topic = sns.Topic.from_topic_arn(self, "Topic", config.notification_topic_arn)
        self.topic_arn: str = topic.topic_arn
        if config.notification_email:
            sns.Subscription(self, "Email", topic=topic, protocol=sns.SubscriptionProtocol.EMAIL,
                             endpoint=config.notification_email)

        console = console_domain(self)
        self.rules = [
            events.Rule(self, construct, rule_name=f"{prefix}-{name}",
                        description=f"{prefix}: {what} -> SNS",
                        event_pattern=events.EventPattern(source=pattern["source"],
                                                          detail_type=pattern["detail-type"],
                                                          detail=pattern["detail"]),
                        targets=[_Topic(self.topic_arn, events.RuleTargetInput.from_multiline_text(
                            "\n".join(message)))])
            for construct, name, what, pattern, message in (
                ("TrainingJobsFinished", "training-jobs-finished",
                 f"training jobs {prefix}-* Completed, Failed or Stopped",
                 training_job_pattern(prefix), training_job_message(console)),
                ("EndpointsFailed", "endpoints-failed", f"endpoints {prefix}-* Failed",
                 endpoint_failure_pattern(prefix), endpoint_failure_message(console)))]

        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"{prefix}-{stack.region}",
            widgets=dashboard_widgets(prefix))
        output(self, "NotificationTopicArn", self.topic_arn,
               description="SNS topic of finished jobs, failed and idle endpoints: subscribe to it")
        output(self, "DashboardUrl", f"https://{console}/cloudwatch/home?region={stack.region}"
                                     f"#dashboards:name={prefix}-{stack.region}")

    def _allow_publishers(self, topic: sns.Topic, key: kms.IKey, stack: Stack) -> None:
        """EventBridge and the launcher's CloudWatch alarms publish to the encrypted topic: each
        needs sns:Publish in the topic policy and the topic's key in that key's policy (SNS-1,
        SNS-2)."""
        alarms = (f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}"
                  f":alarm:{self.prefix}-*")
        publishers = (
            # SNS developer guide: a condition on EventBridge's use of the key is not supported for
            # EventBridge-to-encrypted-topic delivery, and the EventBridge guide allows no
            # Condition in the topic policy's statement for it (SNS-1).
            ("EventBridgeRules", EVENTS, None),
            # CloudWatch user guide, "Setting up Amazon SNS notifications": the alarms of this
            # account, here this deployment's (<prefix>-*), by aws:SourceArn and aws:SourceAccount
            # (SNS-2).
            ("IdleEndpointAlarms", CLOUDWATCH,
             {"ArnLike": {"aws:SourceArn": alarms},
              "StringEquals": {"aws:SourceAccount": stack.account}}),
        )
        for name, service, conditions in publishers:
            topic.add_to_resource_policy(iam.PolicyStatement(
                sid=f"{name}Publish", principals=[iam.ServicePrincipal(service)],
                actions=["sns:Publish"], resources=[topic.topic_arn], conditions=conditions))
            key.add_to_resource_policy(iam.PolicyStatement(
                sid=f"{name}UseTheTopicsKey", principals=[iam.ServicePrincipal(service)],
                actions=["kms:GenerateDataKey", "kms:Decrypt"], resources=["*"],
                conditions=conditions))


# --- the dashboard ---------------------------------------------------------------------------

def search(namespace: str, dimensions: Tuple[str, ...], metric: str, scope: Tuple[str, str],
           statistic: str) -> str:
    """A CloudWatch SEARCH expression: `metric` in `namespace` with exactly `dimensions`, whose
    dimension `scope[0]` holds the token(s) `scope[1]` (CW-2: SEARCH matches tokens, not
    prefixes)."""
    schema = ",".join([f'"{namespace}"', *dimensions])
    dimension, name = scope
    return (f"SEARCH('{{{schema}}} MetricName=\"{metric}\" {dimension}={name}', "
            f"'{statistic}', {int(PERIOD.to_seconds())})")


def _graph(title: str, expressions: List[Tuple[str, str]], unit: Optional[str] = None,
           width: int = 8) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(
        title=title, width=width, height=6,
        left=[cloudwatch.MathExpression(expression=expression, label=label, period=PERIOD,
                                        using_metrics={})
              for label, expression in expressions],
        left_y_axis=cloudwatch.YAxisProps(label=unit, show_units=False) if unit else None)


def dashboard_widgets(prefix: str) -> List[List[cloudwatch.IWidget]]:
    """Rows: the jobs' metrics, their instances, the endpoints. Series are the deployment's jobs
    (dimension TrainingJobName), their hosts (`<job>/algo-N`) and endpoints (EndpointName,
    VariantName), CW-1."""
    jobs = ("TrainingJobName", prefix)
    hosts = ("Host", prefix)
    endpoints = ("EndpointName", prefix)
    job_metric = lambda name: search(  # noqa: E731
        TRAINING_NAMESPACE, ("TrainingJobName",), name, jobs, "Average")
    host_metric = lambda name: search(TRAINING_NAMESPACE, ("Host",), name, hosts, "Average")  # noqa: E731
    endpoint_metric = lambda name, statistic: search(  # noqa: E731
        ENDPOINT_NAMESPACE, ("EndpointName", "VariantName"), name, endpoints, statistic)
    undeclared = {m for _, names in TRAINING_GRAPHS for m in names} - set(metrics.ALL_METRICS)
    if undeclared:
        raise ValueError(f"dashboard metrics {sorted(undeclared)} are not the jobs' metric "
                         "definitions (maskrcnn_contract/metrics.py)")
    header = cloudwatch.TextWidget(width=24, height=2, markdown=(
        f"## {prefix}: training jobs and endpoints\n"
        f"Every series is a job, host or endpoint whose name holds `{prefix}` (SEARCH matches "
        "name tokens, not prefixes: another deployment whose name holds this one's shows too). "
        "Metrics appear once a job or endpoint reports them; SEARCH finds those of the last two "
        "weeks."))
    training: List[cloudwatch.IWidget] = [
        _graph(title, [("", job_metric(name)) for name in names])
        for title, names in TRAINING_GRAPHS]
    instances: List[cloudwatch.IWidget] = [
        _graph("GPU utilization per host (% summed over its GPUs)",
               [("", host_metric("GPUUtilization"))], "%", width=12),
        _graph("GPU memory per host (% summed over its GPUs)",
               [("", host_metric("GPUMemoryUtilization"))], "%", width=12),
    ]
    serving: List[cloudwatch.IWidget] = [
        _graph("Endpoint invocations (per minute)", [("", endpoint_metric("Invocations", "Sum"))]),
        _graph("Endpoint model latency (microseconds)",
               [("", endpoint_metric("ModelLatency", "Average"))], "µs"),
        _graph("Endpoint errors (per minute)",
               [("4XX ", endpoint_metric("Invocation4XXErrors", "Sum")),
                ("5XX ", endpoint_metric("Invocation5XXErrors", "Sum"))]),
    ]
    return [[header], training, instances, serving]
