"""A small synthetic COCO-format dataset: shapes with instance masks, written like COCO 2017.

Real JPEG files and real COCO JSON (polygon segmentations), so the whole path JSON -> TFRecord ->
decoder -> model -> COCO evaluation runs locally. Layout, as COCO's:
  <out>/train2017/*.jpg  <out>/val2017/*.jpg
  <out>/annotations/instances_train2017.json  <out>/annotations/instances_val2017.json
Seeded: the same arguments give byte-identical files.
"""

import argparse
import json
import math
import os
from typing import Dict, List, Tuple

import numpy as np
from PIL import Image, ImageDraw

CATEGORIES = [
    {"id": 1, "name": "circle", "supercategory": "shape"},
    {"id": 2, "name": "square", "supercategory": "shape"},
    {"id": 3, "name": "triangle", "supercategory": "shape"},
]


def _polygon(category: int, cx: float, cy: float, r: float, angle: float) -> List[float]:
    """Vertices (x0, y0, x1, y1, ...) of the shape; circles are 24-gons."""
    corners = {1: 24, 2: 4, 3: 3}[category]
    start = angle if category != 2 else angle + math.pi / 4
    points = []
    for i in range(corners):
        a = start + 2 * math.pi * i / corners
        points += [cx + r * math.cos(a), cy + r * math.sin(a)]
    return [round(v, 2) for v in points]


def _overlaps(box: Tuple[float, float, float, float], boxes) -> bool:
    x0, y0, x1, y1 = box
    return any(x0 < b[2] + 2 and b[0] < x1 + 2 and y0 < b[3] + 2 and b[1] < y1 + 2 for b in boxes)


def _make_image(rng: np.random.Generator, size: int, max_shapes: int):
    """One image and its shapes; shapes never overlap, so each mask is exactly its polygon."""
    background = rng.integers(0, 90, size=3)
    noise = rng.normal(0, 12, size=(size, size, 3))
    pixels = np.clip(background + noise, 0, 255).astype(np.uint8)
    image = Image.fromarray(pixels)
    draw = ImageDraw.Draw(image)
    shapes, boxes = [], []
    for _ in range(int(rng.integers(1, max_shapes + 1))):
        for _attempt in range(20):
            category = int(rng.integers(1, len(CATEGORIES) + 1))
            r = float(rng.uniform(size * 0.08, size * 0.22))
            cx, cy = (float(v) for v in rng.uniform(r + 1, size - r - 1, size=2))
            polygon = _polygon(category, cx, cy, r, float(rng.uniform(0, 2 * math.pi)))
            xs, ys = polygon[0::2], polygon[1::2]
            box = (min(xs), min(ys), max(xs), max(ys))
            if not _overlaps(box, boxes):
                break
        else:
            continue
        color = tuple(int(c) for c in rng.integers(120, 256, size=3))
        draw.polygon(list(zip(xs, ys)), fill=color)
        boxes.append(box)
        shapes.append((category, polygon))
    return image, shapes


def _write_split(out_dir: str, split: str, count: int, first_id: int, size: int,
                 max_shapes: int, rng: np.random.Generator) -> Dict:
    from pycocotools import mask as mask_api  # area of the polygon as COCO computes it

    image_dir = os.path.join(out_dir, f"{split}2017")
    os.makedirs(image_dir, exist_ok=True)
    images, annotations = [], []
    for index in range(count):
        image_id = first_id + index
        image, shapes = _make_image(rng, size, max_shapes)
        file_name = f"{image_id:012d}.jpg"
        image.save(os.path.join(image_dir, file_name), format="JPEG", quality=95)
        images.append({"id": image_id, "file_name": file_name, "height": size, "width": size})
        for category, polygon in shapes:
            rle = mask_api.merge(mask_api.frPyObjects([polygon], size, size))
            x, y, w, h = (float(v) for v in mask_api.toBbox(rle))
            annotations.append({
                "id": len(annotations) + 1,
                "image_id": image_id,
                "category_id": category,
                "segmentation": [polygon],
                "area": float(mask_api.area(rle)),
                "bbox": [round(x, 2), round(y, 2), round(w, 2), round(h, 2)],
                "iscrowd": 0,
            })
    dataset = {
        "info": {"description": "synthetic shapes in COCO format", "version": "1.0"},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": CATEGORIES,
    }
    annotation_dir = os.path.join(out_dir, "annotations")
    os.makedirs(annotation_dir, exist_ok=True)
    path = os.path.join(annotation_dir, f"instances_{split}2017.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(dataset, f)
    os.replace(path + ".tmp", path)
    return dataset


def generate(out_dir: str, num_train: int = 400, num_val: int = 50, image_size: int = 128,
             max_shapes: int = 4, seed: int = 0) -> Dict[str, Dict]:
    """Writes both splits; returns {split: COCO dataset dict}."""
    if num_train < 1 or num_val < 1:
        raise ValueError(f"need at least one image per split, got train={num_train} val={num_val}")
    rng = np.random.default_rng(seed)
    return {
        "train": _write_split(out_dir, "train", num_train, 1, image_size, max_shapes, rng),
        "val": _write_split(out_dir, "val", num_val, 1_000_000, image_size, max_shapes, rng),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--train", type=int, default=400, help="training images (400)")
    parser.add_argument("--val", type=int, default=50, help="validation images (50)")
    parser.add_argument("--size", type=int, default=128, help="image side in pixels (128)")
    parser.add_argument("--max-shapes", type=int, default=4, help="shapes per image, 1..N (4)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    splits = generate(args.out_dir, args.train, args.val, args.size, args.max_shapes, args.seed)
    for split, data in splits.items():
        print(f"{split}: {len(data['images'])} images, {len(data['annotations'])} instances")


if __name__ == "__main__":
    main()
