"""The supported platform, in every local environment: TensorFlow 2.21.0 (the TF 2.21 training
DLC's), tf-keras 2.21.0 as tf.keras, Model Garden 2.20.0, the DLC's toolkits (docs/image.md)."""

import ctypes
import json
import os
import subprocess

import pytest

from maskrcnn_job import job
from tests.paths import REPO

PROBE = """
import importlib.metadata as m, json, os
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # as the image sets it (training_code/Dockerfile)
import tensorflow as tf
versions = {}
for name in ("tensorflow", "tf-keras", "tf-models-official", "sagemaker-training",
             "sagemaker-tensorflow-training", "keras", "numpy", "pillow"):
    try:
        versions[name] = m.version(name)
    except m.PackageNotFoundError:
        versions[name] = None
versions["tf.keras"] = tf.keras.__name__ if versions["tf-keras"] else None
print(json.dumps(versions))
"""


def _versions(python):
    result = subprocess.run([str(REPO / python / "bin" / "python"), "-c", PROBE],
                            capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("venv", [".venv", ".venv-image"])
def test_every_environment_runs_tensorflow_2_21_with_tf_keras_2_21_as_tf_keras(venv):
    versions = _versions(venv)
    assert versions["tensorflow"] == "2.21.0" and versions["tf-keras"] == "2.21.0"
    assert versions["tf-models-official"] == "2.20.0"
    assert versions["tf.keras"].startswith("tf_keras"), versions["tf.keras"]
    # The DLC's own pins (training_code/dlc-constraints.txt), which Model Garden needs too:
    # Pillow 13 breaks its mask PNG encoding.
    assert versions["numpy"] == "2.4.6" and versions["pillow"] == "12.3.0"


def test_the_image_stand_in_runs_the_dlcs_toolkits_and_no_tf_keras_below_the_images_layer():
    dlc = _versions(".venv-dlc")
    assert (dlc["tensorflow"], dlc["keras"]) == ("2.21.0", "3.15.1")
    assert (dlc["sagemaker-training"], dlc["sagemaker-tensorflow-training"]) == ("5.1.1", "20.4.1")
    assert dlc["tf-keras"] is None and dlc["tf-models-official"] is None  # the image adds them


def test_absls_log_level_switch_is_found_in_this_tensorflow():
    """job.quiet_tensorflow() sets absl's minimum level through the symbol of the absl release
    TensorFlow links; a TensorFlow that links another release would log grappler's warnings
    again without a word, so the symbol is checked here."""
    import tensorflow as tf

    framework = os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework.so.2")
    assert ctypes.CDLL(framework)[job._ABSL_SET_MIN_LOG_LEVEL]
