"""`python -m maskrcnn_local.predict_batch`'s refusals: each bad value named, exit status 2,
before TensorFlow is loaded or anything is written. The run itself: test_fine_tune.py's loop."""

import os
import subprocess
import sys

import pytest
from tests.paths import REPO



def _predict_batch(*args):
    # From notebooks/, where the launcher package is (docs/labeling.md, "The loop").
    return subprocess.run([sys.executable, "-m", "maskrcnn_local.predict_batch", *args],
                          cwd=os.path.join(REPO, "notebooks"), capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("case, message", [
    ("no folder", "folder '{tmp}/nowhere' does not exist"),
    ("no image", "folder '{tmp}/empty' holds no .jpg/.jpeg/.png image"),
    ("no categories", "model '{tmp}/model': no code/categories.json"),
    ("threshold", "--score-threshold 2.0: expected 0 to 1"),
    ("top", "--top 0: expected at least 1"),
])
def test_bad_input_exits_2_naming_the_value(tmp_path, capsys, case, message):
    from maskrcnn_local import predict_batch

    (tmp_path / "empty").mkdir()
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.jpg").write_bytes(b"\xff\xd8\xff")
    (tmp_path / "model" / "1").mkdir(parents=True)
    folder = {"no folder": "nowhere", "no image": "empty"}.get(case, "images")
    extra = {"threshold": ["--score-threshold", "2"], "top": ["--top", "0"]}.get(case, [])
    status = predict_batch.main([str(tmp_path / "model"), str(tmp_path / folder),
                                 "--out", str(tmp_path / "out"), *extra])
    assert status == 2
    assert message.format(tmp=tmp_path) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_command_runs_from_the_notebooks_folder(tmp_path):
    """As docs/labeling.md gives it: `python -m maskrcnn_local.predict_batch` from notebooks/
    (the launcher package beside it), a refusal exiting 2."""
    done = _predict_batch(str(tmp_path / "model"), str(tmp_path / "nowhere"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"error: folder '{tmp_path}/nowhere' does not exist" in done.stderr
