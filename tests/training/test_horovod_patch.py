"""Our Horovod patch (horovod/horovod-0.28.1-tf2.19.patch): it applies to PyPI's sdist, the local
environments and the image build it through the same script, and the Horovod the tests run is that
build, compiled against TensorFlow 2.21."""

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile

import pytest

from tests.paths import IMAGE_PYTHON, REPO

SCRIPT = REPO / "horovod" / "build_wheel.sh"
PATCH = REPO / "horovod" / "horovod-0.28.1-tf2.19.patch"
# The wheel `make setup` built with build_wheel.sh, and the environments it installed it in.
WHEEL_DIR = REPO / ".venv" / "horovod-wheel"
INSTALLED_IN = {".venv": REPO / ".venv" / "bin" / "python", ".venv-image": IMAGE_PYTHON}
# What pip writes into an installed distribution's .dist-info beside the wheel's own files.
PIP_WRITES = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}


def test_the_patch_applies_to_the_pypi_sdist():
    """build_wheel.sh --check downloads horovod 0.28.1's sdist, checks its SHA-256 and applies the
    patch with `git apply`, which refuses a patch whose context no longer matches."""
    # From the package registry, as the image build: without the proxies that other tests'
    # fixtures point at a closed local port to keep AWS calls on this machine.
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    result = subprocess.run(["bash", str(SCRIPT), "--check", sys.executable],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    applied = re.findall(r"Applied patch (\S+) cleanly", result.stderr)
    assert applied == ["horovod/tensorflow/CMakeLists.txt", "horovod/tensorflow/xla_mpi_ops.cc"]


def test_the_patch_says_what_it_changes_and_stays_small():
    text = PATCH.read_text()
    header = text.split("\n--- a/", 1)[0]
    for words in ("TensorFlow 2.19", "xla/hlo/builder", "absl::StatusOr", "highwayhash",
                  "farmhash", "#4302"):
        assert words in header, words
    changed = [line for line in text.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert 0 < len(changed) <= 60, len(changed)


def test_the_local_environments_and_the_image_build_horovod_with_the_same_script():
    makefile = (REPO / "Makefile").read_text()
    dockerfile = (REPO / "training_code" / "Dockerfile").read_text()
    assert "horovod/build_wheel.sh $(PY) $(HOROVOD_WHEEL_DIR)" in makefile
    assert "bash /tmp/horovod/build_wheel.sh python /tmp/horovod-wheel" in dockerfile
    # Neither installs Horovod from the index, where pip would build the unpatched sdist.
    assert "horovod==" not in makefile and "horovod==" not in dockerfile


def test_the_installed_horovod_is_built_against_tensorflow_2_21():
    """The .venv's Horovod loads its TensorFlow ops library next to TF 2.21 (an unpatched 0.28.1
    does not compile there); that it is build_wheel.sh's wheel: the test below."""
    probe = ("import tensorflow as tf, horovod, horovod.tensorflow as hvd, horovod.tensorflow.mpi_ops;"
             "print(tf.__version__, horovod.__version__, hvd.mpi_built(), hvd.gloo_built())")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["2.21.0", "0.28.1", "True", "True"]


def _wheel_files(wheel):
    """{path as installed: SHA-256} of the wheel's files (its scripts and RECORD left out: pip
    rewrites both)."""
    with zipfile.ZipFile(wheel) as archive:
        return {name: hashlib.sha256(archive.read(name)).hexdigest()
                for name in archive.namelist()
                if not name.endswith("/") and ".data/" not in name
                and not name.endswith(".dist-info/RECORD")}


def _installed_files(python):
    """{path below site-packages: SHA-256 of the file there} of the horovod distribution that
    `python` imports, as its RECORD lists them (compiled .pyc, scripts outside site-packages and
    what pip writes into .dist-info left out)."""
    probe = ("import hashlib, importlib.metadata as m, json\n"
             "d = m.distribution('horovod')\n"
             "print(json.dumps({str(f): hashlib.sha256(d.locate_file(f).read_bytes()).hexdigest()"
             " for f in d.files if not str(f).startswith('..') and '__pycache__' not in str(f)"
             " and not (str(f).split('/')[0].endswith('.dist-info')"
             f" and f.name in {sorted(PIP_WRITES)!r})}}))")
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize("venv", list(INSTALLED_IN))
def test_the_installed_horovod_is_the_wheel_build_wheel_sh_built(venv):
    """Every file of the Horovod installed in .venv and in .venv-image (the image's stand-in) is
    byte for byte the file of the wheel in .venv/horovod-wheel, and it has no other: not an
    unpatched build from the index, nor one left from an older wheel."""
    wheels = sorted(WHEEL_DIR.glob("horovod-0.28.1-*.whl"))
    assert len(wheels) == 1, f"{WHEEL_DIR}: {wheels} (run `make setup`)"
    built, installed = _wheel_files(wheels[0]), _installed_files(INSTALLED_IN[venv])
    assert len(built) > 100 and any(name.endswith(".so") for name in built), sorted(built)[:20]
    assert sorted(set(built) ^ set(installed)) == []
    assert sorted(name for name in built if built[name] != installed[name]) == []
