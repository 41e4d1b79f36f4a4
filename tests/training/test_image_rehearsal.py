"""The image build rehearsed without Docker: the Dockerfile's own pip commands, dry-run against a
venv seeded with the Deep Learning Container's packages at its lock's versions (.venv-dlc,
training_code/dlc-seed.txt -c dlc-constraints.txt), must add packages and never install, upgrade
or downgrade one the DLC has. The Dockerfile's installs are read by tests/dockerfile.py, which
knows every installer a RUN line may name and fails on an install it cannot read."""

import json
import os
import re
import subprocess

import pytest

from tests import dockerfile
from tests.paths import REPO

DLC_PYTHON = REPO / ".venv-dlc" / "bin" / "python"
# The Dockerfile's COPY destinations, and where those files are in the checkout; the Horovod wheel
# the image builds with horovod/build_wheel.sh is the one `make setup` built with the same script.
COPIED = {"/tmp/dlc-constraints.txt": "training_code/dlc-constraints.txt",
          "/tmp/image-requirements.txt": "training_code/image-requirements.txt",
          "/tmp/model-garden.txt": "training_code/model-garden.txt",
          "/tmp/maskrcnn-contract": "contract",
          "/tmp/horovod-wheel/horovod-0.28.1-*.whl": ".venv/horovod-wheel/horovod-0.28.1-*.whl"}


def _local(argument):
    if argument not in COPIED:
        return argument
    matches = sorted(REPO.glob(COPIED[argument]))
    assert len(matches) == 1, f"{COPIED[argument]}: {matches} (run `make setup`)"
    return str(matches[0])


def dockerfile_pip_installs(path=dockerfile.DOCKERFILE):
    """Each pip install of the Dockerfile's RUN lines (pip, pip3, python -m pip, uv pip, ...), as
    an argument list with the copied files' checkout paths."""
    return [[_local(a) for a in arguments] for arguments in dockerfile.pip_installs(path)]


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


INSTALLS = {"image-requirements": "tf-keras", "model-garden": "tf-models-official",
            "horovod": "horovod", "contract": "maskrcnn-contract"}
# The Dockerfile's pip installs as read at collection (an install tests/dockerfile.py cannot read
# fails here): each is dry-run below, one it does not expect too.
PIP_INSTALLS = dockerfile.pip_installs()
EXPECTED = list(INSTALLS.values())


def test_the_dockerfile_installs_its_requirements_model_garden_horovod_and_the_contract_only(dlc):
    assert len(dockerfile_pip_installs()) == len(INSTALLS), dockerfile.pip_installs()
    assert dlc["tensorflow"] == "2.21.0" and dlc["sagemaker-training"] == "5.1.1"


def test_the_dockerfile_installs_no_system_package_the_rehearsal_cannot_check():
    """A dnf/yum/apt-get install could move what the DLC's TensorFlow links against (CUDA,
    cuDNN, NCCL, Open MPI); pip's dry run cannot rehearse it."""
    assert dockerfile.system_installs() == []


def test_the_stand_in_has_the_locks_versions(dlc):
    """.venv-dlc holds every seeded package at the version of the DLC's lock file."""
    locked = dict(line.split("==") for line in
                  (REPO / "training_code" / "dlc-constraints.txt").read_text().splitlines()
                  if line and not line.startswith("#"))
    assert {name: version for name, version in dlc.items()
            if name in locked and locked[name] != version} == {}
    assert len(set(dlc) & set(locked)) >= 40


@pytest.mark.parametrize("index", range(len(PIP_INSTALLS)),
                         ids=[name for name, _ in zip(INSTALLS, PIP_INSTALLS, strict=False)]
                         + [" ".join(a) for a in PIP_INSTALLS[len(INSTALLS):]])
def test_no_dlc_package_is_installed_upgraded_or_downgraded(dlc, tmp_path, index):
    installs = would_install(dockerfile_pip_installs()[index], tmp_path)
    assert installs, "the dry run installs nothing: the rehearsal would prove nothing"
    assert index >= len(EXPECTED) or EXPECTED[index] in installs
    assert moved(installs, dlc) == {}


def test_the_rehearsal_catches_model_garden_with_its_dependencies(dlc, tmp_path):
    """tf-models-official 2.20.0 asks for tensorflow~=2.20: installed with its dependencies it
    would move the DLC's TensorFlow, which is why the Dockerfile installs it --no-deps."""
    installs = would_install(["-r", str(REPO / "training_code" / "model-garden.txt")], tmp_path)
    assert "tensorflow" in moved(installs, dlc)


# --- how the Dockerfile is read (tests/dockerfile.py) --------------------------------------------

def test_a_pip3_upgrade_added_to_a_copy_of_the_dockerfile_is_one_more_install(tmp_path):
    """The line the rehearsal once missed (it read only lines containing "pip install")."""
    copy = tmp_path / "Dockerfile"
    copy.write_text(dockerfile.DOCKERFILE.read_text() + "RUN pip3 install --upgrade numpy==1.0\n")
    assert dockerfile.pip_installs(copy) == dockerfile.pip_installs() + [
        ["--upgrade", "numpy==1.0"]]


def test_every_installer_a_run_line_may_name_is_read(tmp_path):
    copy = tmp_path / "Dockerfile"
    copy.write_text(
        "FROM base\n"
        "RUN python3 -m pip install a && python -m pip install b; uv pip install c \\\n"
        "    # a comment line, dropped inside the continuation as Docker drops it\n"
        "    d\n"
        "RUN --mount=type=cache,target=/root/.cache dnf install -y gcc && yum install -y z \\\n"
        "    || apt-get install -y --no-install-recommends q\n"
        "run PIP_NO_CACHE_DIR=1 X=\"y z\" /opt/venv/bin/pip3.12 install e\n"
        'RUN ["pip", "install", "f"]\n'
        "RUN python -c \"import os; print('a quoted ; && is one word')\" || true\n")
    assert [(i.kind, i.installer, i.arguments) for i in dockerfile.installs(copy)] == [
        ("pip", "python3 -m pip install", ["a"]), ("pip", "python -m pip install", ["b"]),
        ("pip", "uv pip install", ["c", "d"]), ("system", "dnf install", ["-y", "gcc"]),
        ("system", "yum install", ["-y", "z"]),
        ("system", "apt-get install", ["-y", "--no-install-recommends", "q"]),
        ("pip", "/opt/venv/bin/pip3.12 install", ["e"]), ("pip", "pip install", ["f"])]


@pytest.mark.parametrize("line", ["RUN make install", "RUN conda install -y numpy",
                                  "RUN pip --quiet install numpy", 'RUN echo "install'])
def test_an_install_no_known_installer_runs_fails_naming_its_line(tmp_path, line):
    copy = tmp_path / "Dockerfile"
    copy.write_text(f"FROM base\n{line}\n")
    with pytest.raises(dockerfile.UnreadableInstall) as refused:
        dockerfile.installs(copy)
    assert line in str(refused.value)
