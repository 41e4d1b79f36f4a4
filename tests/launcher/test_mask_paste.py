"""predictions.mask_of, the 28 x 28 mask of a detection pasted into its image, against answers
that do not come from it: masks and boxes whose pixels are written out by hand (the mask's cells
spread evenly over the box, as ROIAlign sampled them; a pixel belongs where its centre lies), and
Model Garden's own paste (official.vision.ops.mask_ops.paste_instance_masks_v2) on random masks
and boxes. Not its paste_instance_masks, which its COCO evaluator and maskrcnn_local/predict.py
use: Detectron's legacy paste, whose box is a pixel wider than COCO's (a mask of ones in the box
x 10 to 38, y 20 to 34 covers columns 10 to 38, 29 of them, and rows 20 to 33) and which misses
a pixel of a box that is the whole image."""

import json
import subprocess
import sys

import numpy as np
import pytest

from maskrcnn_launcher.labeling import predictions

from tests import build_cache

ONES = [[1.0] * 28 for _ in range(28)]
HEIGHT, WIDTH = 40, 64  # a non-square image


def _pasted(mask, bbox, height=HEIGHT, width=WIDTH):
    return predictions.mask_of({"mask": mask, "bbox": bbox}, height, width)


def _rectangle(columns, rows, height=HEIGHT, width=WIDTH):
    """The expected mask: ones on the pixels columns[0]..columns[1], rows[0]..rows[1]
    (inclusive)."""
    expected = np.zeros((height, width), dtype=np.uint8)
    expected[rows[0]:rows[1] + 1, columns[0]:columns[1] + 1] = 1
    return expected


@pytest.mark.parametrize("bbox, columns, rows", [
    # Whole pixels: the box's own pixels.
    ([10, 20, 28, 14], (10, 37), (20, 33)),
    # A box off the pixel grid: the pixels whose centres (x + 0.5) it holds. 10.6 to 38.6 holds
    # the centres 11.5 to 38.5; 20.3 to 34.3 holds 20.5 to 33.5.
    ([10.6, 20.3, 28, 14], (11, 38), (20, 33)),
    # 0.4 pixel short of the next centre on each side: one pixel fewer than the rounding out of
    # the corner and the size would give (19.9 to 30.1 holds 20.5 to 29.5).
    ([19.9, 5.9, 10.2, 10.2], (20, 29), (6, 15)),
    # Smaller than the mask (28 cells over 5.1 x 3.3 pixels): 3.2 to 8.3 holds 3.5 to 7.5,
    # 4.7 to 8.0 holds 5.5 to 7.5.
    ([3.2, 4.7, 5.1, 3.3], (3, 7), (5, 7)),
    # Out over the image's left and bottom edges: what lies inside it.
    ([-5.2, 30.4, 20, 20], (0, 14), (30, 39)),
    # Taller than wide, and the whole image.
    ([50.25, 0.75, 4.5, 38.5], (50, 54), (1, 38)),
    ([0, 0, WIDTH, HEIGHT], (0, WIDTH - 1), (0, HEIGHT - 1)),
])
def test_a_mask_of_ones_covers_exactly_the_pixels_whose_centres_its_box_holds(bbox, columns,
                                                                              rows):
    np.testing.assert_array_equal(_pasted(ONES, bbox), _rectangle(columns, rows))


def test_a_box_outside_the_image_or_without_area_pastes_nothing():
    for bbox in ([WIDTH + 1, 5, 10, 10], [-20, 5, 10.4, 10], [5, 5, 0, 10]):
        assert _pasted(ONES, bbox).sum() == 0, bbox


def test_a_half_mask_covers_half_its_box_and_cells_land_where_they_were_sampled():
    """At 2 pixels per cell (a box of 56 x 56 on a 72 x 64 image), cell k's centre is 2k + 1
    from the box's corner: the left 14 columns of ones cover the box's left 28 pixels; one cell
    alone (its neighbours 0) covers the pixels whose centres lie within half a pixel of its
    centre on both axes (there bilinearly (1 - 0.25) ** 2 = 0.5625; 1.5 away, 0.25)."""
    half = [[1.0 if c < 14 else 0.0 for c in range(28)] for _ in range(28)]
    np.testing.assert_array_equal(_pasted(half, [4, 6, 56, 56], 64, 72),
                                  _rectangle((4, 31), (6, 61), 64, 72))
    # Cell (row 10, column 20): its centre at (4 + 41, 6 + 21) = (45, 27).
    one = [[1.0 if (r, c) == (10, 20) else 0.0 for c in range(28)] for r in range(28)]
    np.testing.assert_array_equal(_pasted(one, [4, 6, 56, 56], 64, 72),
                                  _rectangle((44, 45), (26, 27), 64, 72))


