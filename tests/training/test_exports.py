"""Labeling tools' COCO exports as they really are (CVAT's COCO 1.0, Label Studio's COCO): refused
or converted as docs/staging.md says, read back through Model Garden's decoder."""

import json
import os
import zipfile

import numpy as np
import pytest
from PIL import Image, ImageOps
from pycocotools import mask as mask_api

from maskrcnn_job.data import coco_to_tfrecord, exports, layout
from maskrcnn_job.data.coco_to_tfrecord import ConversionError

from tests.training.test_converter import _decode_all

SPARSE = [{"id": 1000, "name": "dent"}, {"id": 3, "name": "scratch"},
          {"id": 17, "name": "rust"}, {"id": 55, "name": "crack"}]  # crack: no annotation
USED = (3, 17, 1000)
RED = (255, 0, 0)


def _image(path, width, height, box, exif_orientation=None):
    """A grey image with a red rectangle `box` (x, y, w, h) as displayed. With an EXIF orientation
    the stored pixels are what that orientation turns upright into it, as a phone writes them."""
    displayed = Image.new("RGB", (width, height), (90, 90, 90))
    x, y, w, h = box
    displayed.paste(RED, (x, y, x + w, y + h))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if exif_orientation is None:
        displayed.save(path, quality=98)
        return
    assert exif_orientation == 6  # displayed = stored rotated 90 degrees clockwise
    stored = displayed.transpose(Image.Transpose.ROTATE_90)
    exif = Image.Exif()
    exif[0x0112] = exif_orientation
    stored.save(path, quality=98, exif=exif.tobytes())
    with Image.open(path) as check:  # what the labeling tools display
        assert ImageOps.exif_transpose(check).size == (width, height)


def _rle(width, height, box):
    mask = np.zeros((height, width), dtype=np.uint8)
    x, y, w, h = box
    mask[y:y + h, x:x + w] = 1
    rle = mask_api.encode(np.asfortranarray(mask))
    return {"size": [height, width], "counts": rle["counts"].decode("ascii")}


def _polygon(box):
    x, y, w, h = box
    return [[x, y, x + w, y, x + w, y + h, x, y + h]]


def _export(root, file_names, crowd, categories=SPARSE, rotated=(), empty=(), size=(32, 24)):
    """COCO dict with one red-box annotation per image (category cycling through USED); images
    written below root at their file names (subfolders kept)."""
    width, height = size
    images, annotations = [], []
    for index, name in enumerate(file_names, start=1):
        box = (4 + index % 5, 3 + index % 4, 10, 8)
        orientation = 6 if name in rotated else None
        _image(os.path.join(root, name), width, height, box, orientation)
        images.append({"id": index, "file_name": name, "width": width, "height": height})
        if name in empty:
            continue
        annotations.append({
            "id": 100 + index, "image_id": index, "category_id": USED[index % len(USED)],
            "bbox": list(box), "area": box[2] * box[3], "iscrowd": int(crowd),
            "segmentation": _rle(width, height, box) if crowd else _polygon(box)})
    return {"images": images, "annotations": annotations, "categories": categories}


def _cvat(tmp_path, count=6, rotated=()):
    """CVAT's COCO 1.0: annotations/instances_default.json (every mask a crowd RLE) + images/,
    file names relative to images/, in a subfolder."""
    root = tmp_path / "cvat"
    names = [f"batch1/img{i}.jpg" for i in range(count)]
    dataset = _export(str(root / "images"), names, crowd=True, rotated=rotated)
    (root / "annotations").mkdir(parents=True)
    (root / "annotations" / "instances_default.json").write_text(json.dumps(dataset))
    return str(root), dataset


def _label_studio(tmp_path, count=10, empty=()):
    """Label Studio's COCO: result.json + images/, file names 'images/<subfolder>/...', polygons."""
    root = tmp_path / "label-studio"
    names = [f"images/upload/3/{i:02d}-part.jpg" for i in range(count)]
    dataset = _export(str(root), names, crowd=False, empty=empty)
    (root / "result.json").write_text(json.dumps(dataset))
    return str(root), dataset


def _info(channel):
    return layout.Channel(channel).read_info()


def test_cvats_all_crowd_export_is_refused_naming_the_option_and_writes_nothing(tmp_path):
    root, _ = _cvat(tmp_path)
    out = tmp_path / "channel"
    with pytest.raises(ConversionError) as refused:
        coco_to_tfrecord.convert_export(root, str(out), name="parts", progress=False)
    message = str(refused.value)
    assert "crowd_as_instances=true" in message and "cvat-ai/cvat#7030" in message
    assert "iscrowd=1" in message
    assert not os.path.exists(layout.Channel(str(out)).info_file)
    assert not [name for _, _, names in os.walk(out) for name in names
                if name.endswith(".tfrecord")]


