"""Real-shaped images with one easy shape each, and the oracles that hold a model's answers on them
to their ground truth: IoU computed by pycocotools (and a mask pasted by Model Garden), not by
our code. The shared trained model (tests/trained_runs.py, "shapes") detects these shapes; the
tests that prove a coordinate mapping (image pixels <-> the model's resized, padded input) ask
its top detection on each image to lie on the object."""

import os

# The bound each mapping is held to, the (45): a mapping made the identity or with its axes
# swapped puts the top detection off its object (box IoU 0.02, 0, 0, 0 for boxes left in the
# resized image's pixels; measured 0.58-0.93 mapped right on one-shape images, 2026-12-07).
MIN_IOU = 0.5


def make(directory, count: int, size: int):
    """`count` images of the easy synthetic set, landscape and portrait (16:9, 4:3 and their
    transposes) two to four times the model's input size, half of them JPEGs stored a quarter
    turn away with the EXIF orientation that turns them upright (6 and 8, a phone's), one shape
    each, with their ground truth in the upright images' own pixels: [(path, [COCO
    annotation])]. The model sees each turned upright, resized to its input and padded; the
    answers must come back in the upright image's pixels. One object, so that the top detection
    has one ground truth to lie on: with several, the smallest shapes (10 px at 64) are boxed
    less tightly (the shared model's top box: IoU 0.47-0.57 on one such image over two
    trainings; 0.58-0.90 on one-shape images, 2026-12-07)."""
    from PIL import ExifTags, Image

    from maskrcnn_local import synthetic_coco

    layout = synthetic_coco.RealLayout(long_side=(2.0, 4.0), aspects=((16, 9), (9, 16), (4, 3),
                                                                     (3, 4)),
                                       gray_fraction=0, png_fraction=0, exif_fraction=0.5,
                                       exif_orientations=(6, 8))
    splits = synthetic_coco.generate(str(directory), num_train=1, num_val=count, image_size=size,
                                     difficulty="easy", seed=45, max_shapes=1, real=layout)
    val = splits["val"]
    assert {im["width"] > im["height"] for im in val["images"]} == {True, False}, val["images"]
    assert min(min(im["width"], im["height"]) for im in val["images"]) > size
    turned = {Image.open(os.path.join(str(directory), "val2017", im["file_name"])).getexif()
              .get(ExifTags.Base.Orientation, 1) for im in val["images"]}
    assert turned == {1, 6, 8}, turned
    return [(os.path.join(str(directory), "val2017", image["file_name"]),
             [a for a in val["annotations"] if a["image_id"] == image["id"]])
            for image in val["images"]]


def upright_size(path: str):
    """(width, height) of the image as people see it, after its EXIF orientation (Pillow)."""
    from PIL import Image, ImageOps

    return ImageOps.exif_transpose(Image.open(path)).size


def box_iou(box, truth) -> float:
    """IoU of two [x, y, w, h] boxes by pycocotools (not our code)."""
    from pycocotools import mask as mask_utils

    return float(mask_utils.iou([box], [truth], [0])[0][0])


def truth_rle(truth, height: int, width: int):
    """The ground truth's polygon rasterized by pycocotools."""
    from pycocotools import mask as mask_utils

    return mask_utils.merge(mask_utils.frPyObjects(truth["segmentation"], height, width))


def rle_iou(segmentation, truth, height: int, width: int) -> float:
    """IoU of a COCO result's segmentation (RLE, counts as text or bytes, or polygons) with the
    ground truth's polygon, by pycocotools."""
    from pycocotools import mask as mask_utils

    if isinstance(segmentation, list):  # polygons, in pixels
        predicted = mask_utils.merge(mask_utils.frPyObjects(segmentation, height, width))
    else:
        predicted = dict(segmentation)
        if isinstance(predicted["counts"], str):
            predicted["counts"] = predicted["counts"].encode("ascii")
        assert list(predicted["size"]) == [height, width], (predicted["size"], height, width)
    return float(mask_utils.iou([predicted], [truth_rle(truth, height, width)], [0])[0][0])


def mask_iou(mask, truth) -> float:
    """IoU of a boolean image-sized mask with the ground truth's polygon, by pycocotools."""
    import numpy as np
    from pycocotools import mask as mask_utils

    height, width = mask.shape
    predicted = mask_utils.encode(np.asfortranarray(np.asarray(mask, np.uint8)))
    return float(mask_utils.iou([predicted], [truth_rle(truth, height, width)], [0])[0][0])


def pasted_mask_iou(detection, truth, height: int, width: int) -> float:
    """IoU of a detection's 28x28 mask pasted at the image's full resolution by Model Garden's
    paste (its COCO evaluator's) with the ground truth's polygon, by pycocotools (not our code)."""
    import numpy as np
    from official.vision.ops import mask_ops

    pasted = mask_ops.paste_instance_masks(np.array([detection["mask"]], np.float32),
                                           np.array([detection["bbox"]], np.float32),
                                           height, width)[0]
    return mask_iou(pasted, truth)
