"""Which images to label next (labeling/ranking.py) and their contact sheet (labeling/
contact_sheet.py), on predictions runs built from real masks: each constructed pair of images is
ordered as the measure says, the files parse, the sheet shows the top N in rank order."""

import csv
import io
import json

import numpy as np
import pytest
from maskrcnn_contract import evaluation_report
from maskrcnn_contract.palette import colour
from maskrcnn_launcher.labeling import contact_sheet, ranking
from maskrcnn_launcher.labeling.predictions import Predictions, rle
from maskrcnn_launcher.serving.detections import MASK_OPACITY
from PIL import Image

# The dataset's own ids (the handler's source ids), not the model's 1..K.
CIRCLE, SQUARE = 7, 9
CATEGORIES = [{"id": CIRCLE, "name": "circle"}, {"id": SQUARE, "name": "square"}]


def _detection(image, score, box, mask_box=None, category=CIRCLE):
    """A result on `image` whose mask is the whole pixels of `mask_box` [x, y, w, h] (default: its
    box; () for an empty mask)."""
    mask = np.zeros((image["height"], image["width"]), dtype=np.uint8)
    x, y, w, h = box if mask_box is None else (mask_box or (0, 0, 0, 0))
    mask[y:y + h, x:x + w] = 1
    return {"image_id": image["id"], "category_id": category, "bbox": list(box), "score": score,
            "segmentation": rle(mask),
            "category_name": {c["id"]: c["name"] for c in CATEGORIES}[category]}


def _run(*images_detections, size=(40, 40)):
    """A predictions run of images named a.png, b.png, ... each with the detections the
    function given for it returns (called with the image)."""
    images, results = [], []
    for k, detections_of in enumerate(images_detections):
        image = {"id": k + 1, "file_name": f"{chr(ord('a') + k)}.png", "height": size[0],
                 "width": size[1]}
        images.append(image)
        results += detections_of(image)
    return Predictions(images=images, categories=CATEGORIES, results=results,
                       model="maskrcnn-test-job", source="s3://bucket/samples/",
                       score_threshold=0.3)


def _report(ap_circle, ap_square):
    """The part of a report.json the ranking reads: renumbered classes 1, 2 whose source ids are
    the dataset's."""
    per_class = [{"AP": ap_circle}, {"AP": ap_square}]
    return {"schema": evaluation_report.SCHEMA,
            "categories": [{"id": 1, "source_id": CIRCLE, "name": "circle"},
                           {"id": 2, "source_id": SQUARE, "name": "square"}],
            "tasks": {"segm": {"per_class": per_class},
                      "bbox": {"per_class": [{"AP": 0.9}, {"AP": 0.9}]}}}


def _order(ranked):
    return [row.file_name for row in ranked.rows]


BOX = (10, 10, 20, 20)


def test_the_parts_are_the_documented_numbers():
    """score 0.8: H = 0.7219; a mask on the box's left half: D = 1 - 200/400; mask AP 0.25:
    w = 0.75; u = w * max(H, D)."""
    run = _run(lambda im: [_detection(im, 0.8, BOX, (10, 10, 10, 20))])
    row = ranking.rank(run, _report(0.25, 0.5)).rows[0]
    assert (row.entropy, row.box_mask_disagreement, row.class_weight) == (0.7219, 0.5, 0.75)
    assert row.score == round(0.75 * 0.7219281, 4) == row.uncertainty_sum
    assert (row.category, row.detection_score, row.detections) == ("circle", 0.8, 1)
    assert (row.weakest_class, row.weakest_class_ap) == ("circle", 0.25)
    assert ranking.entropy(0.5) == 1.0 and ranking.entropy(1.0) == 0.0
    assert ranking.rank(run).weights is None and ranking.rank(run, _report(0, 0)).weights == \
        "segm AP"


def test_a_detection_near_the_decision_boundary_ranks_above_a_confident_one():
    run = _run(lambda im: [_detection(im, 0.97, BOX)], lambda im: [_detection(im, 0.55, BOX)])
    ranked = ranking.rank(run)
    assert _order(ranked) == ["b.png", "a.png"]
    assert ranked.rows[0].entropy > 0.99 > 0.2 > ranked.rows[1].entropy


