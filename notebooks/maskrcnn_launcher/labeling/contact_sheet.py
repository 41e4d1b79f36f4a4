"""The top of a ranking as one picture: the images most worth labeling next, in rank order, left to
right and down, each with its detections drawn (mask, box, '<class> <score>' as an endpoint's
answer is drawn: serving/detections.py, the palette of maskrcnn_contract/palette.py) and a
caption: its rank, score and the parts of the score (ranking.py), its file name.

    sheet = contact_sheet.draw(ranked, run, read_image, top=16)   # read_image(file_name) -> bytes
    contact_sheet.write(ranked, run, read_image, folder, top=16)  # <folder>/contact_sheet.jpg

Only Pillow (and pycocotools for the masks): the notebook instance has both.
"""

import io
import math
import os
from typing import Callable, Dict, List, Tuple

from maskrcnn_contract.palette import colour

from maskrcnn_launcher.labeling.predictions import Predictions, decoded
from maskrcnn_launcher.labeling.ranking import Ranking, Row
from maskrcnn_launcher.serving.detections import MASK_OPACITY, label

CONTACT_SHEET = "contact_sheet.jpg"
TILE = 256                 # a thumbnail's longer side and its cell's side, pixels
GAP = 8                    # between cells and around the sheet
CAPTION_LINES = 3          # rank and score; the parts; the file name
LINE = 13                  # a caption line's height: Pillow's default font (10 px) and its leading
CAPTION = CAPTION_LINES * LINE + 4
BACKGROUND = (32, 32, 32)
TEXT = (235, 235, 235)
JPEG_QUALITY = 90


def columns(n: int) -> int:
    """Tiles per row: a square-ish sheet."""
    return max(1, math.ceil(math.sqrt(n)))


def layout(n: int) -> List[Tuple[int, int, int, int]]:
    """The cell (left, top, right, bottom) of each of n thumbnails in rank order; each image is
    centred in its cell, its caption below it."""
    across = columns(n)
    return [(GAP + (k % across) * (TILE + GAP),
             GAP + (k // across) * (TILE + CAPTION + GAP),
             GAP + (k % across) * (TILE + GAP) + TILE,
             GAP + (k // across) * (TILE + CAPTION + GAP) + TILE) for k in range(n)]


def _tag(pen, x: float, y: float, text: str, rgb) -> None:
    """The label of a box as detections.draw writes it: black on the class's colour, above the
    box's top-left corner (inside it at the top edge)."""
    left, top, right, bottom = pen.textbbox((x, y), text)
    top_y = y - (bottom - top) - 2 if y - (bottom - top) - 2 >= 0 else y
    pen.rectangle([x, top_y, x + (right - left) + 4, top_y + (bottom - top) + 2], fill=rgb)
    pen.text((x + 2, top_y), text, fill=(0, 0, 0))


def thumbnail(image_bytes: bytes, image: Dict, detections: List[Dict], names: Dict[int, str]):
    """A PIL RGB picture whose longer side is TILE: the image with each detection's mask blended
    in its class's colour, its box and its label. Refuses an image whose size is not the one the
    predictions were made on (its masks would not lie on it)."""
    from PIL import Image, ImageDraw, ImageOps

    # Upright, as the model answers it (its EXIF orientation turned) and people see it.
    picture: Image.Image = ImageOps.exif_transpose(Image.open(io.BytesIO(image_bytes)))
    width, height = image["width"], image["height"]
    if picture.size != (width, height):
        raise ValueError(f"{image['file_name']}: the image read is {picture.size[0]} x "
                         f"{picture.size[1]} pixels, the predictions were made on {width} x "
                         f"{height}")
    scale = TILE / max(width, height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    picture.draft("RGB", size)  # a JPEG decodes at the nearest scale above: far less work
    picture = picture.convert("RGB").resize(size, Image.Resampling.BILINEAR).convert("RGBA")
    overlay = Image.new("RGBA", size, (0, 0, 0, 0))
    opacity = int(255 * MASK_OPACITY)
    for d in detections:
        if d.get("segmentation"):
            mask = Image.fromarray(decoded(d["segmentation"]) * 255).resize(
                size, Image.Resampling.BILINEAR)
            layer = Image.new("RGBA", size, colour(d["category_id"]) + (0,))
            layer.putalpha(mask.point(lambda v: opacity if v >= 128 else 0))
            # Composited, not pasted with itself as the mask: a paste would scale the colour
            # and the opacity by the opacity once more.
            overlay = Image.alpha_composite(overlay, layer)
    picture = Image.alpha_composite(picture, overlay)
    pen = ImageDraw.Draw(picture)
    for d in detections:
        x, y, w, h = (v * scale for v in d["bbox"])
        pen.rectangle([x, y, x + w, y + h], outline=colour(d["category_id"]), width=1)
        _tag(pen, x, y, label(d, names), colour(d["category_id"]))
    return picture.convert("RGB")


def _fit(pen, text: str, width: int) -> str:
    """The text, its start cut ('...' in front) until it fits in `width` pixels."""
    if pen.textlength(text) <= width:
        return text
    while text and pen.textlength("..." + text) > width:
        text = text[1:]
    return "..." + text


def caption(row: Row) -> List[str]:
    """The CAPTION_LINES lines under a thumbnail."""
    if row.category is None:
        parts = "no detection"
    else:
        disagreement = "-" if row.box_mask_disagreement is None \
            else f"{row.box_mask_disagreement:.2f}"
        parts = (f"{row.category} {row.detection_score:.2f}: H {row.entropy:.2f} "
                 f"D {disagreement} w {row.class_weight:.2f}")
    return [f"#{row.rank}  score {row.score:.3f}  ({row.detections} detected)", parts,
            row.file_name]


def draw(ranking: Ranking, predictions: Predictions, read_image: Callable[[str], bytes],
         top: int):
    """The contact sheet (a PIL RGB image) of the ranking's first `top` images (1 to the images
    ranked), read with `read_image(file_name)`, drawn with the run's detections."""
    from PIL import Image, ImageDraw

    rows = ranking.top(top)
    images = {image["id"]: image for image in predictions.images}
    for row in rows:
        if images.get(row.image_id, {}).get("file_name") != row.file_name:
            raise ValueError(f"rank {row.rank}: image {row.image_id} ({row.file_name}) is not "
                             f"in the predictions run of {predictions.source}: the ranking of "
                             "another run?")
    found, names = predictions.by_image(), predictions.category_names()
    cells = layout(len(rows))
    across = columns(len(rows))
    sheet = Image.new("RGB", (GAP + across * (TILE + GAP),
                              cells[-1][3] + CAPTION + GAP), BACKGROUND)
    pen = ImageDraw.Draw(sheet)
    for row, (left, top_y, _right, bottom) in zip(rows, cells):
        image = images[row.image_id]
        picture = thumbnail(read_image(row.file_name), image, found[row.image_id], names)
        sheet.paste(picture, (left + (TILE - picture.width) // 2,
                              top_y + (TILE - picture.height) // 2))
        for k, line in enumerate(caption(row)):
            pen.text((left, bottom + 2 + k * LINE), _fit(pen, line, TILE), fill=TEXT)
    return sheet


def write(ranking: Ranking, predictions: Predictions, read_image: Callable[[str], bytes],
          folder: str, top: int) -> str:
    """`draw`'s sheet as CONTACT_SHEET (JPEG) in `folder`; its path."""
    sheet = draw(ranking, predictions, read_image, top)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, CONTACT_SHEET)
    sheet.save(path, "JPEG", quality=JPEG_QUALITY)
    return path
