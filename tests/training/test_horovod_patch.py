"""Our Horovod patch (horovod/horovod-0.28.1-tf2.19.patch): it applies to PyPI's sdist, the local
environments and the image build it through the same script, and the Horovod the tests run is that
build, compiled against TensorFlow 2.21."""

import os
import re
import subprocess
import sys
from pathlib import Path
from tests.paths import REPO

SCRIPT = REPO / "horovod" / "build_wheel.sh"
PATCH = REPO / "horovod" / "horovod-0.28.1-tf2.19.patch"


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
    does not compile there) and was built by build_wheel.sh (its wheel in .venv/horovod-wheel)."""
    probe = ("import tensorflow as tf, horovod, horovod.tensorflow as hvd, horovod.tensorflow.mpi_ops;"
             "print(tf.__version__, horovod.__version__, hvd.mpi_built(), hvd.gloo_built())")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["2.21.0", "0.28.1", "True", "True"]
    assert list((REPO / ".venv" / "horovod-wheel").glob("horovod-0.28.1-*.whl"))