def test_a_weak_class_ranks_above_a_strong_one_when_a_report_is_given():
    run = _run(lambda im: [_detection(im, 0.6, BOX, category=CIRCLE)],
               lambda im: [_detection(im, 0.6, BOX, category=SQUARE)])
    assert _order(ranking.rank(run)) == ["a.png", "b.png"]  # a tie: by file name
    ranked = ranking.rank(run, _report(ap_circle=0.8, ap_square=0.2))
    assert _order(ranked) == ["b.png", "a.png"]
    assert [(r.weakest_class, r.weakest_class_ap, r.class_weight) for r in ranked.rows] == \
        [("square", 0.2, 0.8), ("circle", 0.8, 0.2)]


def test_a_class_the_report_never_measured_weighs_fully():
    """A class without ground truth in the evaluation has no AP: w = 1, above any measured one."""
    run = _run(lambda im: [_detection(im, 0.6, BOX, category=CIRCLE)],
               lambda im: [_detection(im, 0.6, BOX, category=SQUARE)])
    ranked = ranking.rank(run, _report(ap_circle=0.0, ap_square=None))
    assert [(r.file_name, r.class_weight, r.weakest_class_ap) for r in ranked.rows] == \
        [("a.png", 1.0, 0.0), ("b.png", 1.0, None)]  # both w = 1: by file name


def test_a_mask_that_disagrees_with_its_box_ranks_above_one_that_agrees():
    run = _run(lambda im: [_detection(im, 0.95, BOX)],
               lambda im: [_detection(im, 0.95, BOX, (10, 10, 10, 10))],
               lambda im: [_detection(im, 0.95, BOX, ())])
    ranked = ranking.rank(run)
    assert _order(ranked) == ["c.png", "b.png", "a.png"]
    assert [r.box_mask_disagreement for r in ranked.rows] == [1.0, 0.75, 0.0]
    assert ranked.rows[2].score == ranked.rows[2].entropy == 0.2864  # H decides when D is 0


def test_an_image_without_detections_ranks_after_every_image_with_one():
    run = _run(lambda im: [], lambda im: [_detection(im, 0.999, BOX)])
    ranked = ranking.rank(run)
    assert _order(ranked) == ["b.png", "a.png"]
    empty = ranked.rows[1]
    assert (empty.score, empty.detections, empty.entropy, empty.category) == (0.0, 0, None, None)


def test_between_equal_scores_more_doubtful_detections_rank_first():
    run = _run(lambda im: [_detection(im, 0.6, BOX)],
               lambda im: [_detection(im, 0.6, BOX), _detection(im, 0.6, (25, 25, 10, 10))])
    ranked = ranking.rank(run)
    assert _order(ranked) == ["b.png", "a.png"]
    assert ranked.rows[0].score == ranked.rows[1].score
    assert ranked.rows[0].uncertainty_sum == pytest.approx(2 * ranked.rows[1].uncertainty_sum,
                                                          abs=1e-4)


def test_bad_input_is_refused_by_name():
    run = _run(lambda im: [_detection(im, 0.6, BOX, category=SQUARE)])
    report = _report(0.5, 0.5)
    report["categories"][1]["source_id"] = 4
    with pytest.raises(ValueError, match=r"no class 'square' \(id 9\); its classes: square \(4\), "
                                         r"circle \(7\)"):
        ranking.rank(run, report)
    report = _report(0.5, 0.5)
    report["categories"][1]["name"] = "cube"
    with pytest.raises(ValueError, match="class id 9 is 'square' in the predictions but 'cube'"):
        ranking.rank(run, report)
    with pytest.raises(ValueError, match="schema 'other/1'"):
        ranking.rank(run, dict(_report(0.5, 0.5), schema="other/1"))
    with pytest.raises(ValueError, match=r"segm AP of 'square' is 1.5, not in \[0, 1\]"):
        ranking.rank(run, _report(0.5, 1.5))
    run.results[0]["segmentation"]["size"] = [40, 30]
    with pytest.raises(ValueError, match="a.png: a detection's mask is 40 x 30, the image 40 x 40"):
        ranking.rank(run)
    run.results[0]["category_id"] = 3
    with pytest.raises(ValueError, match=r"category_id 3; the run's categories: \[7, 9\]"):
        ranking.rank(run)
    ranked = ranking.rank(_run(lambda im: [], lambda im: []))
    for n in (0, 3, 1.0, True):
        with pytest.raises(ValueError, match=f"top {n!r}: must be a whole number from 1 to 2"):
            ranked.top(n)


