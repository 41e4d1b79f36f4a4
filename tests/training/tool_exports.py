"""Exports as the labeling tools' own code writes them: CVAT's COCO 1.0 (Datumaro's
`coco_instances` exporter) and Label Studio's "COCO with Images" (label_studio_sdk's
Converter.convert_to_coco), written by tests/training/labeling_tools.py in .venv-labeling
(`make setup`; tests/training/labeling-requirements.txt pins both); and a sample task's
exports (`cvat_export`, `label_studio_export`: a red box per image) that the export, staging and
local dataset tests read."""

import json
import os
import subprocess

import numpy as np
from PIL import ExifTags, Image, ImageOps

from tests.paths import REPO

LABELING_PYTHON = os.path.join(REPO, ".venv-labeling", "bin", "python")
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "labeling_tools.py")
CVAT, LABEL_STUDIO = "cvat", "label-studio"


def item(name, image, width, height, shapes, subset=None):
    """One image of the task: `name` as the tool knows it, `image` the file it was uploaded
    from, `shapes` [{"type": "rectangle", "label", "box": [x, y, w, h]}, {"type": "polygon",
    "label", "points": [...]}, {"type": "mask", "label", "mask": PNG path}]."""
    found = {"name": name, "image": str(image), "width": width, "height": height,
             "shapes": shapes}
    if subset:
        found["subset"] = subset
    return found


def write(tool, out, labels, items, project=3):
    """Writes the export of `items` with `tool`'s exporter into `out` (Label Studio's media and
    task list go beside it, in <out>-server/, as on its server); returns (out, its annotations
    as written)."""
    if not os.path.isfile(LABELING_PYTHON):
        raise AssertionError(f"{LABELING_PYTHON} is missing: run `make setup` (the labeling "
                             "tools' exporters, tests/training/labeling-requirements.txt)")
    out = str(out)
    spec = {"tool": tool, "out": out, "labels": list(labels), "items": items,
            "workdir": out + "-server", "project": project}
    spec_file = out + "-spec.json"
    with open(spec_file, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    done = subprocess.run([LABELING_PYTHON, SCRIPT, spec_file], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    if tool == CVAT:
        subsets = sorted({i.get("subset", "default") for i in items})
        annotation_files = [os.path.join(out, "annotations", f"instances_{s}.json")
                            for s in subsets]
    else:
        annotation_files = [os.path.join(out, "result.json")]
    written = {}
    for path in annotation_files:
        with open(path, encoding="utf-8") as f:
            written[os.path.relpath(path, out)] = json.load(f)
    return out, (next(iter(written.values())) if len(written) == 1 else written)


# --- a sample task: one red box per image, exported by each tool -----------------------------

LABELS = ["dent", "scratch", "rust", "crack"]  # crack: no annotation
USED = ("scratch", "rust", "dent")
RED = (255, 0, 0)


def red_box_image(path, width, height, box, exif_orientation=None):
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
    exif[ExifTags.Base.Orientation] = exif_orientation
    stored.save(path, quality=98, exif=exif.tobytes())
    with Image.open(path) as check:  # what the labeling tools display
        assert ImageOps.exif_transpose(check).size == (width, height)


def box_polygon(box):
    x, y, w, h = box
    return [x, y, x + w, y, x + w, y + h, x, y + h]


def mask_png(path, width, height, mask):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(mask.astype(np.uint8) * 255).save(path)
    return str(path)


def box_mask(width, height, box):
    mask = np.zeros((height, width), dtype=np.uint8)
    x, y, w, h = box
    mask[y:y + h, x:x + w] = 1
    return mask


def red_box_items(uploads, names, drawn, rotated=(), empty=(), size=(32, 24), rectangles=False):
    """One red box per image, its label cycling through USED, drawn as `drawn` ("polygon" or
    "mask"; with `rectangles`, a second box of the same label drawn with the rectangle tool).
    The images are written below `uploads`, the files the user gave the tool."""
    width, height = size
    items = []
    for index, name in enumerate(names, start=1):
        box = (4 + index % 5, 3 + index % 4, 10, 8)
        path = os.path.join(str(uploads), name)
        red_box_image(path, width, height, box, 6 if name in rotated else None)
        label = USED[index % len(USED)]
        shapes = []
        if name not in empty:
            if drawn == "polygon":
                shapes.append({"type": "polygon", "label": label, "points": box_polygon(box)})
            else:
                mask = mask_png(os.path.join(str(uploads) + "-masks", name + ".png"), width,
                                height, box_mask(width, height, box))
                shapes.append({"type": "mask", "label": label, "mask": mask})
            if rectangles:
                shapes.append({"type": "rectangle", "label": label, "box": [18, 12, 6, 5]})
        items.append(item(name, path, width, height, shapes))
    return items


def cvat_export(tmp_path, count=6, rotated=(), drawn="mask", rectangles=False):
    """CVAT's COCO 1.0 of a task whose files are in a subfolder: annotations/instances_default.json
    and images/default/batch1/..., every mask a crowd RLE (cvat-ai/cvat#7030)."""
    names = [f"batch1/img{i}.jpg" for i in range(count)]
    items = red_box_items(tmp_path / "cvat-uploads", names, drawn, rotated=rotated,
                          rectangles=rectangles)
    return write(CVAT, tmp_path / "cvat", LABELS, items)


def label_studio_export(tmp_path, count=10, empty=(), rectangles=False, rotated=()):
    """Label Studio's COCO with images: result.json + images/, polygons; ids from 0, file names
    the uploads' paths relative to where the export was written (../<media>/upload/3/...).
    `rotated`: names of images stored on their side with EXIF orientation 6."""
    names = [f"{i:02d}-part.jpg" for i in range(count)]
    items = red_box_items(tmp_path / "ls-uploads", names, "polygon", empty=empty,
                          rectangles=rectangles, rotated=rotated)
    return write(LABEL_STUDIO, tmp_path / "label-studio", LABELS, items)
