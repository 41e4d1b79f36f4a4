"""The serving flow's commands: deploy, invoke, endpoints, delete-endpoint."""

import json
import sys

from maskrcnn_launcher.deployment import instances
from maskrcnn_launcher.runs import registry
from maskrcnn_launcher.serving import endpoint_plan, endpoints, invocation

REFUSALS = (endpoint_plan.DeployRequestError,)
FAILURES = (endpoints.DeployError, invocation.InvokeError)


def add_commands(sub) -> None:
    serve = endpoint_plan.DeployOptions()
    dep = sub.add_parser("deploy", help="serve a finished training job's model on an "
                         "auto-scaling endpoint (costs its instances' hourly price until deleted)")
    dep.add_argument("--job", help="training job to serve (default: the deployment's latest "
                     "Completed one)")
    dep.add_argument("--model-package", metavar=f"ARN|{registry.LATEST_APPROVED}",
                     help="serve a version of the deployment's model registry instead of a job: "
                     "refused unless it is Approved")
    dep.add_argument("--endpoint-name", help="name of the model, endpoint configuration and "
                     "endpoint, starting with the deployment's job-name prefix (default: "
                     "<prefix>-endpoint-<UTC time>)")
    dep.add_argument("--instance-type", default=serve.instance_type,
                     help=f"default {serve.instance_type}; GPU families: "
                     + ", ".join(sorted(instances.HOSTING_GPU_FAMILIES)))
    dep.add_argument("--instance-count", type=int, default=serve.instance_count,
                     help="initial instances (default %(default)s)")
    dep.add_argument("--min", type=int, default=serve.min_instances, dest="min_instances",
                     help="auto scaling minimum (default %(default)s)")
    dep.add_argument("--max", type=int, default=serve.max_instances, dest="max_instances",
                     help="auto scaling maximum (default %(default)s)")
    dep.add_argument("--target-invocations", type=float, default=serve.target_invocations,
                     help="target requests per instance per minute (default %(default)s)")
    dep.add_argument("--data-capture", type=int, default=0, metavar="PERCENT",
                     help="capture this percentage of requests and answers to "
                     "s3://<bucket>/<output prefix>data-capture/ (default: off)")
    dep.add_argument("--idle-hours", type=int, default=serve.idle_hours,
                     help="notify the deployment's SNS topic when the endpoint has had no "
                     "invocations for this many hours (1 to "
                     f"{endpoint_plan.MAX_IDLE_HOURS}; default %(default)s)")
    dep.add_argument("--no-idle-alarm", action="store_true",
                     help="no idle alarm (an endpoint nobody calls bills unnoticed)")
    dep.add_argument("--allow-cpu", action="store_true",
                     help="allow a CPU instance type (slow: seconds per image)")
    dep.add_argument("--keep-on-failure", action="store_true",
                     help="when a step fails, keep what was created (default: delete it)")
    dep.add_argument("--dry-run", action="store_true",
                     help="check and print the requests; create nothing")
    delete_p = sub.add_parser("delete-endpoint", help="delete an endpoint, its auto scaling, "
                              "endpoint configuration and model (what is gone already is skipped)")
    delete_p.add_argument("endpoint_name")
    invoke_p = sub.add_parser("invoke", help="send images to an endpoint, print its detections")
    invoke_p.add_argument("endpoint_name")
    invoke_p.add_argument("images", nargs="+", metavar="IMAGE", help="JPEG or PNG files")
    invoke_p.add_argument("--score-threshold", type=float,
                          help="drop weaker detections (the endpoint's default otherwise)")
    sub.add_parser("endpoints", help="list the deployment's endpoints: status, instances, "
                   "hourly price class, age, idle alarm")


def deploy(args, deployment, boto_session) -> None:
    options = endpoint_plan.DeployOptions(
        job_name=args.job, model_package=args.model_package,
        endpoint_name=args.endpoint_name, instance_type=args.instance_type,
        instance_count=args.instance_count, min_instances=args.min_instances,
        max_instances=args.max_instances, target_invocations=args.target_invocations,
        require_gpu=not args.allow_cpu, data_capture_percent=args.data_capture,
        idle_hours=None if args.no_idle_alarm else args.idle_hours)
    plan = endpoint_plan.plan(deployment, options, boto_session)
    for line in endpoint_plan.describe_plan(plan):
        print(line, file=sys.stderr)
    if args.dry_run:
        print(json.dumps(plan.requests(), indent=1))
        return
    result = endpoints.deploy(plan, boto_session, echo=lambda line: print(line, file=sys.stderr),
                              rollback_on_failure=not args.keep_on_failure)
    print(f"endpoint {plan.name} is InService and costs its instances' hourly price until "
          f"deleted: python -m maskrcnn_launcher delete-endpoint {plan.name}", file=sys.stderr)
    print(json.dumps(result, indent=1))


def check_invoke(args) -> None:
    """Refused before anything is read or sent."""
    invocation.check_score_threshold(args.score_threshold)


def invoke(args, deployment, boto_session) -> None:
    runtime = boto_session.client("sagemaker-runtime")
    answers = {}
    for path in args.images:
        try:
            with open(path, "rb") as f:
                body = f.read()
        except OSError as error:
            raise endpoint_plan.DeployRequestError(f"cannot read image {path}: {error}") from None
        answers[path] = invocation.invoke(runtime, args.endpoint_name, body,
                                          score_threshold=args.score_threshold)
    print(json.dumps(answers, indent=1))


def list_endpoints(args, deployment, boto_session) -> None:
    found = endpoints.endpoints(boto_session.client("sagemaker"), deployment,
                                boto_session.client("cloudwatch"))
    for line in endpoints.endpoint_lines(found) or ["no endpoints"]:
        print(line, file=sys.stderr)
    print("price classes per instance-hour: " + "; ".join(
        f"{c} {what}" for c, what in instances.PRICE_CLASSES.items()), file=sys.stderr)
    print(json.dumps(found, indent=1))


COMMANDS = {
    "deploy": deploy,
    "delete-endpoint": lambda args, deployment, boto_session: endpoints.delete(
        deployment, args.endpoint_name, boto_session),
    "invoke": invoke,
    "endpoints": list_endpoints,
}
CHECKS = {"invoke": check_invoke}
