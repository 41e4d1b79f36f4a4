"""An endpoint's answer drawn on its image, and latency percentiles: for inference.ipynb.

The answer is the serving handler's JSON (training_code/maskrcnn_job/serving/endpoint_handler.py):
{"image_size": [h, w], "detections": [{"bbox": [x, y, w, h], "category_id": int,
"category_name": str (optional), "score": float, "mask": 28 x 28 probabilities over the box
(optional)}]}. Only Pillow is needed (the notebook instance has it); it is imported when drawing.
"""

import io
import math
from typing import Dict, List, Optional, Sequence

from maskrcnn_contract.palette import colour

MASK_THRESHOLD = 0.5
MASK_OPACITY = 0.45


def label(detection: Dict, names: Optional[Dict[int, str]] = None) -> str:
    name = detection.get("category_name") or (names or {}).get(detection["category_id"]) \
        or str(detection["category_id"])
    return f"{name} {detection['score']:.2f}" if "score" in detection else name


def _mask_image(mask: Sequence[Sequence[float]], size):
    """The box's mask probabilities as an 'L' image of the box's size, MASK_OPACITY where the
    probability is at least MASK_THRESHOLD, 0 elsewhere."""
    from PIL import Image

    rows = len(mask)
    cols = len(mask[0]) if rows else 0
    small = Image.new("L", (cols, rows))
    small.putdata([max(0, min(255, int(round(p * 255)))) for row in mask for p in row])
    alpha = int(255 * MASK_OPACITY)
    cut = int(255 * MASK_THRESHOLD)
    return small.resize(size, Image.Resampling.BILINEAR).point(lambda v: alpha if v >= cut else 0)


def draw(image_bytes: bytes, answer: Dict, names: Optional[Dict[int, str]] = None,
         min_score: float = 0.0):
    """A PIL RGB image: the encoded image with each detection's mask (blended over its box),
    box, and '<name> <score>'."""
    from PIL import Image, ImageDraw, ImageOps

    # Upright, as the model answers it (its EXIF orientation turned) and people see it.
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(image_bytes))).convert("RGBA")
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    shown = [d for d in answer.get("detections", []) if d.get("score", 1.0) >= min_score]
    for d in shown:
        x, y, w, h = d["bbox"]
        box = (int(math.floor(x)), int(math.floor(y)),
               max(1, int(math.ceil(w))), max(1, int(math.ceil(h))))
        if d.get("mask"):
            layer = Image.new("RGBA", box[2:], colour(d["category_id"]) + (0,))
            layer.putalpha(_mask_image(d["mask"], box[2:]))
            # Pasted as it is (clipped at the image's edges), then composited: pasting with the
            # layer as its own mask would multiply its alpha by itself.
            placed = Image.new("RGBA", image.size, (0, 0, 0, 0))
            placed.paste(layer, box[:2])
            overlay = Image.alpha_composite(overlay, placed)
    image = Image.alpha_composite(image, overlay)
    pen = ImageDraw.Draw(image)
    line = max(1, round(min(image.size) / 300))
    for d in shown:
        x, y, w, h = d["bbox"]
        rgb = colour(d["category_id"])
        pen.rectangle([x, y, x + w, y + h], outline=rgb, width=line)
        text = label(d, names)
        left, top, right, bottom = pen.textbbox((x, y), text)
        top_y = y - (bottom - top) - 2 if y - (bottom - top) - 2 >= 0 else y
        pen.rectangle([x, top_y, x + (right - left) + 4, top_y + (bottom - top) + 2], fill=rgb)
        pen.text((x + 2, top_y), text, fill=(0, 0, 0))
    return image.convert("RGB")


def summary_lines(answer: Dict, names: Optional[Dict[int, str]] = None) -> List[str]:
    """One line per detection: label and box."""
    return [f"{label(d, names):24} box x={d['bbox'][0]:.0f} y={d['bbox'][1]:.0f} "
            f"w={d['bbox'][2]:.0f} h={d['bbox'][3]:.0f}" for d in answer.get("detections", [])]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the two nearest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_report(seconds: Sequence[float]) -> Dict[str, Optional[float]]:
    """p50 and p90 in milliseconds, and the target invocations per instance per minute that
    keeps one instance about half busy at the median latency (DeployOptions.target_invocations)."""
    p50 = percentile(seconds, 50)
    return {"n": len(seconds), "p50_ms": round(p50 * 1000, 1),
            "p90_ms": round(percentile(seconds, 90) * 1000, 1),
            "suggested_target_invocations": round(0.5 * 60.0 / p50, 1) if p50 > 0 else None}
