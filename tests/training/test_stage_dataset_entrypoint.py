"""The staging job's SageMaker entry point: a failure exits non-zero and names its cause."""

import os
import subprocess
import sys
from pathlib import Path

ENTRY_POINT = Path(__file__).resolve().parents[2] / "training_code" / "stage_dataset.py"


def test_failure_exits_non_zero_and_writes_the_cause(tmp_path):
    env = {**os.environ, "OPT_ML_ROOT": str(tmp_path / "opt_ml")}
    result = subprocess.run([sys.executable, str(ENTRY_POINT), "--work_dir", str(tmp_path / "work"),
                             "--s3_uri", "bucket/datasets/coco2017/"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    failure = (tmp_path / "opt_ml" / "output" / "failure").read_text()
    assert failure.startswith("staging failed: ")
    assert "'bucket/datasets/coco2017/' is not an s3:// URI" in failure
    assert not (tmp_path / "work").exists()


def test_a_misspelled_staging_hyperparameter_fails_the_job_naming_the_known_ones(tmp_path):
    """The toolkit passes every hyperparameter as --name value: an unknown one is a typo, which
    would otherwise stage with the default (into the default work dir, say) without a word."""
    env = {**os.environ, "OPT_ML_ROOT": str(tmp_path / "opt_ml")}
    result = subprocess.run([sys.executable, str(ENTRY_POINT), "--work_dir", str(tmp_path / "work"),
                             "--s3_uri", "s3://bucket/datasets/coco2017/", "--backbone", "resnet50"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    failure = (tmp_path / "opt_ml" / "output" / "failure").read_text()
    assert "unknown arguments ['--backbone', 'resnet50']" in failure
    assert ("backbones, boxes_without_mask, crowd_as_instances, dataset, import_s3_uri, "
            "pretrained_s3_uri, s3_uri, split_seed, strict, val_fraction, work_dir, "
            "workers") in failure
    assert not (tmp_path / "work").exists()