def test_cvats_export_with_crowds_as_instances_trains_contiguous_ids_and_keeps_the_originals(
        tmp_path):
    root, source = _cvat(tmp_path, count=6)
    out = str(tmp_path / "channel")
    results = coco_to_tfrecord.convert_export(root, out, name="parts", val_fraction=0.34, seed=3,
                                              crowd_as_instances=True, progress=False)
    info = _info(out)
    # Ids 1..K in the order of the original ids, every original kept.
    assert [(c["id"], c["source_id"], c["name"]) for c in info.categories] == [
        (1, 3, "scratch"), (2, 17, "rust"), (3, 55, "crack"), (4, 1000, "dent")]
    assert info.num_classes == 5
    assert info.source_ids() == {1: 3, 2: 17, 3: 55, 4: 1000}
    assert info.name == "parts" and info.source["format"] == exports.CVAT
    assert info.source["split"] == {"by": "seed", "seed": 3, "val_fraction": 0.34}
    # The empty category and the crowds the user should know of.
    assert any("crack (id 55)" in note for note in info.notes), info.notes
    assert any("trained as instances" in note for note in info.notes), info.notes
    contiguous = {3: 1, 17: 2, 55: 3, 1000: 4}
    by_image = {a["image_id"]: a for a in source["annotations"]}
    for split in layout.SPLITS:
        decoded = _decode_all(os.path.join(out, "tfrecords", f"{split}-*.tfrecord"))
        assert len(decoded) == results[split].num_images > 0
        for example in decoded:
            ann = by_image[int(example["source_id"])]
            assert list(example["groundtruth_classes"]) == [contiguous[ann["category_id"]]]
            assert list(example["groundtruth_is_crowd"]) == [False]
            assert example["groundtruth_instance_masks"].sum() == 80  # the 10 x 8 box
    # The val annotations COCOeval reads: the records' ids, crowds as instances.
    val = json.load(open(layout.Channel(out).annotations("val")))
    assert {a["category_id"] for a in val["annotations"]} <= {1, 2, 4}
    assert {a["iscrowd"] for a in val["annotations"]} == {0}
    assert sorted(c["id"] for c in val["categories"]) == [1, 2, 3, 4]


def test_an_exif_rotated_jpeg_is_turned_upright_as_the_tools_annotate_it(tmp_path):
    rotated = "batch1/img1.jpg"
    root, source = _cvat(tmp_path, count=4, rotated=(rotated,))
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_export(root, out, name="parts", val_fraction=0.25,
                                    crowd_as_instances=True, progress=False)
    with Image.open(os.path.join(root, "images", rotated)) as stored:
        assert stored.size == (24, 32)  # stored on its side: TensorFlow would decode this
    examples = {int(e["source_id"]): e for split in layout.SPLITS
                for e in _decode_all(os.path.join(out, "tfrecords", f"{split}-*.tfrecord"))}
    image = next(im for im in source["images"] if im["file_name"] == rotated)
    example = examples[image["id"]]
    assert example["image"].shape == (24, 32, 3)  # as displayed: 32 wide, 24 high
    mask = example["groundtruth_instance_masks"][0].astype(bool)
    inside, outside = example["image"][mask], example["image"][~mask]
    # The mask lies on the red box (JPEG blurs its edges: means, not extremes).
    assert inside[:, 0].mean() > 200 and inside[:, 1].mean() < 60
    assert outside[:, 0].mean() < 110
    assert any("1 image(s) turned upright" in note for note in _info(out).notes)


def test_label_studios_single_file_is_split_reproducibly_and_the_split_recorded(tmp_path):
    root, _ = _label_studio(tmp_path, count=10, empty=("images/upload/3/04-part.jpg",))

    def split(seed, out):
        coco_to_tfrecord.convert_export(root, str(tmp_path / out), name="parts",
                                        val_fraction=0.3, seed=seed, progress=False)
        with open(tmp_path / out / "annotations" / layout.SPLIT_RECORD) as f:
            return json.load(f)

    first, again, other = split(7, "a"), split(7, "b"), split(8, "c")
    assert first == again
    assert first != other
    assert first["by"] == "seed" and first["seed"] == 7 and first["val_fraction"] == 0.3
    val_ids = [im["id"] for im in first["images"]["val"]]
    train_ids = [im["id"] for im in first["images"]["train"]]
    assert len(val_ids) == 3 and sorted(val_ids + train_ids) == list(range(1, 11))
    # File names with their subfolders, relative to the export.
    assert {im["file_name"] for im in first["images"]["train"]} <= {
        f"images/upload/3/{i:02d}-part.jpg" for i in range(10)}
    info = _info(str(tmp_path / "a"))
    assert info.source["format"] == exports.LABEL_STUDIO
    assert info.splits["train"].num_images + info.splits["val"].num_images == 10
    assert any("have no annotation" in note for note in info.notes), info.notes
    assert any("crack (id 55)" in note for note in info.notes)


def test_a_zipped_export_with_windows_separators_converts_like_the_directory(tmp_path):
    root, dataset = _label_studio(tmp_path, count=4)
    for image in dataset["images"]:
        image["file_name"] = image["file_name"].replace("/", "\\")
    with open(os.path.join(root, "result.json"), "w") as f:
        json.dump(dataset, f)
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                zf.write(path, os.path.join("project-1", os.path.relpath(path, root)))
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_export(str(archive), out, name="parts", val_fraction=0.25,
                                    progress=False, work_dir=str(tmp_path / "work"))
    assert _info(out).splits["train"].skipped == 0
    assert _info(out).splits["train"].num_images == 3


def test_an_unknown_layout_is_refused_naming_what_was_found_and_what_is_expected(tmp_path):
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "labels.csv").write_text("a,b\n")
    with pytest.raises(ConversionError, match=r"found: labels\.csv.*CVAT's COCO 1\.0"):
        coco_to_tfrecord.convert_export(str(tmp_path / "export"), str(tmp_path / "out"),
                                        progress=False)
    root, _ = _label_studio(tmp_path, count=4)
    with pytest.raises(ConversionError, match=r"val_fraction=1\.5: expected a number between"):
        coco_to_tfrecord.convert_export(root, str(tmp_path / "out"), val_fraction=1.5,
                                        progress=False)
