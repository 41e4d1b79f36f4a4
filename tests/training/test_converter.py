"""COCO JSON -> TFRecord converter: round trip through Model Garden's decoder, validation, atomicity."""

import copy
import glob
import json
import os
import shutil

import numpy as np
import pytest
from pycocotools import mask as mask_api

from maskrcnn_job import coco_to_tfrecord
from maskrcnn_job.coco_to_tfrecord import ConversionError


def _decode_all(pattern):
    import tensorflow as tf
    from official.vision.dataloaders import tf_example_decoder

    decoder = tf_example_decoder.TfExampleDecoder(include_mask=True)
    files = sorted(glob.glob(pattern))
    return [tf.nest.map_structure(lambda t: t.numpy(), decoder.decode(record))
            for record in tf.data.TFRecordDataset(files)]


def _load(coco_dir, split):
    with open(os.path.join(coco_dir, "annotations", f"instances_{split}2017.json")) as f:
        return json.load(f)


def _copy_coco(small_coco, tmp_path):
    target = tmp_path / "coco"
    shutil.copytree(small_coco, target)
    return str(target)


def _save(coco_dir, split, dataset):
    with open(os.path.join(coco_dir, "annotations", f"instances_{split}2017.json"), "w") as f:
        json.dump(dataset, f)


def test_round_trip_through_model_garden_decoder(small_coco, tmp_path):
    out = str(tmp_path / "channel")
    results = coco_to_tfrecord.convert_coco_dir(small_coco, out, progress=False)
    source = _load(small_coco, "train")
    decoded = _decode_all(os.path.join(out, "tfrecords", "train-*.tfrecord"))
    assert results["train"].num_images == len(source["images"]) == len(decoded)
    by_image = {}
    for ann in source["annotations"]:
        by_image.setdefault(ann["image_id"], []).append(ann)
    for image, example in zip(sorted(source["images"], key=lambda im: im["id"]), decoded):
        anns = sorted(by_image[image["id"]], key=lambda a: a["id"])
        h, w = image["height"], image["width"]
        assert example["source_id"] == str(image["id"]).encode()
        assert example["image"].shape == (h, w, 3)
        np.testing.assert_array_equal(example["groundtruth_classes"],
                                      [a["category_id"] for a in anns])
        expected_boxes = [[a["bbox"][1] / h, a["bbox"][0] / w, (a["bbox"][1] + a["bbox"][3]) / h,
                           (a["bbox"][0] + a["bbox"][2]) / w] for a in anns]
        np.testing.assert_allclose(example["groundtruth_boxes"], expected_boxes, atol=1e-6)
        expected_masks = [mask_api.decode(mask_api.merge(
            mask_api.frPyObjects(a["segmentation"], h, w))) for a in anns]
        np.testing.assert_array_equal(example["groundtruth_instance_masks"], expected_masks)
        assert example["groundtruth_instance_masks"].sum() > 0
    info = json.load(open(os.path.join(out, "dataset_info.json")))
    assert info["num_classes"] == 4
    assert info["splits"]["val"]["num_images"] == len(_load(small_coco, "val")["images"])
    assert os.path.isfile(os.path.join(out, "annotations", "instances_val2017.json"))


def test_conversion_is_deterministic_and_sharded_by_size(small_coco, tmp_path):
    one = str(tmp_path / "one")
    two = str(tmp_path / "two")
    coco_to_tfrecord.convert_split(
        os.path.join(small_coco, "annotations", "instances_train2017.json"),
        os.path.join(small_coco, "train2017"), one, "train", shard_mb=0.01, progress=False)
    coco_to_tfrecord.convert_split(
        os.path.join(small_coco, "annotations", "instances_train2017.json"),
        os.path.join(small_coco, "train2017"), two, "train", shard_mb=0.01, workers=2,
        progress=False)
    names = sorted(os.listdir(one))
    assert len(names) > 1, "a 10 kB shard limit should give several shards"
    assert names == sorted(os.listdir(two))
    assert all(n.endswith(f"-of-{len(names):05d}.tfrecord") for n in names)
    for name in names:
        assert open(os.path.join(one, name), "rb").read() == open(os.path.join(two, name),
                                                                   "rb").read()
    assert len(_decode_all(os.path.join(one, "*.tfrecord"))) == 12


def _corrupt(dataset, coco_dir):
    """Four kinds of invalid input in one annotation file."""
    bad = copy.deepcopy(dataset)
    anns = bad["annotations"]
    anns[0]["category_id"] = 77
    anns[1]["segmentation"] = [[1.0, 2.0, 3.0, 4.0]]
    anns[2]["segmentation"] = {"size": [10, 10], "counts": [100]}
    os.remove(os.path.join(coco_dir, "train2017", bad["images"][-1]["file_name"]))
    return bad


