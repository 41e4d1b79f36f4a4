"""The notebook's start script under its worst cases, with stub dnf/mount: it must return far
inside the 5 minutes after which SageMaker fails the start (docs/aws-rules.md), and still report
what the background mounting did."""

import os
import signal
import subprocess
import time

import pytest

from stacks.notebook import LIFECYCLE_DIR

BUDGET_S = 60
PLACEHOLDERS = {"REGION": "eu-south-1", "EFS_ID": "fs-0123456789abcdef0", "FSX_DNS": "fs-1.fsx.example",
                "FSX_MOUNT_NAME": "abcd1234", "SSM_PATH": "/maskrcnn",
                "CODEARTIFACT_DOMAIN": "", "CODEARTIFACT_OWNER": "", "CODEARTIFACT_REPOSITORY": ""}


def _stub(bin_dir, name, body):
    path = bin_dir / name
    path.write_text(f"#!/bin/bash\necho \"{name} $*\" >> \"$STUB_CALLS\"\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def run_on_start(tmp_path):
    script = (LIFECYCLE_DIR / "on_start.sh").read_text()
    for key, value in PLACEHOLDERS.items():
        script = script.replace(f"@@{key}@@", value)
    (tmp_path / "on_start.sh").write_text(script)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    root = tmp_path / "root"
    started = []

    def run(dnf_body, mount_body, **placeholders):
        text = script
        for key, value in placeholders.items():
            text = text.replace(f'{key}=""', f'{key}="{value}"')
        (tmp_path / "on_start.sh").write_text(text)
        _stub(bin_dir, "su", "exit 0")
        _stub(bin_dir, "dnf", dnf_body)
        _stub(bin_dir, "mount", mount_body)
        _stub(bin_dir, "mountpoint", "exit 1")
        _stub(bin_dir, "chown", "exit 0")
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", LIFECYCLE_ROOT=str(root),
                   MOUNT_RETRY_DELAY="0", STUB_CALLS=str(tmp_path / "calls.txt"))
        begin = time.monotonic()
        result = subprocess.run(["bash", str(tmp_path / "on_start.sh")], env=env,
                                capture_output=True, text=True, timeout=BUDGET_S * 2)
        result.seconds = time.monotonic() - begin
        started.append(int((root / "var/run/maskrcnn-mounts.pid").read_text()))
        return result, root, tmp_path / "calls.txt"

    yield run
    for pid in started:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_for(path, text, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return path.read_text()
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {path}: {path.read_text() if path.exists() else ''}")


def test_hanging_package_install_does_not_hold_the_start(run_on_start):
    result, root, _ = run_on_start(dnf_body="sleep 600", mount_body="exit 0")
    assert result.returncode == 0, result.stderr
    assert result.seconds < BUDGET_S, result.seconds
    assert (root / "home/ec2-user/.maskrcnn/ssm-path").read_text().strip() == "/maskrcnn"
    status = (root / "home/ec2-user/SageMaker/MOUNT-STATUS.txt").read_text()
    assert "mounting EFS and FSx in the background" in status


def test_failing_mounts_are_reported_in_the_status_file(run_on_start):
    result, root, calls = run_on_start(dnf_body="exit 0", mount_body="exit 32")
    assert result.returncode == 0 and result.seconds < BUDGET_S
    status = _wait_for(root / "home/ec2-user/SageMaker/MOUNT-STATUS.txt", "mounting finished")
    assert "EFS fs-0123456789abcdef0: NOT MOUNTED" in status
    assert "FSx fs-1.fsx.example: NOT MOUNTED" in status
    mounts = [line for line in calls.read_text().splitlines() if line.startswith("mount ")]
    assert len(mounts) == 12  # six attempts each
    # EFS with TLS and IAM, read-only: what the file-system policy and the notebook role allow.
    assert "mount -t efs -o tls,iam,ro,noresvport fs-0123456789abcdef0:/" in mounts[0]


def test_successful_mounts_are_reported(run_on_start):
    result, root, _ = run_on_start(dnf_body="exit 0", mount_body="exit 0")
    status = _wait_for(root / "home/ec2-user/SageMaker/MOUNT-STATUS.txt", "mounting finished")
    assert "EFS fs-0123456789abcdef0: mounted at" in status and "FSx fs-1.fsx.example: mounted at" in status
    assert "pip:" not in status  # with NAT, pip uses PyPI


def test_without_nat_pip_is_pointed_at_the_codeartifact_mirror(run_on_start):
    result, root, calls = run_on_start(dnf_body="exit 0", mount_body="exit 0",
                                       CODEARTIFACT_DOMAIN="maskrcnn", CODEARTIFACT_OWNER="123456789012",
                                       CODEARTIFACT_REPOSITORY="pypi")
    status = _wait_for(root / "home/ec2-user/SageMaker/MOUNT-STATUS.txt", "mounting finished")
    assert "pip: installs from CodeArtifact maskrcnn/pypi" in status
    login, = [line for line in calls.read_text().splitlines() if line.startswith("su ")]
    # su - starts a clean environment: the region is on the command (docs/aws-rules.md SM-16).
    assert ("aws codeartifact login --region eu-south-1 --tool pip --domain maskrcnn "
            "--domain-owner 123456789012 --repository pypi") in login


def test_the_create_script_gives_the_aws_cli_the_deployments_region(tmp_path):
    """Its documented environment is PATH alone (docs/aws-rules.md SM-16): without the region
    the CLI would fall back to a default that an isolated VPC cannot reach."""
    script = (LIFECYCLE_DIR / "on_create.sh").read_text()
    for key, value in {"REGION": "eu-south-1", "NOTEBOOKS_S3_URL": "s3://assets/nb.zip"}.items():
        script = script.replace(f"@@{key}@@", value)
    (tmp_path / "on_create.sh").write_text(script)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "aws", 'echo "region=$AWS_DEFAULT_REGION" >> "$STUB_CALLS"')
    for name in ("unzip", "chown", "mkdir"):
        _stub(bin_dir, name, "exit 0")
    env = {"PATH": f"{bin_dir}:/sbin:/bin:/usr/sbin:/usr/bin", "STUB_CALLS": str(tmp_path / "calls")}
    result = subprocess.run(["bash", str(tmp_path / "on_create.sh")], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert "aws s3 cp --only-show-errors s3://assets/nb.zip" in calls[0]
    assert calls[1] == "region=eu-south-1"
