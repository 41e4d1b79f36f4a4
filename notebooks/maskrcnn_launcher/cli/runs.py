"""The runs flow's commands: report, runs, compare, and the model registry's register, approve,
reject, models."""

import dataclasses
import json
import sys

from maskrcnn_launcher.runs import compare as comparison
from maskrcnn_launcher.runs import evaluation_report, lookup, registry, table

REFUSALS = (lookup.RunRequestError,)
FAILURES = ()


# Where reports (and comparisons) are written unless --out says otherwise.
REPORTS_ROOT = f"${evaluation_report.ROOT_ENV} or {evaluation_report.DEFAULT_ROOT}"


def add_commands(sub) -> None:
    report_p = sub.add_parser("report", help="a finished training job's evaluation report (from "
                              "its model.tar.gz): print its per-class table, write its files")
    report_p.add_argument("job_name")
    report_p.add_argument("--out", help="where report.json and its pictures go (default: "
                          f"{REPORTS_ROOT}, then /<job>)")
    runs_p = sub.add_parser("runs", help="this deployment's training jobs side by side: dataset, "
                            "distribution, instances, key hyperparameters, time, instance-hours "
                            "and cost, final and best AP, worst class")
    runs_p.add_argument("--dataset", help="only the jobs that trained on this staged dataset")
    runs_p.add_argument("--last", type=int, help="only the N newest (of those)")
    runs_p.add_argument("--sort", default="created", choices=table.SORT_KEYS,
                        help="highest first (names A to Z); default: created, newest first")
    runs_p.add_argument("--price", action="append", default=[], metavar="TYPE=USD",
                        help="on-demand USD per instance-hour of an instance type in your region, "
                        "for the cost column (repeatable; the launcher keeps no prices)")
    compare_p = sub.add_parser("compare", help="two or more training jobs' curves (TensorBoard "
                               "output) and per-class AP (evaluation reports): tables and a "
                               "picture")
    compare_p.add_argument("job_names", nargs="+", metavar="JOB")
    compare_p.add_argument("--tag", action="append", dest="tags", metavar="TAG",
                           help="a curve to compare, e.g. train/loss (repeatable; default: "
                           f"{', '.join(comparison.DEFAULT_TAGS)}, those present)")
    compare_p.add_argument("--out", help=f"the picture's path (default: {REPORTS_ROOT}, then "
                           "/comparisons/compare-<hash of the jobs>.png)")
    register_p = sub.add_parser("register", help="register a finished training job's model "
                                "(model.tar.gz, the serving image, its evaluation report) as a "
                                "version of the deployment's model registry, pending approval")
    register_p.add_argument("job_name")
    for name, what in (("approve", "approve a registry version: only an approved one is "
                        "deployed (deploy --model-package)"),
                       ("reject", "reject a registry version")):
        decide_p = sub.add_parser(name, help=what)
        decide_p.add_argument("arn", help="the version's ARN (`models` lists them)")
        decide_p.add_argument("--reason", required=True,
                              help="why, kept as the version's ApprovalDescription "
                              f"(at most {registry.REASON_MAX} characters)")
    sub.add_parser("models", help="the model registry's versions, newest first: approval, mask "
                   "and box AP from each one's evaluation report, training job")


def check_runs(args) -> None:
    table.parse_prices(args.price)
    table.check_filters(args.dataset, args.last)


def check_compare(args) -> None:
    comparison.check_job_names(args.job_names)


def check_decision(args) -> None:
    """Refused before anything is read or sent."""
    registry.check_reason(args.reason)


def _print_versions(found) -> None:
    for line in registry.version_lines(found) or ["no registered versions"]:
        print(line, file=sys.stderr)
    print(json.dumps([dataclasses.asdict(v) for v in found], indent=1, default=str))


def register(args, deployment, boto_session) -> None:
    _print_versions([registry.register(deployment, args.job_name, boto_session,
                                       echo=lambda line: print(line, file=sys.stderr))])


def decide(decision: str):
    def command(args, deployment, boto_session) -> None:
        _print_versions([registry.decide(deployment, args.arn, decision, args.reason,
                                         boto_session)])
    return command


def models(args, deployment, boto_session) -> None:
    _print_versions(registry.versions(deployment, boto_session))


def report(args, deployment, boto_session) -> None:
    fetched = evaluation_report.fetch(deployment, args.job_name, boto_session, args.out)
    print("\n".join(evaluation_report.describe(fetched) + evaluation_report.table(fetched.report)))
    for kind, path in fetched.pictures.items():
        print(f"{kind}: {path}")


def runs(args, deployment, boto_session) -> None:
    rows = table.runs(deployment, boto_session, dataset=args.dataset, last=args.last,
                      prices=table.parse_prices(args.price))
    print("\n".join(table.lines(table.sort(rows, args.sort))))


def compare(args, deployment, boto_session) -> None:
    compared = comparison.compare(deployment, args.job_names, boto_session)
    tags = comparison.tags_of(compared, args.tags)
    path = comparison.picture(compared, args.out, tags)
    print("\n".join(comparison.legend_lines(compared) + comparison.curve_lines(compared, tags)
                    + comparison.per_class_lines(compared) + compared.notes))
    print(f"picture: {path}")


CHECKS = {"runs": check_runs, "compare": check_compare, "approve": check_decision,
          "reject": check_decision}
COMMANDS = {"report": report, "runs": runs, "compare": compare, "register": register,
            "approve": decide(registry.APPROVED), "reject": decide(registry.REJECTED),
            "models": models}
