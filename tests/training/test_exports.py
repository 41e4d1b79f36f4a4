"""Labeling tools' COCO exports as their own code writes them (CVAT's COCO 1.0 by Datumaro's
exporter, Label Studio's "COCO with Images" by label_studio_sdk's converter: tests/training/
tool_exports.py, in .venv-labeling): refused or converted as docs/staging.md says, read back
through Model Garden's decoder and scored by the job's own COCO evaluation."""

import json
import os
import re
import shutil
import zipfile

import numpy as np
import pytest
from PIL import Image
from pycocotools import mask as mask_api
from pycocotools.coco import COCO

from maskrcnn_contract import labeling
from maskrcnn_job.data import coco_to_tfrecord, exports, layout
from maskrcnn_job.data.coco_to_tfrecord import ConversionError
from maskrcnn_job.evaluation import coco as coco_evaluation

from tests.training import tool_exports
from tests.training.tfrecords import decode_all
from tests.training.tool_exports import (LABELS, box_mask, box_polygon, cvat_export,
                                         label_studio_export, mask_png, red_box_image)

def _info(channel):
    return layout.Channel(channel).read_info()


def _records(channel, split):
    return decode_all(os.path.join(channel, "tfrecords", f"{split}-*.tfrecord"))


def _file_names(channel):
    """{image id: image/filename} of every record of the channel."""
    import tensorflow as tf

    found = {}
    for split in layout.SPLITS:
        shards = sorted(tf.io.gfile.glob(os.path.join(channel, "tfrecords", f"{split}-*.tfrecord")))
        for record in tf.data.TFRecordDataset(shards):
            example = tf.train.Example.FromString(record.numpy())
            features = example.features.feature
            found[int(features[layout.IMAGE_SOURCE_ID].bytes_list.value[0])] = \
                features[layout.IMAGE_FILENAME].bytes_list.value[0].decode()
    return found


def test_cvats_all_crowd_export_is_refused_naming_the_option_and_writes_nothing(tmp_path):
    root, written = cvat_export(tmp_path)
    assert {a["iscrowd"] for a in written["annotations"]} == {1}  # the tool's, every mask
    out = tmp_path / "channel"
    with pytest.raises(ConversionError) as refused:
        coco_to_tfrecord.convert_export(root, str(out), name="parts", progress=False)
    message = str(refused.value)
    assert "crowd_as_instances=true" in message and "cvat-ai/cvat#7030" in message
    assert "iscrowd=1" in message
    assert not os.path.exists(layout.Channel(str(out)).info_file)
    assert not [name for _, _, names in os.walk(out) for name in names
                if name.endswith(".tfrecord")]


def test_cvats_export_with_crowds_as_instances_converts_its_masks_and_keeps_the_ids(tmp_path):
    root, source = cvat_export(tmp_path, count=6)
    out = str(tmp_path / "channel")
    results = coco_to_tfrecord.convert_export(root, out, name="parts", val_fraction=0.34, seed=3,
                                              crowd_as_instances=True, progress=False)
    info = _info(out)
    # Datumaro numbers the task's labels 1..K in their order (_InstancesExporter.save_categories).
    assert [(c["id"], c["source_id"], c["name"]) for c in info.categories] == [
        (1, 1, "dent"), (2, 2, "scratch"), (3, 3, "rust"), (4, 4, "crack")]
    assert info.num_classes == 5
    assert info.name == "parts" and info.source["format"] == exports.CVAT
    assert info.source["split"] == {"by": "seed", "seed": 3, "val_fraction": 0.34}
    # The empty category and the crowds the user should know of.
    assert any("crack (id 4)" in note for note in info.notes), info.notes
    assert any("trained as instances" in note for note in info.notes), info.notes
    by_image = {a["image_id"]: a for a in source["annotations"]}
    for split in layout.SPLITS:
        decoded = _records(out, split)
        assert len(decoded) == results[split].num_images > 0
        for example in decoded:
            ann = by_image[int(example["source_id"])]
            assert list(example["groundtruth_classes"]) == [ann["category_id"]]
            assert list(example["groundtruth_is_crowd"]) == [False]
            assert example["groundtruth_instance_masks"].sum() == 80  # the 10 x 8 box
    # The val annotations COCOeval reads: the records' ids, crowds as instances.
    val = json.load(open(layout.Channel(out).annotations("val")))
    assert {a["category_id"] for a in val["annotations"]} <= {1, 2, 3}
    assert {a["iscrowd"] for a in val["annotations"]} == {0}
    assert sorted(c["id"] for c in val["categories"]) == [1, 2, 3, 4]