def test_invalid_input_fails_with_counts_and_writes_nothing(small_coco, tmp_path):
    coco_dir = _copy_coco(small_coco, tmp_path)
    _save(coco_dir, "train", _corrupt(_load(coco_dir, "train"), coco_dir))
    out = str(tmp_path / "out")
    with pytest.raises(ConversionError) as error:
        coco_to_tfrecord.convert_coco_dir(coco_dir, out, splits=("train",), progress=False)
    message = str(error.value)
    assert "4 invalid record(s)" in message
    for reason in ("unknown category id", "bad segmentation", "missing image file"):
        assert reason in message
    assert "category_id 77" in message
    assert "--skip-invalid" in message
    assert not glob.glob(os.path.join(out, "tfrecords", "*"))


def test_skip_invalid_drops_bad_records_and_reports_them(small_coco, tmp_path):
    coco_dir = _copy_coco(small_coco, tmp_path)
    source = _load(coco_dir, "train")
    _save(coco_dir, "train", _corrupt(source, coco_dir))
    out = str(tmp_path / "out")
    result = coco_to_tfrecord.convert_coco_dir(coco_dir, out, splits=("train",),
                                               skip_invalid=True, progress=False)["train"]
    report = json.load(open(os.path.join(out, "tfrecords", "train-skipped.json")))
    assert report["counts"] == {"unknown category id": 1, "bad segmentation": 2,
                                "missing image file": 1}
    assert result.num_images == len(source["images"]) - 1
    last_image = source["images"][-1]["id"]
    kept = [a for a in source["annotations"][3:] if a["image_id"] != last_image]
    assert result.num_instances == len(kept)
    decoded = _decode_all(os.path.join(out, "tfrecords", "train-*.tfrecord"))
    assert sum(len(d["groundtruth_classes"]) for d in decoded) == len(kept)


def test_rle_segmentations_are_converted(small_coco, tmp_path):
    coco_dir = _copy_coco(small_coco, tmp_path)
    dataset = _load(coco_dir, "train")
    image = dataset["images"][0]
    h, w = image["height"], image["width"]
    binary = np.zeros((h, w), np.uint8, order="F")
    binary[5:20, 10:30] = 1
    compressed = mask_api.encode(binary)
    uncompressed_counts = []  # column-major runs, as COCO's crowd annotations store them
    flat, value, run = binary.flatten(order="F"), 0, 0
    for pixel in flat:
        if pixel != value:
            uncompressed_counts.append(run)
            value, run = pixel, 0
        run += 1
    uncompressed_counts.append(run)
    base = {"image_id": image["id"], "category_id": 1, "bbox": [10, 5, 20, 15], "area": 300}
    dataset["annotations"] += [
        dict(base, id=9001, iscrowd=0,
             segmentation={"size": [h, w], "counts": compressed["counts"].decode()}),
        dict(base, id=9002, iscrowd=1, segmentation={"size": [h, w], "counts": uncompressed_counts}),
    ]
    _save(coco_dir, "train", dataset)
    out = str(tmp_path / "out")
    coco_to_tfrecord.convert_coco_dir(coco_dir, out, splits=("train",), progress=False)
    first = _decode_all(os.path.join(out, "tfrecords", "train-*.tfrecord"))[0]
    np.testing.assert_array_equal(first["groundtruth_instance_masks"][-2], binary)
    np.testing.assert_array_equal(first["groundtruth_instance_masks"][-1], binary)
    assert list(first["groundtruth_is_crowd"][-2:]) == [False, True]


def test_empty_annotation_set_is_rejected(small_coco, tmp_path):
    coco_dir = _copy_coco(small_coco, tmp_path)
    dataset = _load(coco_dir, "val")
    dataset["annotations"] = []
    _save(coco_dir, "val", dataset)
    with pytest.raises(ConversionError, match="no annotations"):
        coco_to_tfrecord.convert_coco_dir(coco_dir, str(tmp_path / "out"), splits=("val",),
                                          progress=False)


def test_interrupted_conversion_leaves_no_shard(small_coco, tmp_path, monkeypatch):
    real_examples = coco_to_tfrecord._examples

    def interrupted(*args, **kwargs):
        for index, record in enumerate(real_examples(*args, **kwargs)):
            if index == 5:
                raise KeyboardInterrupt
            yield record

    monkeypatch.setattr(coco_to_tfrecord, "_examples", interrupted)
    out = str(tmp_path / "out")
    with pytest.raises(KeyboardInterrupt):
        coco_to_tfrecord.convert_split(
            os.path.join(small_coco, "annotations", "instances_train2017.json"),
            os.path.join(small_coco, "train2017"), out, "train", shard_mb=0.01, progress=False)
    assert os.listdir(out) == []
