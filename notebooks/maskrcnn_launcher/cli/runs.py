"""The runs flow's commands: report."""

from maskrcnn_launcher.runs import evaluation_report, lookup

REFUSALS = (lookup.RunRequestError,)
FAILURES = ()


def add_commands(sub) -> None:
    report_p = sub.add_parser("report", help="a finished training job's evaluation report (from "
                              "its model.tar.gz): print its per-class table, write its files")
    report_p.add_argument("job_name")
    report_p.add_argument("--out", help="where report.json and its pictures go (default: "
                          f"${evaluation_report.ROOT_ENV} or {evaluation_report.DEFAULT_ROOT}, "
                          "then /<job>)")


def report(args, deployment, boto_session) -> None:
    fetched = evaluation_report.fetch(deployment, args.job_name, boto_session, args.out)
    print("\n".join(evaluation_report.describe(fetched) + evaluation_report.table(fetched.report)))
    for kind, path in fetched.pictures.items():
        print(f"{kind}: {path}")


COMMANDS = {"report": report}