def test_the_ranking_files_parse_in_rank_order(tmp_path):
    run = _run(lambda im: [], lambda im: [_detection(im, 0.9, BOX, (10, 10, 5, 5))],
               lambda im: [_detection(im, 0.5, BOX, category=SQUARE)])
    ranked = ranking.rank(run, _report(0.4, 0.3))
    paths = ranking.write(ranked, str(tmp_path / "ranking"))
    assert [p.rsplit("/", 1)[1] for p in paths] == [ranking.RANKING_JSON, ranking.RANKING_CSV]
    content = json.loads(open(paths[0], encoding="utf-8").read())
    assert (content["schema"], content["weights"], content["score_threshold"]) == \
        (ranking.SCHEMA, "segm AP", 0.3)
    assert [row["file_name"] for row in content["images"]] == ["c.png", "b.png", "a.png"]
    with open(paths[1], encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == list(ranking.COLUMNS)
    assert [(row["rank"], row["file_name"], row["category"], row["box_mask_disagreement"])
            for row in table] == [("1", "c.png", "square", "0.0"), ("2", "b.png", "circle",
                                                                     "0.9375"),
                                  ("3", "a.png", "", "")]
    assert [float(row["score"]) for row in table] == [row.score for row in ranked.rows]
    assert ranking.read(str(tmp_path / "ranking")) == ranked


def _png(rgb, size) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, rgb).save(out, "PNG")
    return out.getvalue()


def _near(pixel, expected, tolerance=12):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, expected))


COLOURS = [(200, 30, 30), (30, 160, 40), (40, 60, 200), (220, 200, 40), (160, 40, 160)]


def test_the_contact_sheet_shows_the_top_n_in_rank_order_with_their_masks(tmp_path):
    """Five solid images (landscape 80 x 60), one detection each over the quarter at the top left,
    scores 0.9 to 0.5: the top 4 are e, d, c, b, read in that order, drawn left to right and down in
    a 2 x 2 grid; the image's own colour at each cell's centre, the mask's blend inside the
    mask."""
    width, height = 80, 60
    quarter = (8, 6, 24, 18)
    run = _run(*(lambda im, s=score: [_detection(im, s, quarter)]
                 for score in (0.9, 0.8, 0.7, 0.6, 0.5)), size=(height, width))
    ranked = ranking.rank(run)
    assert _order(ranked) == ["e.png", "d.png", "c.png", "b.png", "a.png"]
    pictures = {f"{chr(ord('a') + k)}.png": _png(rgb, (width, height))
                for k, rgb in enumerate(COLOURS)}
    read = []

    def read_image(file_name):
        read.append(file_name)
        return pictures[file_name]

    path = contact_sheet.write(ranked, run, read_image, str(tmp_path), top=4)
    assert read == ["e.png", "d.png", "c.png", "b.png"]
    sheet = Image.open(path)
    assert sheet.format == "JPEG"
    cells = contact_sheet.layout(4)
    assert sheet.size == (cells[1][2] + contact_sheet.GAP,
                          cells[3][3] + contact_sheet.CAPTION + contact_sheet.GAP)
    assert cells[0][1] == cells[1][1] < cells[2][1] == cells[3][1]  # two rows of two
    scale = contact_sheet.TILE / width
    alpha = int(255 * MASK_OPACITY) / 255
    for (left, top, right, bottom), name in zip(cells, ["e.png", "d.png", "c.png", "b.png"]):
        rgb = COLOURS[ord(name[0]) - ord("a")]
        image_top = top + (contact_sheet.TILE - round(height * scale)) // 2
        assert _near(sheet.getpixel(((left + right) // 2, image_top + round(40 * scale))), rgb), \
            name
        blend = tuple(round(c * (1 - alpha) + p * alpha) for c, p in zip(rgb, colour(CIRCLE)))
        inside_mask = (left + round(20 * scale), image_top + round(15 * scale))
        assert _near(sheet.getpixel(inside_mask), blend), name
    assert contact_sheet.caption(ranked.rows[0]) == [
        "#1  score 1.000  (1 detected)", "circle 0.50: H 1.00 D 0.00 w 1.00", "e.png"]


def test_the_contact_sheet_refuses_an_image_of_another_size():
    run = _run(lambda im: [_detection(im, 0.6, BOX)])
    with pytest.raises(ValueError, match="a.png: the image read is 30 x 40 pixels, the "
                                         "predictions were made on 40 x 40"):
        contact_sheet.draw(ranking.rank(run), run, lambda _: _png((0, 0, 0), (30, 40)), top=1)
