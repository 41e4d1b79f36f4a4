"""Instances drawn on images with Pillow: semi-transparent masks, boxes, class names and scores.

Works on one list of instances for both sides of a comparison: predictions (with a score) and
ground truth (without). Each instance is {"bbox": [x, y, w, h], "category_id": int,
"score": float (optional), "mask": bool array [height, width] over the whole image (optional)}.
Small images are scaled up before drawing, so that labels stay readable.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from maskrcnn_contract.palette import colour

MASK_OPACITY = 0.45
MIN_DRAWN_SIDE = 384  # px: smaller images are scaled up by a whole factor


def _font(size: int):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: one bitmap size
        return ImageFont.load_default()


def scale_for(image: Image.Image) -> int:
    return max(1, -(-MIN_DRAWN_SIDE // min(image.size)))


def draw_instances(image: Image.Image, instances: Sequence[Dict], names: Dict[int, str],
                   title: Optional[str] = None) -> Image.Image:
    """A new RGB image: `image` scaled up to at least MIN_DRAWN_SIDE, masks blended at
    MASK_OPACITY, then each box with '<name> <score>' above it."""
    scale = scale_for(image)
    width, height = image.size
    canvas = image.convert("RGB").resize((width * scale, height * scale),
                                         Image.Resampling.BICUBIC)
    overlay = np.zeros((height * scale, width * scale, 4), np.uint8)
    for instance in instances:
        mask = instance.get("mask")
        if mask is None:
            continue
        big = np.repeat(np.repeat(np.asarray(mask, bool), scale, axis=0), scale, axis=1)
        overlay[big] = (*colour(instance["category_id"]), int(255 * MASK_OPACITY))
    canvas = Image.alpha_composite(canvas.convert("RGBA"), Image.fromarray(overlay, "RGBA"))
    draw = ImageDraw.Draw(canvas)
    font = _font(max(10, 4 * scale + 2))
    for instance in instances:
        x, y, w, h = (v * scale for v in instance["bbox"])
        rgb = colour(instance["category_id"])
        draw.rectangle([x, y, x + w, y + h], outline=rgb, width=max(1, scale // 2 + 1))
        label = names.get(instance["category_id"], str(instance["category_id"]))
        if "score" in instance:
            label += f" {instance['score']:.2f}"
        left, top, right, bottom = draw.textbbox((x, y), label, font=font)
        top_of_label = max(0, y - (bottom - top) - 2)
        draw.rectangle([x, top_of_label, x + (right - left) + 4, top_of_label + (bottom - top) + 2],
                       fill=rgb)
        draw.text((x + 2, top_of_label), label, fill=(0, 0, 0), font=font)
    if title:
        draw.text((4, canvas.height - 4 * scale - 14), title, fill=(255, 255, 255),
                  font=font, stroke_width=2, stroke_fill=(0, 0, 0))
    return canvas.convert("RGB")


def grid(rows: List[Tuple[Image.Image, Image.Image]], gap: int = 8) -> Image.Image:
    """Pairs (left, right) stacked top to bottom, on a dark background."""
    width = max(a.width + b.width for a, b in rows) + 3 * gap
    height = sum(max(a.height, b.height) for a, b in rows) + (len(rows) + 1) * gap
    sheet = Image.new("RGB", (width, height), (32, 32, 32))
    y = gap
    for left, right in rows:
        sheet.paste(left, (gap, y))
        sheet.paste(right, (2 * gap + left.width, y))
        y += max(left.height, right.height) + gap
    return sheet
