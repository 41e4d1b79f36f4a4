"""Command line: the notebooks' steps without Jupyter, e.g. from a pipeline.

    python -m maskrcnn_launcher launch --data-source fsx --instances 2 [--dataset NAME]
                                       [--init-from <job> | --init-from s3://...] [--distribution D]
                                       [--input-mode File] [--keep-alive-seconds N]
                                       [--dry-run] [--wait]
    python -m maskrcnn_launcher tune [the launch's options] [--objective M]
                                     [--range NAME=MIN:MAX[:SCALING]]
                                     [--max-jobs N] [--max-parallel-jobs N] [--dry-run] [--wait]
    python -m maskrcnn_launcher upload-export --dataset NAME <directory or .zip>
    python -m maskrcnn_launcher stage-dataset [--dataset NAME] [--val-fraction F] [--split-seed S]
                                              [--crowd-as-instances] [--boxes-without-mask B]
                                              [--strict] [--dry-run] [--wait]
    python -m maskrcnn_launcher datasets | sync-efs | fsx-status | follow <job or tuning job>
    python -m maskrcnn_launcher deploy [--job <job>] [--instance-type T] [--min N] [--max N]
                                       [--target-invocations X] [--data-capture PCT]
                                       [--idle-hours H | --no-idle-alarm]
                                       [--allow-cpu] [--dry-run]
    python -m maskrcnn_launcher invoke <endpoint> <image>... | endpoints
    python -m maskrcnn_launcher delete-endpoint <endpoint>
    python -m maskrcnn_launcher report <job> [--out DIR]
    python -m maskrcnn_launcher register <job> | models
    python -m maskrcnn_launcher approve <arn> --reason R | reject <arn> --reason R
    python -m maskrcnn_launcher deploy --model-package <arn>|latest-approved [...]
    python -m maskrcnn_launcher runs [--dataset NAME] [--last N] [--sort KEY] [--price TYPE=USD]
    python -m maskrcnn_launcher compare <job> <job>... [--tag TAG] [--out PICTURE]
    python -m maskrcnn_launcher warm-pools | release-warm-pool <job>
    python -m maskrcnn_launcher predict-batch --input s3://<bucket>/<samples prefix>...
                                              [--job <job> | --model-package <arn>]
                                              [--instance-type T] [--score-threshold X] [--top N]
                                              [--dry-run] [--no-wait]
    python -m maskrcnn_launcher predictions <transform job> [--top N] [--out DIR]

Exit status 2 with a message naming the bad value when the request is invalid (nothing sent or
created); 1 when a deployment failed after creating something (the message says what exists).
Each flow's commands live in its module beside this one (data, training, runs, serving,
labeling); this one assembles them and maps each flow's errors to the exit status.
"""

import argparse
import sys

from maskrcnn_launcher.cli import data, labeling, runs, serving, training
from maskrcnn_launcher.deployment import settings

# Each flow's commands, in the order `-h` lists them: the path from data to serving and back
# to labeling.
FLOWS = (data, training, runs, serving, labeling)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m maskrcnn_launcher", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ssm-path", help="the deployment's SSM path (default: $MASKRCNN_SSM_PATH, "
                   "~/.maskrcnn/ssm-path, /maskrcnn)")
    sub = p.add_subparsers(dest="command", required=True)
    for flow in FLOWS:
        flow.add_commands(sub)
    return p


def run(args) -> None:
    for flow in FLOWS:
        check = getattr(flow, "CHECKS", {}).get(args.command)
        if check:
            check(args)
    deployment, boto_session = settings.connect(args.ssm_path)
    for flow in FLOWS:
        if args.command in flow.COMMANDS:
            flow.COMMANDS[args.command](args, deployment, boto_session)
            return
    raise AssertionError(f"no flow handles {args.command!r}")


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    refusals = (settings.SettingsError,) + tuple(e for flow in FLOWS for e in flow.REFUSALS)
    failures = tuple(e for flow in FLOWS for e in flow.FAILURES)
    try:
        run(args)
    except refusals as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except failures as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
