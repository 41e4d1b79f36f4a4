"""COCO JSON -> TFRecord converter: round trip through Model Garden's decoder, validation, atomicity."""

import copy
import glob
import json
import os
import shutil

import numpy as np
import pytest
from pycocotools import mask as mask_api

from maskrcnn_job.data import coco_to_tfrecord, layout
from maskrcnn_job.data.coco_to_tfrecord import ConversionError
from maskrcnn_local import synthetic_coco

from tests.training.tfrecords import decode_all


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
    decoded = decode_all(os.path.join(out, "tfrecords", "train-*.tfrecord"))
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
        # The synthetic set's masks are RLE (visible parts of occluded shapes), crowds among them.
        expected_masks = [mask_api.decode(coco_to_tfrecord._segmentation_rle(a["segmentation"],
                                                                             h, w)) for a in anns]
        np.testing.assert_array_equal(example["groundtruth_instance_masks"], expected_masks)
        np.testing.assert_array_equal(example["groundtruth_is_crowd"],
                                      [bool(a["iscrowd"]) for a in anns])
        assert example["groundtruth_instance_masks"].sum() > 0
    # What the job reads (data/layout.py): the info it wrote, the val annotations for COCOeval.
    info = layout.Channel(out).read_info()
    assert info.num_classes == len(synthetic_coco.CATEGORIES) + 1
    assert info.splits["val"].num_images == len(_load(small_coco, "val")["images"])
    # The val annotations as written, each annotation numbered 1..N with the file's own id kept
    # as `source_id` (here the same: the synthetic set numbers them from 1).
    source = _load(small_coco, "val")
    expected = dict(source, annotations=[dict(a, id=n, source_id=a["id"]) for n, a in
                                         enumerate(source["annotations"], start=1)])
    assert expected == json.load(open(layout.Channel(out).annotations("val")))


def test_the_records_hold_every_key_model_gardens_decoder_reads(small_coco, tmp_path):
    """Writer and reader of the records agree on their keys: data/layout.py's DECODED_KEYS are
    exactly what Model Garden's decoder parses, and every record the converter writes has them
    (its decoder falls back to defaults for some absent keys, so the round trip alone would not
    notice one missing)."""
    import tensorflow as tf
    from official.vision.dataloaders import tf_example_decoder

    decoded = set(tf_example_decoder.TfExampleDecoder(include_mask=True)._keys_to_features)
    assert decoded == layout.DECODED_KEYS
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_coco_dir(small_coco, out, progress=False)
    for record in tf.data.TFRecordDataset(glob.glob(layout.Channel(out).shards("train"))):
        keys = set(tf.train.Example.FromString(record.numpy()).features.feature)
        assert layout.DECODED_KEYS <= keys, layout.DECODED_KEYS - keys


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
    assert len(decode_all(os.path.join(one, "*.tfrecord"))) == 12


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
    decoded = decode_all(os.path.join(out, "tfrecords", "train-*.tfrecord"))
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
    first = decode_all(os.path.join(out, "tfrecords", "train-*.tfrecord"))[0]
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
    real_encode = coco_to_tfrecord._encode_image
    calls = []

    def interrupted(args):
        calls.append(args)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return real_encode(args)

    monkeypatch.setattr(coco_to_tfrecord, "_encode_image", interrupted)
    out = str(tmp_path / "out")
    with pytest.raises(KeyboardInterrupt):
        coco_to_tfrecord.convert_split(
            os.path.join(small_coco, "annotations", "instances_train2017.json"),
            os.path.join(small_coco, "train2017"), out, "train", shard_mb=0.01, progress=False)
    assert os.listdir(out) == []


