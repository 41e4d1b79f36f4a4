"""The pinned CDK CLI synthesizes the app from cdk.json, offline, with and without the pipeline."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra.conftest import PIPELINE_CONTEXT, REPO


def cli_synth(outdir: Path, context: dict) -> subprocess.CompletedProcess:
    arguments = [f"maskrcnn:{k.split(':', 1)[1]}={str(v).lower() if isinstance(v, bool) else v}"
                 for k, v in context.items()]
    command = ["npx", "--no-install", "cdk", "synth", "--quiet", "--output", str(outdir)]
    for argument in arguments:
        command += ["-c", argument]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
           # No account or region: synth must not need AWS credentials.
           "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "", "CDK_DEFAULT_ACCOUNT": ""}
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("context, stacks", [
    ({}, {"maskrcnn"}),
    (PIPELINE_CONTEXT, {"maskrcnn-pipeline"}),
], ids=["app", "pipeline"])
def test_npx_cdk_synth_succeeds_offline(tmp_path, context, stacks):
    result = cli_synth(tmp_path, context)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    top_level = {a["properties"].get("stackName", name) for name, a in manifest["artifacts"].items()
                 if a["type"] == "aws:cloudformation:stack"}
    assert top_level == stacks
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert all(r.get("summary", {}).get("status", "success") == "success" for r in report["pluginReports"])


def test_npx_cdk_synth_rejects_bad_context_naming_the_key(tmp_path):
    result = cli_synth(tmp_path, {"maskrcnn:existing_efs_id": "efs-12"})
    assert result.returncode != 0
    assert "maskrcnn:existing_efs_id: 'efs-12' is not allowed" in result.stdout + result.stderr
