"""local_run --dataset: a labeling tool's export becomes the local run's train channel through the
staging job's converter (the run itself is tests/training/test_job.py's)."""

import argparse

import pytest

from maskrcnn_job.data import layout
from maskrcnn_local import local_run

from tests.training.tool_exports import label_studio_export


def test_a_label_studio_export_becomes_the_train_channel_and_is_reused(tmp_path, capsys):
    root, _ = label_studio_export(tmp_path, count=6)
    args = local_run.parse_args(["--dataset", root, "--val-fraction", "0.34", "--split-seed", "2"])
    channel = str(tmp_path / "channel")
    local_run._prepare_dataset(args, str(tmp_path / "work"), channel)
    info = layout.Channel(channel).read_info()
    assert info.source["format"] == "label-studio"
    assert info.source["split"] == {"by": "seed", "seed": 2, "val_fraction": 0.34}
    assert (info.splits["train"].num_images, info.splits["val"].num_images) == (4, 2)
    local_run._prepare_dataset(args, str(tmp_path / "work"), channel)
    assert f"dataset: reusing {channel}" in capsys.readouterr().out


def test_a_bad_dataset_is_refused_with_exit_status_2_naming_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        local_run.parse_args(["--dataset", str(tmp_path / "nowhere")])
    assert exited.value.code == 2
    assert "--dataset" in capsys.readouterr().err
    (tmp_path / "export").mkdir()
    args = argparse.Namespace(dataset=str(tmp_path / "export"), val_fraction=0.2, split_seed=0,
                              crowd_as_instances=False, boxes_without_mask="refuse")
    with pytest.raises(SystemExit) as exited:
        local_run._prepare_dataset(args, str(tmp_path / "work"), str(tmp_path / "channel"))
    assert exited.value.code == 2
    assert "is no COCO export this job reads" in capsys.readouterr().err