def test_records_equal_model_gardens_for_the_same_image(small_coco):
    """tf_example's pure-Python bytes parse to the Example Model Garden's tfrecord_lib builds."""
    import tensorflow as tf
    from official.vision.data import tfrecord_lib

    dataset = _load(small_coco, "train")
    image = sorted(dataset["images"], key=lambda im: im["id"])[0]
    anns = sorted((a for a in dataset["annotations"] if a["image_id"] == image["id"]),
                  key=lambda a: a["id"])
    # The synthetic set's ids are 1..K already: the contiguous ids are the original ones.
    labels = {c["id"]: (c["id"], c["name"]) for c in dataset["categories"]}
    image_dir = os.path.join(small_coco, "train2017")
    framed, problem, turned = coco_to_tfrecord._encode_image(
        (image, anns, image_dir, labels, False))
    assert problem is None and not turned
    record = framed[12:-4]  # length (8) + its CRC (4), the record, its CRC (4)
    with open(os.path.join(image_dir, image["file_name"]), "rb") as f:
        encoded = f.read()
    h, w = image["height"], image["width"]
    features = tfrecord_lib.image_info_to_feature_dict(h, w, image["file_name"], image["id"],
                                                       encoded, "jpeg")
    convert = tfrecord_lib.convert_to_feature
    boxes = np.array([a["bbox"] for a in anns], dtype=np.float64)
    binary = [mask_api.decode(coco_to_tfrecord._segmentation_rle(a["segmentation"], h, w))
              for a in anns]
    # Our masks are PNGs at zlib's fastest level: other bytes, the same pixels.
    masks = [coco_to_tfrecord._mask_png(m) for m in binary]
    for ours, theirs in zip(masks, (tfrecord_lib.encode_mask_as_png(m) for m in binary)):
        np.testing.assert_array_equal(tf.io.decode_png(ours).numpy(),
                                      tf.io.decode_png(theirs).numpy())
    features.update({
        "image/object/bbox/xmin": convert(list(np.clip(boxes[:, 0], 0, w) / w), "float_list"),
        "image/object/bbox/xmax": convert(list(np.clip(boxes[:, 0] + boxes[:, 2], 0, w) / w),
                                          "float_list"),
        "image/object/bbox/ymin": convert(list(np.clip(boxes[:, 1], 0, h) / h), "float_list"),
        "image/object/bbox/ymax": convert(list(np.clip(boxes[:, 1] + boxes[:, 3], 0, h) / h),
                                          "float_list"),
        "image/object/class/label": convert([a["category_id"] for a in anns], "int64_list"),
        "image/object/class/text": convert([labels[a["category_id"]][1].encode() for a in anns],
                                           "bytes_list"),
        "image/object/is_crowd": convert([a.get("iscrowd", 0) for a in anns], "int64_list"),
        "image/object/area": convert([float(a["area"]) for a in anns], "float_list"),
        "image/object/mask": convert(masks, "bytes_list"),
    })
    expected = tf.train.Example(features=tf.train.Features(feature=features))
    assert tf.train.Example.FromString(record) == expected


def test_tf_records_encode_edge_values_and_frame_records_as_tensorflow_does(tmp_path):
    import tensorflow as tf

    from maskrcnn_job.data import tf_records

    record = tf_records.example({
        "negative": tf_records.int64_feature([-1, 0, 2**62]),
        "empty_floats": tf_records.float_feature([]),
        "empty_bytes": tf_records.bytes_feature([]),
        "floats": tf_records.float_feature([0.1, -3.5, 1e30]),
        "bytes": tf_records.bytes_feature([b"", b"\x00" * 300]),
    })
    feature = tf.train.Feature
    expected = tf.train.Example(features=tf.train.Features(feature={
        "negative": feature(int64_list=tf.train.Int64List(value=[-1, 0, 2**62])),
        "empty_floats": feature(float_list=tf.train.FloatList(value=[])),
        "empty_bytes": feature(bytes_list=tf.train.BytesList(value=[])),
        "floats": feature(float_list=tf.train.FloatList(value=[0.1, -3.5, 1e30])),
        "bytes": feature(bytes_list=tf.train.BytesList(value=[b"", b"\x00" * 300])),
    }))
    assert tf.train.Example.FromString(record) == expected
    # The file format: TensorFlow's reader checks both CRCs of every record.
    path = str(tmp_path / "records.tfrecord")
    records = [record, b"", b"x" * 70000]
    with open(path, "wb") as f:
        f.write(b"".join(tf_records.framed(item) for item in records))
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == records
    with open(path, "r+b") as f:  # one flipped bit in the data: TensorFlow refuses the file
        f.seek(20)
        byte = f.read(1)
        f.seek(20)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(path))


