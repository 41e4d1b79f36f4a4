#!/usr/bin/env python3
"""Prints what `cdk deploy` would create from a synthesized cloud assembly (cdk.out):
stacks, resources by type, outputs and SSM parameters. Reads files only; needs no AWS account."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def stack_templates(assembly: Path):
    """Yields (stack name, template) for every stack, nested stages (pipelines) included."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    for artifact_id, artifact in sorted(manifest.get("artifacts", {}).items()):
        kind = artifact.get("type")
        if kind == "aws:cloudformation:stack":
            name = artifact.get("properties", {}).get("stackName", artifact_id)
            template = json.loads((assembly / artifact["properties"]["templateFile"]).read_text())
            yield name, template
        elif kind == "cdk:cloud-assembly":
            yield from stack_templates(assembly / artifact["properties"]["directoryName"])


def describe(value) -> str:
    """A template value as text: literals as they are, intrinsics in short form."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (fn, arg), = value.items()
        if fn == "Ref":
            return f"<{arg}>"
        if fn == "Fn::GetAtt":
            return f"<{'.'.join(arg)}>"
        if fn == "Fn::ImportValue":
            return f"<import {describe(arg)}>"
        if fn == "Fn::Sub":
            return arg if isinstance(arg, str) else arg[0]
        if fn == "Fn::Join":
            return arg[0].join(describe(v) for v in arg[1])
    return json.dumps(value, separators=(",", ":"))[:80]


def summarize(assembly: Path, out=sys.stdout) -> None:
    stacks = list(stack_templates(assembly))
    if not stacks:
        raise SystemExit(f"no stacks found in {assembly}: run `npx cdk synth` first")
    print(f"Cloud assembly {assembly}: {len(stacks)} stack{'s' if len(stacks) != 1 else ''}",
          file=out)
    for name, template in stacks:
        resources = template.get("Resources", {})
        print(f"\n== {name}: {len(resources)} resources", file=out)
        for kind, count in sorted(Counter(r["Type"] for r in resources.values()).items()):
            print(f"   {count:3d}  {kind}", file=out)
        parameters = sorted((describe(r["Properties"]["Name"]), describe(r["Properties"]["Value"]))
                            for r in resources.values() if r["Type"] == "AWS::SSM::Parameter")
        if parameters:
            print("   SSM parameters:", file=out)
            for key, value in parameters:
                print(f"     {key} = {value}", file=out)
        outputs = template.get("Outputs", {})
        public = {k: v for k, v in outputs.items() if not k.startswith("ExportsOutput")}
        if public:
            print("   Outputs:", file=out)
            for key, value in sorted(public.items()):
                print(f"     {key} = {describe(value.get('Value'))}", file=out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("assembly", nargs="?", default="cdk.out", type=Path)
    summarize(parser.parse_args().assembly)


if __name__ == "__main__":
    main()