# Model Garden's paste of each case, at the mask as given and shifted by +-SHIFT: OpenCV's
# warpPerspective samples on a 1/32-pixel grid, so a pixel whose value is within about 0.015 of
# the threshold may fall either way there (measured: at most 0.0141 over 300 random cases).
SHIFT = 0.05
MODEL_GARDEN_PASTE = r"""
import json, sys
import numpy as np
from official.vision.ops import mask_ops
cases, shift = json.load(open(sys.argv[1])), float(sys.argv[2])
out = []
for case in cases:
    mask, box = np.asarray(case["mask"], np.float32), np.asarray([case["bbox"]], np.float64)
    out.append([mask_ops.paste_instance_masks_v2((mask + s)[None], box, case["height"],
                                                 case["width"])[0].astype(int).tolist()
                for s in (shift, 0.0, -shift)])
json.dump(out, open(sys.argv[1] + ".out", "w"))
"""


def _random_cases(count, seed=7):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        height, width = int(rng.integers(10, 90)), int(rng.integers(10, 90))
        w, h = rng.uniform(1.5, width * 0.9), rng.uniform(1.5, height * 0.9)
        x, y = rng.uniform(-w / 2, width - w / 2), rng.uniform(-h / 2, height - h / 2)
        cases.append({"mask": rng.random((28, 28)).round(4).tolist(),
                      "bbox": [float(x), float(y), float(w), float(h)],
                      "height": height, "width": width})
    return cases


# What Model Garden's paste of the cases is made from, beside the cases and the script: its
# answers are kept in the tests' build cache (tests/build_cache.py) while these are unchanged.
MODEL_GARDEN_PACKAGES = ("tf-models-official", "tensorflow", "tf_keras", "opencv-python",
                         "opencv-python-headless", "numpy")


def _model_garden_pasted(cases) -> list:
    """Model Garden's paste of each case at the mask raised by SHIFT, as given and lowered by
    SHIFT, in a process of its own (it imports TensorFlow, ~8 s of CPU; the launcher does not):
    run once for these cases and this Model Garden, then read from the build cache."""
    digest = build_cache.key((), MODEL_GARDEN_PACKAGES, MODEL_GARDEN_PASTE, cases, SHIFT)
    with build_cache.entry("model-garden-paste", digest) as directory:
        pasted = directory / "pasted.json"
        if not pasted.is_file():
            spec = directory / "cases.json"
            spec.write_text(json.dumps(cases))
            done = subprocess.run([sys.executable, "-c", MODEL_GARDEN_PASTE, str(spec),
                                   str(SHIFT)], capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-3000:]
            (directory / "cases.json.out").rename(pasted)
        return json.loads(pasted.read_text())


def test_random_masks_and_boxes_are_pasted_as_model_garden_pastes_them():
    cases = _random_cases(120)
    pasted = _model_garden_pasted(cases)
    differing = union = 0
    for case, (more, same, less) in zip(cases, pasted, strict=True):
        ours = _pasted(case["mask"], case["bbox"], case["height"], case["width"]).astype(bool)
        more, same, less = (np.asarray(m, dtype=bool) for m in (more, same, less))
        # Every pixel Model Garden keeps at the mask lowered by SHIFT, ours keeps; every pixel
        # ours keeps, Model Garden keeps at the mask raised by SHIFT.
        assert not (less & ~ours).any() and not (ours & ~more).any(), case["bbox"]
        differing += int((ours != same).sum())
        union += int((ours | same).sum())
    assert union > 10000
    assert differing <= 0.03 * union, (differing, union)  # only pixels at a mask's contour
