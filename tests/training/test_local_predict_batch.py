"""`python -m maskrcnn_local.predict_batch`'s refusals: each bad value named, exit status 2,
before TensorFlow is loaded or anything is written; a run in which every image fails exits 1
naming each. The run itself: test_fine_tune.py's loop."""

import json
import os
import subprocess
import sys
import types

import pytest

from tests.paths import REPO

# main() in a fresh process, which then says whether TensorFlow was loaded.
_MAIN_THEN_MODULES = ("import sys\n"
                      "from maskrcnn_local import predict_batch\n"
                      "status = predict_batch.main(sys.argv[1:])\n"
                      "print('tensorflow loaded:', 'tensorflow' in sys.modules, file=sys.stderr)\n"
                      "sys.exit(status)\n")


def _predict_batch(*args, module=True):
    # From notebooks/, where the launcher package is (docs/labeling.md, "The loop").
    command = ["-m", "maskrcnn_local.predict_batch"] if module else ["-c", _MAIN_THEN_MODULES]
    return subprocess.run([sys.executable, *command, *args],
                          cwd=os.path.join(REPO, "notebooks"), capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("case, message", [
    ("no folder", "folder '{tmp}/nowhere' does not exist"),
    ("no image", "folder '{tmp}/empty' holds no .jpg/.jpeg/.png image"),
    ("no categories", "model '{tmp}/model': no code/categories.json"),
    ("threshold", "--score-threshold 2.0: expected 0 to 1"),
    ("top", "--top 0: expected at least 1"),
])
def test_bad_input_exits_2_naming_the_value_before_tensorflow_is_loaded(tmp_path, case, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.jpg").write_bytes(b"\xff\xd8\xff")
    (tmp_path / "model" / "1").mkdir(parents=True)
    folder = {"no folder": "nowhere", "no image": "empty"}.get(case, "images")
    extra = {"threshold": ["--score-threshold", "2"], "top": ["--top", "0"]}.get(case, [])
    done = _predict_batch(str(tmp_path / "model"), str(tmp_path / folder),
                          "--out", str(tmp_path / "out"), *extra, module=False)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message.format(tmp=tmp_path) in done.stderr
    assert "tensorflow loaded: False" in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_the_command_runs_from_the_notebooks_folder(tmp_path):
    """As docs/labeling.md gives it: `python -m maskrcnn_local.predict_batch` from notebooks/
    (the launcher package beside it), a refusal exiting 2."""
    done = _predict_batch(str(tmp_path / "model"), str(tmp_path / "nowhere"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"error: folder '{tmp_path}/nowhere' does not exist" in done.stderr


def test_a_run_in_which_every_image_fails_exits_1_naming_each_and_why(tmp_path, capsys,
                                                                      monkeypatch):
    """The served model stands in (no trained model here: test_fine_tune.py's loop runs a real
    one), failing every image as TensorFlow Serving's decode fails an image it cannot read: the
    run's files name the failures, no hand-off is written, and the command exits 1 naming
    each file and why."""
    import maskrcnn_local
    from maskrcnn_local import predict_batch

    def answer(served, body, content_type, environment=None):
        raise ValueError(f"Unknown image file format ({len(body)} bytes)")

    stand_in = types.SimpleNamespace(serve=lambda model_dir: object(), answer=answer)
    monkeypatch.setitem(sys.modules, "maskrcnn_local.batch_transform", stand_in)
    monkeypatch.setattr(maskrcnn_local, "batch_transform", stand_in, raising=False)
    (tmp_path / "images" / "sub").mkdir(parents=True)
    (tmp_path / "images" / "a.jpg").write_bytes(b"\xff\xd8\xff")
    (tmp_path / "images" / "sub" / "b.png").write_bytes(b"\x89PNG")
    (tmp_path / "model" / "code").mkdir(parents=True)
    (tmp_path / "model" / "code" / "categories.json").write_text(
        json.dumps([{"id": 1, "name": "dent"}]))
    out = tmp_path / "out"
    status = predict_batch.main([str(tmp_path / "model"), str(tmp_path / "images"),
                                 "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 1, err
    assert err.splitlines() == [
        f"error: no image predicted: all 2 failed ({out}/summary.json lists them):",
        "  a.jpg: ValueError: Unknown image file format (3 bytes)",
        "  sub/b.png: ValueError: Unknown image file format (4 bytes)"]
    assert sorted(os.listdir(out)) == ["images.json", "predictions.json", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["images"], summary["images_predicted"]) == (2, 0)
    assert [f["file_name"] for f in summary["failed_images"]] == ["a.jpg", "sub/b.png"]
