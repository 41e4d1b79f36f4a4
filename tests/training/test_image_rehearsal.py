"""The image build rehearsed without Docker: the Dockerfile's own pip commands, dry-run against a
venv seeded with the Deep Learning Container's packages (.venv-dlc, training_code/dlc-seed.txt),
must add packages and never install, upgrade or downgrade one the DLC has."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DLC_PYTHON = REPO / ".venv-dlc" / "bin" / "python"
# The Dockerfile's COPY destinations, and where those files are in the checkout.
COPIED = {"/tmp/dlc-constraints.txt": "training_code/dlc-constraints.txt",
          "/tmp/image-requirements.txt": "training_code/image-requirements.txt",
          "/tmp/maskrcnn-contract": "contract"}


def dockerfile_pip_installs():
    """Each `pip install ...` of the Dockerfile's RUN lines, as an argument list."""
    text = (REPO / "training_code" / "Dockerfile").read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        if not line.startswith("RUN ") or "pip install" not in line:
            continue
        for part in line.split("&&"):
            if "pip install" in part:
                arguments = part.split("pip install", 1)[1].split()
                commands.append([str(REPO / COPIED[a]) if a in COPIED else a for a in arguments])
    return commands


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def dlc_packages():
    listed = subprocess.run([str(DLC_PYTHON), "-m", "pip", "list", "--format", "json"],
                            capture_output=True, text=True, check=True).stdout
    return {_canonical(p["name"]): p["version"] for p in json.loads(listed)}


def would_install(arguments, tmp_path):
    """{name: version} that `pip install <arguments>` would install in the DLC venv."""
    report = tmp_path / "report.json"
    # pip resolves against the package registry, as the image build does: no proxies that other
    # tests' fixtures point at a closed local port to keep AWS calls on this machine.
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    result = subprocess.run(
        [str(DLC_PYTHON), "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report),
         *arguments], capture_output=True, text=True, timeout=600,
        env=dict(env, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {_canonical(item["metadata"]["name"]): item["metadata"]["version"]
            for item in json.loads(report.read_text())["install"]}


def moved(installs, dlc):
    return {name: f"{dlc[name]} -> {version}" for name, version in installs.items() if name in dlc}


@pytest.fixture(scope="module")
def dlc():
    if not DLC_PYTHON.exists():
        pytest.fail("the DLC stand-in venv .venv-dlc is missing: run `make setup`")
    return dlc_packages()


def test_the_dockerfile_installs_its_requirements_horovod_and_the_contract_only(dlc):
    commands = dockerfile_pip_installs()
    assert len(commands) == 3
    assert "tensorflow" in dlc and dlc["tensorflow"] == "2.18.0"


@pytest.mark.parametrize("index", [0, 1, 2], ids=["image-requirements", "horovod", "contract"])
def test_no_dlc_package_is_installed_upgraded_or_downgraded(dlc, tmp_path, index):
    installs = would_install(dockerfile_pip_installs()[index], tmp_path)
    assert installs, "the dry run installs nothing: the rehearsal would prove nothing"
    assert {"google-crc32c", "horovod", "maskrcnn-contract"} & set(installs)
    assert moved(installs, dlc) == {}


def test_the_rehearsal_catches_what_the_old_image_did(dlc, tmp_path):
    """The old Dockerfile installed the local requirements (tensorflow==2.18.1) over the DLC."""
    installs = would_install(["tensorflow==2.18.1"], tmp_path)
    assert moved(installs, dlc)["tensorflow"] == "2.18.0 -> 2.18.1"