def test_sparse_category_ids_become_1_to_k_keeping_the_originals(tmp_path):
    """Hand-written: neither tool writes sparse ids (Datumaro numbers the labels 1 + index,
    _InstancesExporter.save_categories; Label Studio from 0, Converter._get_labels), but COCO 2017
    has 80 categories among ids 1..90, and another tool's or a hand-edited file any ids."""
    root = tmp_path / "coco"
    sparse = [{"id": 1000, "name": "dent"}, {"id": 3, "name": "scratch"},
              {"id": 17, "name": "rust"}, {"id": 55, "name": "crack"}]
    images, annotations = [], []
    for index in range(1, 5):
        box = (4 + index, 3 + index % 4, 10, 8)
        red_box_image(str(root / "images" / f"{index}.jpg"), 32, 24, box)
        images.append({"id": index, "file_name": f"{index}.jpg", "width": 32, "height": 24})
        annotations.append({"id": index, "image_id": index, "category_id": (3, 17, 1000)[index % 3],
                            "bbox": list(box), "area": 80, "iscrowd": 0,
                            "segmentation": [box_polygon(box)]})
    (root / "annotations.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, "categories": sparse}))
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_export(str(root), out, val_fraction=0.25, progress=False)
    info = _info(out)
    assert [(c["id"], c["source_id"], c["name"]) for c in info.categories] == [
        (1, 3, "scratch"), (2, 17, "rust"), (3, 55, "crack"), (4, 1000, "dent")]
    assert info.source_ids() == {1: 3, 2: 17, 3: 55, 4: 1000}
    contiguous = {3: 1, 17: 2, 1000: 4}
    for split in layout.SPLITS:
        for example in _records(out, split):
            ann = annotations[int(example["source_id"]) - 1]
            assert list(example["groundtruth_classes"]) == [contiguous[ann["category_id"]]]


def test_an_exif_rotated_jpeg_is_turned_upright_as_the_tools_annotate_it(tmp_path):
    rotated = "batch1/img1.jpg"
    root, source = cvat_export(tmp_path, count=4, rotated=(rotated,))
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_export(root, out, name="parts", val_fraction=0.25,
                                    crowd_as_instances=True, progress=False)
    # Datumaro copies the file as it is (ImageFromFile.save: copyto_image), EXIF included.
    with Image.open(os.path.join(root, "images", "default", rotated)) as stored:
        assert stored.size == (24, 32)  # stored on its side: TensorFlow would decode this
    examples = {int(e["source_id"]): e for split in layout.SPLITS for e in _records(out, split)}
    image = next(im for im in source["images"] if im["file_name"] == rotated)
    example = examples[image["id"]]
    assert example["image"].shape == (24, 32, 3)  # as displayed: 32 wide, 24 high
    mask = example["groundtruth_instance_masks"][0].astype(bool)
    inside, outside = example["image"][mask], example["image"][~mask]
    # The mask lies on the red box (JPEG blurs its edges: means, not extremes).
    assert inside[:, 0].mean() > 200 and inside[:, 1].mean() < 60
    assert outside[:, 0].mean() < 110
    assert any("1 image(s) turned upright" in note for note in _info(out).notes)


def test_label_studios_export_of_an_exif_turned_image_is_taken_upright_with_its_polygons(
        tmp_path):
    """Label Studio's converter writes a turned image's stored size and scales its polygons by
    it, a rectangle by the upright size (HumanSignal/label-studio#6608): the image is taken at
    its upright size and its polygon scaled back, so the records' masks lie on the red boxes
    the labeler drew; the notes name the image."""
    rotated = "01-part.jpg"
    root, written = label_studio_export(tmp_path, count=4, rotated=(rotated,), rectangles=True)
    image = next(im for im in written["images"] if im["file_name"].endswith(rotated))
    assert (image["width"], image["height"]) == (24, 32)  # the stored size: the tool's quirk
    # A seed that puts the turned image in val.
    seed = next(s for s in range(100) if image["id"] in exports.split_ids([0, 1, 2, 3], 0.5, s)[1])
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_export(root, out, val_fraction=0.5, seed=seed, progress=False,
                                    boxes_without_mask=labeling.BOX_AS_MASK)
    examples = {int(e["source_id"]): e for split in layout.SPLITS for e in _records(out, split)}
    assert len(examples) == 4
    for source_id, example in examples.items():
        assert example["image"].shape == (24, 32, 3), source_id  # upright: 32 wide, 24 high
        polygon_mask, rectangle_mask = example["groundtruth_instance_masks"].astype(bool)
        inside = example["image"][polygon_mask]
        # The polygon lies on the red box (JPEG blurs its edges: means, not extremes).
        assert inside[:, 0].mean() > 200 and inside[:, 1].mean() < 60, source_id
        np.testing.assert_array_equal(rectangle_mask, box_mask(32, 24, [18, 12, 6, 5]))
    note, = [n for n in _info(out).notes if "HumanSignal/label-studio#6608" in n]
    assert note.startswith("1 EXIF-turned image(s)") and note.endswith(rotated), note
    # The evaluation's ground truth (the seed puts the image in val) is upright too.
    val = json.loads(open(layout.Channel(out).annotations(layout.VAL)).read())
    assert image["id"] in {im["id"] for im in val["images"]}
    assert {(im["width"], im["height"]) for im in val["images"]} == {(32, 24)}


def test_label_studios_single_file_is_split_reproducibly_and_the_split_recorded(tmp_path):
    root, _ = label_studio_export(tmp_path, count=10, empty=("04-part.jpg",))

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
    # Label Studio numbers its images from 0 (convert_to_coco: image_id = len(images)).
    assert len(val_ids) == 3 and sorted(val_ids + train_ids) == list(range(10))
    info = _info(str(tmp_path / "a"))
    assert info.source["format"] == exports.LABEL_STUDIO
    assert info.splits["train"].num_images + info.splits["val"].num_images == 10
    assert any("have no annotation" in note for note in info.notes), info.notes
    assert any("crack (id 0)" in note for note in info.notes), info.notes


def test_label_studios_upload_paths_resolve_to_the_images_it_copied(tmp_path):
    root, written = label_studio_export(tmp_path, count=4)
    # What the tool writes: the upload's path relative to the export, outside it
    # (convert_to_coco: os.path.relpath(get_local_path(...), output_dir)), while the image itself
    # is copied into images/ (get_local_path: shutil.copy(filepath, cache_dir)).
    names = {im["id"]: im["file_name"] for im in written["images"]}
    assert all(name.startswith("../label-studio-server/media/upload/3/") for name in names.values())
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_export(root, out, val_fraction=0.25, progress=False)
    resolved = _file_names(out)
    assert resolved == {i: "images/" + os.path.basename(name) for i, name in names.items()}
    # The record is the copy in the export, not the server's file beside it.
    shutil.rmtree(root + "-server")
    assert _info(out).splits["train"].skipped == 0
    coco_to_tfrecord.convert_export(root, str(tmp_path / "again"), val_fraction=0.25,
                                    progress=False)
    assert _file_names(str(tmp_path / "again")) == resolved


def test_a_zipped_export_with_windows_separators_converts_like_the_directory(tmp_path):
    root, dataset = label_studio_export(tmp_path, count=4)
    # Label Studio on Windows: os.path.relpath writes the upload's path with backslashes.
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


def _two_subfolders(tmp_path):
    """A CVAT task of files in two folders that hold the same base names, each image with its
    red box elsewhere: the export keeps both (images/default/a/img.jpg, images/default/b/...)."""
    items = []
    for folder, x in (("a", 2), ("b", 18)):
        for name in ("img.jpg", "other.jpg"):
            path = tmp_path / "uploads" / folder / name
            box = (x, 4, 10, 8) if name == "img.jpg" else (x, 12, 10, 8)
            red_box_image(str(path), 32, 24, box)
            items.append(tool_exports.item(f"{folder}/{name}", path, 32, 24, [
                {"type": "polygon", "label": "rust", "points": box_polygon(box)}]))
    return tool_exports.write(tool_exports.CVAT, tmp_path / "cvat", LABELS, items)


def test_cvats_same_base_names_in_two_subfolders_each_pair_with_their_own_image(tmp_path):
    root, written = _two_subfolders(tmp_path)
    # Datumaro: file_name is the item id (CVAT: the task's path) + ext, the file below
    # images/<subset>/ (CocoExporter._apply_impl, merge_images=False).
    assert sorted(im["file_name"] for im in written["images"]) == [
        "a/img.jpg", "a/other.jpg", "b/img.jpg", "b/other.jpg"]
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_export(root, out, val_fraction=0.5, progress=False)
    by_id = {im["id"]: im["file_name"] for im in written["images"]}
    assert _file_names(out) == {i: "images/default/" + name for i, name in by_id.items()}
    for split in layout.SPLITS:
        for example in _records(out, split):
            mask = example["groundtruth_instance_masks"][0].astype(bool)
            assert example["image"][mask][:, 0].mean() > 200  # its mask on its own red box


def test_a_base_name_that_several_files_have_is_refused_naming_them(tmp_path):
    root, written = _two_subfolders(tmp_path)
    # The file names cut to their base names, as a flattening tool or a hand edit leaves them
    # (no tool here writes this): two files fit each, and neither may be guessed.
    for image in written["images"]:
        image["file_name"] = os.path.basename(image["file_name"])
    with open(os.path.join(root, "annotations", "instances_default.json"), "w") as f:
        json.dump(written, f)
    with pytest.raises(ConversionError) as refused:
        coco_to_tfrecord.convert_export(root, str(tmp_path / "channel"), val_fraction=0.5,
                                        skip_invalid=True, progress=False)
    message = str(refused.value)
    assert "4 image file name(s)" in message
    assert "'img.jpg' matches images/default/a/img.jpg, images/default/b/img.jpg" in message
    assert "ambiguous" in message


def test_cvats_polygons_and_masks_survive_as_the_records_masks(tmp_path):
    """A mask drawn with CVAT's brush (here a disk, not a box) is exported as a crowd RLE
    (CVATRleToCOCORle.convert_mask, then Datumaro's guess mode), a polygon as a polygon: the
    records hold exactly those pixels."""
    width, height = 40, 30
    yy, xx = np.mgrid[:height, :width]
    disk = ((yy - 14) ** 2 + (xx - 20) ** 2 <= 36).astype(np.uint8)
    triangle = [4, 4, 16, 4, 4, 20]
    items = []
    for index in range(4):
        path = tmp_path / "uploads" / f"img{index}.jpg"
        red_box_image(str(path), width, height, (0, 0, 1, 1))
        shapes = [{"type": "polygon", "label": "rust", "points": triangle}]
        if index % 2:
            shapes.append({"type": "mask", "label": "dent", "mask": mask_png(
                tmp_path / "masks" / f"{index}.png", width, height, disk)})
        items.append(tool_exports.item(f"img{index}.jpg", path, width, height, shapes))
    root, written = tool_exports.write(tool_exports.CVAT, tmp_path / "cvat", LABELS, items)
    crowd = [a for a in written["annotations"] if a["iscrowd"]]
    assert len(crowd) == 2 and all(isinstance(a["segmentation"]["counts"], list) for a in crowd)
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_export(root, out, val_fraction=0.5, progress=False)
    expected_triangle = mask_api.decode(mask_api.merge(
        mask_api.frPyObjects([triangle], height, width)))
    found = 0
    for split in layout.SPLITS:
        for example in _records(out, split):
            masks = example["groundtruth_instance_masks"].astype(np.uint8)
            classes = list(example["groundtruth_classes"])
            np.testing.assert_array_equal(masks[classes.index(3)], expected_triangle)  # rust
            if 1 in classes:  # dent: the disk, a crowd as CVAT wrote it
                np.testing.assert_array_equal(masks[classes.index(1)], disk)
                assert list(example["groundtruth_is_crowd"]) == [c == 1 for c in classes]
                found += 1
    assert found == 2


def test_label_studios_ids_from_0_score_ap_1_against_themselves(tmp_path):
    """Label Studio numbers annotations from 0; COCOeval takes a matched gt id 0 for "matched
    nothing" (pycocotools cocoeval.py, evaluateImg/accumulate; faster-coco-eval the same), which
    scored perfect detections bbox AP 0.898. The val annotations are numbered from 1."""
    count = 8
    root, written = label_studio_export(tmp_path, count=count)
    assert min(a["id"] for a in written["annotations"]) == 0
    # A seed that puts image 0, and with it annotation 0, in val.
    seed = next(s for s in range(100) if 0 in exports.split_ids(list(range(count)), 0.5, s)[1])
    out = str(tmp_path / "channel")
    coco_to_tfrecord.convert_export(root, out, val_fraction=0.5, seed=seed, progress=False)
    val_file = layout.Channel(out).annotations(layout.VAL)
    val = json.load(open(val_file))
    coco_gt = COCO(val_file)
    detections = []
    for ann in val["annotations"]:
        rle = coco_gt.annToRLE(ann)
        detections.append({"image_id": ann["image_id"], "category_id": ann["category_id"],
                           "bbox": ann["bbox"], "score": 1.0,
                           "segmentation": {"size": rle["size"],
                                            "counts": rle["counts"].decode("ascii")}})
    coco_dt = coco_evaluation.load_results(coco_gt, detections)
    image_ids = [im["id"] for im in val["images"]]
    for evaluator in (e for e in coco_evaluation.EVALUATORS if coco_evaluation.installed(e)):
        for iou_type in coco_evaluation.IOU_TYPES:
            scored = coco_evaluation.run(coco_gt, coco_dt, iou_type, image_ids, evaluator,
                                         print_function=None)
            assert scored.stats[0] == pytest.approx(1.0), (evaluator, iou_type, scored.stats)
    assert [a["id"] for a in val["annotations"]] == list(range(1, len(val["annotations"]) + 1))
    assert 0 in [a["source_id"] for a in val["annotations"]]  # the export's own id, kept


@pytest.mark.parametrize("tool", [tool_exports.CVAT, tool_exports.LABEL_STUDIO])
def test_rectangles_are_refused_naming_both_choices_and_nothing_is_written(tmp_path, tool):
    if tool == tool_exports.CVAT:
        root, written = cvat_export(tmp_path, count=4, drawn="polygon", rectangles=True)
    else:
        root, written = label_studio_export(tmp_path, count=4, rectangles=True)
    # Both tools: a rectangle is a box with "segmentation": [] (Datumaro
    # _InstancesExporter.convert_instance; label_studio_sdk Converter.convert_to_coco).
    assert sum(a["segmentation"] == [] for a in written["annotations"]) == 4
    out = tmp_path / "channel"
    for skip_invalid in (False, True):  # never dropped as "invalid" either
        with pytest.raises(ConversionError) as refused:
            coco_to_tfrecord.convert_export(root, str(out), val_fraction=0.5,
                                            skip_invalid=skip_invalid, progress=False)
        message = str(refused.value)
        assert ": 4 annotation(s) are boxes without a mask" in message  # every split's
        assert "Mask R-CNN needs a mask per instance" in message
        assert "boxes_without_mask=leave_out (--boxes-without-mask leave_out)" in message
        assert "boxes_without_mask=box_as_mask (--boxes-without-mask box_as_mask)" in message
    assert not os.path.exists(layout.Channel(str(out)).info_file)
    assert not [name for _, _, names in os.walk(out) for name in names
                if name.endswith(".tfrecord")]


def test_rectangles_left_out_are_counted_and_named_and_out_of_the_val_annotations(tmp_path):
    root, written = label_studio_export(tmp_path, count=4, rectangles=True)
    boxes = {a["id"] for a in written["annotations"] if a["segmentation"] == []}
    out = str(tmp_path / "channel")
    results = coco_to_tfrecord.convert_export(
        root, out, val_fraction=0.5, progress=False, boxes_without_mask=labeling.LEAVE_OUT)
    assert sum(len(r.boxes_left_out) for r in results.values()) == 4
    info = _info(out)
    notes = [n for n in info.notes if "box(es) without a mask left out" in n]
    assert len(notes) == 2 and all("boxes_without_mask=leave_out" in n for n in notes), info.notes
    assert all("annotation " in n and "images/" in n for n in notes)
    listed = []
    for split in layout.SPLITS:
        with open(os.path.join(out, "tfrecords", layout.skipped_report_name(split))) as f:
            listed += [p["annotation_id"] for p in json.load(f)["boxes_without_mask_leave_out"]]
        for example in _records(out, split):
            assert len(example["groundtruth_classes"]) == 1  # the polygon alone
    assert sorted(listed) == sorted(boxes)
    val = json.load(open(layout.Channel(out).annotations(layout.VAL)))
    assert all(a["segmentation"] for a in val["annotations"])
    assert not boxes & {a["source_id"] for a in val["annotations"]}


def test_rectangles_as_masks_become_the_filled_box_in_the_records(tmp_path):
    root, _ = cvat_export(tmp_path, count=4, drawn="polygon", rectangles=True)
    out = str(tmp_path / "channel")
    results = coco_to_tfrecord.convert_export(
        root, out, val_fraction=0.5, progress=False, boxes_without_mask=labeling.BOX_AS_MASK)
    assert sum(r.boxes_as_masks for r in results.values()) == 4
    assert sum(r.num_instances for r in results.values()) == 8
    filled = box_mask(32, 24, (18, 12, 6, 5))
    for split in layout.SPLITS:
        for example in _records(out, split):
            masks = example["groundtruth_instance_masks"]
            assert len(masks) == 2
            np.testing.assert_array_equal(masks[1], filled)
    assert any("trained with the box filled as the mask (boxes_without_mask=box_as_mask)" in n
               for n in _info(out).notes)
    val = json.load(open(layout.Channel(out).annotations(layout.VAL)))
    assert [18, 12, 24, 12, 24, 17, 18, 17] in [s for a in val["annotations"]
                                                for s in a["segmentation"]]


def test_boxes_without_mask_reaches_the_converter_and_a_bad_value_is_refused_by_name(tmp_path,
                                                                                     capsys):
    from maskrcnn_job.staging import stage_dataset
    from maskrcnn_local import local_run

    root, _ = label_studio_export(tmp_path, count=2, rectangles=True)
    # The staging job's hyperparameter, as the toolkit passes it; its log prints the notes.
    stage_dataset.main(["--dataset", "parts", "--import_s3_uri", root, "--work_dir",
                        str(tmp_path / "work"), "--workers", "1", "--boxes_without_mask",
                        "leave_out"])
    assert "box(es) without a mask left out" in capsys.readouterr().out
    assert local_run.parse_args(["--dataset", root, "--boxes-without-mask", "box_as_mask"]) \
        .boxes_without_mask == labeling.BOX_AS_MASK
    for main in (lambda: coco_to_tfrecord.main([root, str(tmp_path / "out"),
                                                "--boxes-without-mask", "drop"]),
                 lambda: stage_dataset.main(["--dataset", "parts", "--import_s3_uri", root,
                                             "--boxes_without_mask", "drop"]),
                 lambda: local_run.parse_args(["--dataset", root,
                                               "--boxes-without-mask", "drop"])):
        with pytest.raises(SystemExit) as exited:
            main()
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert re.search(r"--boxes[-_]without[-_]mask: invalid choice: 'drop'", err), err
        assert all(choice in err for choice in labeling.BOXES_WITHOUT_MASK_CHOICES), err
    with pytest.raises(ConversionError,
                       match=r"boxes_without_mask='drop': expected one of refuse, leave_out, "
                             "box_as_mask"):
        coco_to_tfrecord.convert_export(root, str(tmp_path / "out"), progress=False,
                                        boxes_without_mask="drop")


def test_an_unknown_layout_is_refused_naming_what_was_found_and_what_is_expected(tmp_path):
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "labels.csv").write_text("a,b\n")
    with pytest.raises(ConversionError, match=r"found: labels\.csv.*CVAT's COCO 1\.0"):
        coco_to_tfrecord.convert_export(str(tmp_path / "export"), str(tmp_path / "out"),
                                        progress=False)
    root, _ = label_studio_export(tmp_path, count=4)
    with pytest.raises(ConversionError, match=r"val_fraction=1\.5: expected a number between"):
        coco_to_tfrecord.convert_export(root, str(tmp_path / "out"), val_fraction=1.5,
                                        progress=False)