def _break_images(coco_dir):
    """Four images made unusable in four ways; returns {file name: the problem expected}."""
    from PIL import Image

    dataset = _load(coco_dir, "train")
    files = [im["file_name"] for im in sorted(dataset["images"], key=lambda im: im["id"])]
    folder = os.path.join(coco_dir, "train2017")
    truncated, garbage, resized, two_channel = files[1], files[3], files[5], files[7]
    with open(os.path.join(folder, truncated), "rb") as f:
        data = f.read()
    with open(os.path.join(folder, truncated), "wb") as f:
        f.write(data[: len(data) // 2])
    with open(os.path.join(folder, garbage), "wb") as f:
        f.write(b"\xff\xd8\xff" + os.urandom(500))
    with Image.open(os.path.join(folder, resized)) as im:
        im.resize((im.width + 8, im.height)).save(os.path.join(folder, resized), format="JPEG")
    with Image.open(os.path.join(folder, two_channel)) as im:
        im.convert("LA").save(os.path.join(folder, two_channel), format="PNG")
    return {truncated: "undecodable image", garbage: "undecodable image",
            resized: "image size differs from the annotation file",
            two_channel: "unsupported channel count"}


def test_bad_images_fail_the_conversion_naming_their_files(small_coco, tmp_path):
    coco_dir = _copy_coco(small_coco, tmp_path)
    broken = _break_images(coco_dir)
    out = str(tmp_path / "out")
    with pytest.raises(ConversionError) as failure:
        coco_to_tfrecord.convert_split(
            os.path.join(coco_dir, "annotations", "instances_train2017.json"),
            os.path.join(coco_dir, "train2017"), out, "train", workers=2, progress=False)
    message = str(failure.value)
    assert "4 invalid record(s)" in message
    assert "2 x undecodable image" in message and "--skip-invalid" in message
    for reason in set(broken.values()):
        assert reason in message
    assert any(name in message for name in broken)
    assert os.listdir(out) == []  # nothing half-written


def test_skip_invalid_drops_bad_images_and_lists_their_files(small_coco, tmp_path):
    coco_dir = _copy_coco(small_coco, tmp_path)
    broken = _break_images(coco_dir)
    out = str(tmp_path / "out")
    result = coco_to_tfrecord.convert_split(
        os.path.join(coco_dir, "annotations", "instances_train2017.json"),
        os.path.join(coco_dir, "train2017"), out, "train", skip_invalid=True, workers=2,
        progress=False)
    assert result.num_images == 12 - 4
    with open(os.path.join(out, "train-skipped.json")) as f:
        report = json.load(f)
    listed = {os.path.basename(p["detail"].split(":")[0]): p["reason"] for p in report["skipped"]}
    assert listed == broken
    assert len(decode_all(os.path.join(out, "train-*.tfrecord"))) == 8


def test_the_command_converts_one_split_when_asked(small_coco, tmp_path, monkeypatch, capsys):
    """`--splits train` (benchmarks/converter_speed.py's call) writes the train split alone and
    ends with its summary, not with read_info()'s refusal of a dataset without val."""
    out = tmp_path / "channel"
    monkeypatch.setattr("sys.argv", ["coco_to_tfrecord", small_coco, str(out), "--splits",
                                     "train", "--workers", "1"])
    coco_to_tfrecord.main()
    with open(out / "dataset_info.json", encoding="utf-8") as f:
        assert sorted(json.load(f)["splits"]) == ["train"]
    assert "train: " in capsys.readouterr().out
