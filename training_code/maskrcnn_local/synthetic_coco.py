"""A small synthetic COCO-format dataset: shapes with instance masks, written like COCO 2017.

Real image files and real COCO JSON, so the whole path JSON -> TFRecord -> decoder -> model -> COCO
evaluation runs locally. Layout, as COCO's:
  <out>/train2017/*.jpg|png  <out>/val2017/*.jpg|png
  <out>/annotations/instances_train2017.json  <out>/annotations/instances_val2017.json
Seeded: the same arguments give byte-identical files.

Two layouts of the images:
- "real" (the default): sizes and formats as a team's export holds them (REAL holds the numbers):
  the long side from half to four times `image_size` (the model's input size), landscape and
  portrait at 4:3, 3:2 and 16:9, and squares of other sizes; some grayscale, some PNG, and some
  JPEGs stored turned with an EXIF orientation that turns them upright, annotated upright (the
  labeling tools annotate the image as displayed). Shapes are sized by the long side, which the
  model's input resizing brings to `image_size`: each shape reaches the model at the size it has
  in the square layout.
- "square": every image `image_size` x `image_size`, RGB JPEG (the set before the real layout,
  byte for byte).

Two difficulties:
- "hard" (the default, the demo's): 6 classes in look-alike pairs (circle / ellipse, square /
  rectangle, triangle / star; a class is its geometry, at any rotation), drawn
  back to front so that instances overlap and occlude each other or are cut by the border (each
  keeps at least 60% of its area visible); each annotation's mask is its *visible* part, as a
  uncompressed RLE (iscrowd=0), its box and area that mask's; now and then a cluster of small
  touching shapes of one class is one iscrowd=1 annotation, as COCO marks crowds (Model Garden's
  parser skips crowds in training, COCOeval ignores detections on them); textured and noisy
  backgrounds and shapes, varying contrast, radii from a few pixels to 30% of the image side,
  2..6 instances per image. HARD holds the numbers.
- "easy" (the earlier set, byte for byte): circles, squares and triangles that never overlap,
  flat on a noisy flat background, polygon segmentations, 1..4 per image.
"""

import argparse
import dataclasses
import json
import math
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
from PIL import ExifTags, Image, ImageDraw

# Ids 1..N contiguous; the first three are the easy set's, unchanged.
# Part of local_run's dataset stamp: a change to what generate() writes must bump it.
VERSION = 5
CATEGORIES = [
    {"id": 1, "name": "circle", "supercategory": "shape"},
    {"id": 2, "name": "square", "supercategory": "shape"},
    {"id": 3, "name": "triangle", "supercategory": "shape"},
    {"id": 4, "name": "ellipse", "supercategory": "shape"},
    {"id": 5, "name": "rectangle", "supercategory": "shape"},
    {"id": 6, "name": "star", "supercategory": "shape"},
]
EASY_CATEGORIES = CATEGORIES[:3]
DIFFICULTIES = ("hard", "easy")
DEFAULT_MAX_SHAPES = {"hard": 6, "easy": 4}
LAYOUTS = ("real", "square")


@dataclasses.dataclass(frozen=True)
class RealLayout:
    """How the real layout draws each image's size, colour mode and file format."""
    long_side: Tuple[float, float] = (0.5, 4.0)  # x image_size, log-uniform
    # width:height; squares of other sizes among them.
    aspects: Tuple[Tuple[int, int], ...] = ((4, 3), (3, 4), (3, 2), (2, 3), (16, 9), (9, 16),
                                            (1, 1))
    gray_fraction: float = 0.1
    png_fraction: float = 0.15
    exif_fraction: float = 0.2       # of the JPEGs: stored turned, with an EXIF orientation
    # What cameras write (TIFF 6.0's Orientation): 6 and 8 a phone held upright, 3 upside down.
    exif_orientations: Tuple[int, ...] = (6, 8, 3)
    min_side_px: int = 16


REAL = RealLayout()
# Pillow's turn of the upright pixels that the stored ones need, so that its exif_transpose (and
# every viewer and labeling tool) shows them upright: the inverse of the orientation's.
_STORED_TURN = {3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_90,
                8: Image.Transpose.ROTATE_270}


@dataclasses.dataclass(frozen=True)
class _ImageLayout:
    width: int
    height: int
    gray: bool = False
    png: bool = False
    orientation: int = 1             # 1: stored upright, no EXIF orientation


def _image_layout(rng: np.random.Generator, size: int, layout: str,
                  real: RealLayout) -> _ImageLayout:
    if layout == "square":
        return _ImageLayout(size, size)
    long = size * math.exp(rng.uniform(math.log(real.long_side[0]), math.log(real.long_side[1])))
    across, down = real.aspects[int(rng.integers(0, len(real.aspects)))]
    short = long * min(across, down) / max(across, down)
    long_px, short_px = (max(real.min_side_px, int(round(v))) for v in (long, short))
    width, height = (long_px, short_px) if across >= down else (short_px, long_px)
    gray = bool(rng.random() < real.gray_fraction)
    png = bool(rng.random() < real.png_fraction)
    orientation = 1
    if not png and rng.random() < real.exif_fraction:
        orientation = real.exif_orientations[int(rng.integers(0, len(real.exif_orientations)))]
    return _ImageLayout(width, height, gray, png, orientation)


def _save(image: Image.Image, layout: _ImageLayout, path_stem: str, quality: int) -> str:
    """Writes the upright image as `layout` says; returns the file name."""
    if layout.gray:
        image = image.convert("L")
    if layout.png:
        image.save(path_stem + ".png", format="PNG")
        return os.path.basename(path_stem) + ".png"
    if layout.orientation != 1:
        exif = Image.Exif()
        exif[ExifTags.Base.Orientation] = layout.orientation
        image.transpose(_STORED_TURN[layout.orientation]).save(
            path_stem + ".jpg", format="JPEG", quality=quality, exif=exif.tobytes())
    else:
        image.save(path_stem + ".jpg", format="JPEG", quality=quality)
    return os.path.basename(path_stem) + ".jpg"


@dataclasses.dataclass(frozen=True)
class HardSettings:
    """The hard set's knobs; lengths are fractions of the image side unless named _px."""
    min_shapes: int = 2              # instances per image: min_shapes..max_shapes (if they fit)
    tiny_fraction: float = 0.1       # share of shapes drawn with a tiny radius
    tiny_radius: Tuple[float, float] = (0.035, 0.06)   # uniform
    radius: Tuple[float, float] = (0.09, 0.3)          # log-uniform, the other shapes
    min_radius_px: float = 2.5
    near_fraction: float = 0.4       # share of shapes placed against an earlier one (occlusion)
    min_visible: float = 0.6         # every instance keeps >= this share of its area visible...
    min_visible_px: int = 12         # ... and at least this many pixels
    attempts: int = 15               # placements tried per shape before it is given up
    aspect: Tuple[float, float] = (0.4, 0.65)          # ellipse, rectangle: short / long side
    star_inner: float = 0.45         # inner / outer radius of the 5-pointed star
    crowd_fraction: float = 0.2      # share of images with one crowd
    crowd_members: Tuple[int, int] = (4, 7)
    crowd_radius: Tuple[float, float] = (0.035, 0.055)
    min_contrast: float = 45.0       # RGB distance of a shape's colour to what lies behind it
    jpeg_quality: int = 95


HARD = HardSettings()


# --- easy: the earlier set, unchanged (same random draws, same bytes) ----------------------------

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


def _make_easy_image(rng: np.random.Generator, height: int, width: int, max_shapes: int):
    """One image and its shapes; shapes never overlap, so each mask is exactly its polygon.
    Radii are fractions of the long side."""
    size = max(height, width)
    background = rng.integers(0, 90, size=3)
    noise = rng.normal(0, 12, size=(height, width, 3))
    pixels = np.clip(background + noise, 0, 255).astype(np.uint8)
    image = Image.fromarray(pixels)
    draw = ImageDraw.Draw(image)
    boxes: List[Tuple[float, float, float, float]]
    shapes, boxes = [], []
    for _ in range(int(rng.integers(1, max_shapes + 1))):
        for _attempt in range(20):
            category = int(rng.integers(1, len(EASY_CATEGORIES) + 1))
            r = float(rng.uniform(size * 0.08, size * 0.22))
            if 2 * r + 2 >= min(height, width):
                continue  # too wide for the short side: another draw
            cx, cy = (float(v) for v in rng.uniform(r + 1, np.array([width, height]) - r - 1))
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


def _easy_annotations(shapes, height: int, width: int) -> List[Dict]:
    from pycocotools import mask as mask_api  # area of the polygon as COCO computes it

    annotations = []
    for category, polygon in shapes:
        rle = mask_api.merge(mask_api.frPyObjects([polygon], height, width))
        x, y, w, h = (float(v) for v in mask_api.toBbox(rle))
        annotations.append({
            "category_id": category,
            "segmentation": [polygon],
            "area": float(mask_api.area(rle)),
            "bbox": [round(x, 2), round(y, 2), round(w, 2), round(h, 2)],
            "iscrowd": 0,
        })
    return annotations


# --- hard ----------------------------------------------------------------------------------------

def _outline(category: int, cx: float, cy: float, r: float, angle: float,
             aspect: float, settings: HardSettings) -> List[Tuple[float, float]]:
    """The shape's vertices. Classes differ by geometry, never by angle: any rotation of a square
    is a square; rectangles and ellipses are elongated (aspect well below 1)."""
    if category in (1, 4):  # circle, ellipse: 32-gons
        ry = r * (aspect if category == 4 else 1.0)
        local = [(r * math.cos(t), ry * math.sin(t))
                 for t in (2 * math.pi * i / 32 for i in range(32))]
    elif category in (2, 5):  # square, rectangle: half-sides from the circumradius r
        half = r / math.sqrt(2) if category == 2 else r / math.sqrt(1 + aspect * aspect)
        hy = half if category == 2 else half * aspect
        local = [(-half, -hy), (half, -hy), (half, hy), (-half, hy)]
    elif category == 6:  # star: 5 points
        local = [((r if i % 2 == 0 else r * settings.star_inner) * math.cos(math.pi * i / 5),
                  (r if i % 2 == 0 else r * settings.star_inner) * math.sin(math.pi * i / 5))
                 for i in range(10)]
    else:  # regular triangle
        local = [(r * math.cos(2 * math.pi * i / 3), r * math.sin(2 * math.pi * i / 3))
                 for i in range(3)]
    cos, sin = math.cos(angle), math.sin(angle)
    return [(cx + x * cos - y * sin, cy + x * sin + y * cos) for x, y in local]


def _lowres_field(rng: np.random.Generator, height: int, width: int, cells: int,
                  channels: int) -> np.ndarray:
    """Smooth noise in [-1, 1]-ish: a cells x cells grid upsampled bilinearly."""
    grid = rng.normal(0, 1, size=(channels, cells, cells)).astype(np.float32)
    return np.stack([np.asarray(Image.fromarray(g).resize((width, height),
                                                                    Image.Resampling.BILINEAR))
                     for g in grid], axis=-1)


def _stripes(rng: np.random.Generator, ys: np.ndarray, xs: np.ndarray,
             period: float) -> np.ndarray:
    theta = rng.uniform(0, math.pi)
    phase = rng.uniform(0, 2 * math.pi)
    return np.sin(2 * math.pi * (xs * math.cos(theta) + ys * math.sin(theta)) / period + phase)


def _background(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Gradient between two colours, blotches, sometimes stripes, pixel noise; float32 HxWx3."""
    size = max(height, width)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    c0 = rng.uniform(0, 230, size=3)
    c1 = np.clip(c0 + rng.normal(0, 50, size=3), 0, 255)
    theta = rng.uniform(0, 2 * math.pi)
    t = (xs * math.cos(theta) + ys * math.sin(theta)) / size
    t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
    pixels = c0 + (c1 - c0) * t[..., None]
    pixels += rng.uniform(10, 45) * _lowres_field(rng, height, width, int(rng.integers(3, 9)), 3)
    if rng.random() < 0.4:
        period = size * rng.uniform(0.04, 0.2)
        pixels += rng.uniform(8, 30) * _stripes(rng, ys, xs, period)[..., None]
    pixels += rng.normal(0, rng.uniform(3, 16), size=pixels.shape)
    return pixels.astype(np.float32)


def _paint(rng: np.random.Generator, canvas: np.ndarray, mask: np.ndarray, color: np.ndarray,
           scale: float) -> None:
    """Fills mask (in place) with colour plus a texture: flat, gradient, stripes or blotches,
    and noise; computed only over the mask's bounding box."""
    rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
    y0, y1, x0, x1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    h, w = y1 - y0, x1 - x0
    ys, xs = np.mgrid[y0:y1, x0:x1].astype(np.float32)
    fill = np.broadcast_to(color.astype(np.float32), (h, w, 3)).copy()
    kind = int(rng.integers(0, 4))
    if kind == 1:  # gradient across the shape
        theta = rng.uniform(0, 2 * math.pi)
        t = ((xs - x0) * math.cos(theta) + (ys - y0) * math.sin(theta)) / max(scale, 1.0)
        fill += rng.uniform(10, 35) * np.clip(t, -1, 1)[..., None]
    elif kind == 2:  # stripes
        fill += rng.uniform(10, 30) * _stripes(rng, ys, xs, max(scale * rng.uniform(0.3, 0.8),
                                                                  2.5))[..., None]
    elif kind == 3:  # blotches
        fill += rng.uniform(8, 25) * _lowres_field(rng, h, w, 3, 1)
    fill += rng.normal(0, rng.uniform(2, 14), size=fill.shape)
    inside = mask[y0:y1, x0:x1]
    canvas[y0:y1, x0:x1][inside] = fill[inside]


@dataclasses.dataclass
class _Item:
    category: int
    crowd: bool
    full_area: int          # pixels of the whole shape, also outside the image
    visible: np.ndarray     # bool, height x width: what later items left uncovered
    color: np.ndarray


class _Scene:
    """Items drawn back to front; each keeps >= min_visible of its area visible. Lengths that
    HardSettings gives as fractions are of the long side (`size`)."""

    def __init__(self, rng: np.random.Generator, height: int, width: int,
                 settings: HardSettings):
        self.rng, self.height, self.width, self.s = rng, height, width, settings
        self.size = max(height, width)
        self.canvas = _background(rng, height, width)
        self.items: List[_Item] = []

    def _rasterize(self, outlines) -> Tuple[np.ndarray, int]:
        """(mask inside the image, pixels of the whole outlines, also outside the image): drawn
        on a canvas just around them, shifted by whole pixels (the same pixels as in place)."""
        xs = [x for outline in outlines for x, _ in outline]
        ys = [y for outline in outlines for _, y in outline]
        x0, y0 = math.floor(min(xs)) - 1, math.floor(min(ys)) - 1
        width, height = math.ceil(max(xs)) - x0 + 2, math.ceil(max(ys)) - y0 + 2
        image = Image.new("1", (width, height), 0)
        draw = ImageDraw.Draw(image)
        for outline in outlines:
            draw.polygon([(x - x0, y - y0) for x, y in outline], fill=1)
        full = np.asarray(image)
        inside = np.zeros((self.height, self.width), dtype=bool)
        top, left = max(y0, 0), max(x0, 0)
        bottom, right = min(y0 + height, self.height), min(x0 + width, self.width)
        if top < bottom and left < right:
            inside[top:bottom, left:right] = full[top - y0:bottom - y0, left - x0:right - x0]
        return inside, int(np.count_nonzero(full))

    def _needed(self, full_area: int) -> float:
        return max(self.s.min_visible * full_area, self.s.min_visible_px)

    def _fits(self, mask: np.ndarray, full_area: int) -> bool:
        """The new item (on top) keeps enough of itself inside the image, and leaves enough of
        every earlier item visible."""
        if mask.sum() < self._needed(full_area):
            return False
        return all(np.count_nonzero(item.visible & ~mask) >= self._needed(item.full_area)
                   for item in self.items)

    def _color(self, mask: np.ndarray) -> np.ndarray:
        """A colour that stands out against what it covers: the pixels behind it and each item it
        overlaps (the most distant of a few random ones when none stands out enough)."""
        behind = [self.canvas[mask].mean(axis=0)]
        behind += [item.color for item in self.items if np.any(item.visible & mask)]
        best, best_distance = None, -1.0
        for _ in range(12):
            color = self.rng.uniform(0, 255, size=3)
            distance = min(float(np.linalg.norm(color - b)) for b in behind)
            if distance >= self.s.min_contrast:
                return color
            if distance > best_distance:
                best, best_distance = color, distance
        assert best is not None  # any distance is above -1: the first colour at least
        return best

    def _radius(self) -> float:
        s, size = self.s, self.size
        if self.rng.random() < s.tiny_fraction:
            r = size * self.rng.uniform(*s.tiny_radius)
        else:
            r = size * math.exp(self.rng.uniform(math.log(s.radius[0]), math.log(s.radius[1])))
        return max(r, s.min_radius_px)

    def _center(self, r: float) -> Tuple[float, float]:
        if self.items and self.rng.random() < self.s.near_fraction:
            # Against an earlier shape: they overlap or touch.
            anchor = self.items[int(self.rng.integers(0, len(self.items)))]
            ys, xs = np.nonzero(anchor.visible)
            k = int(self.rng.integers(0, len(xs)))
            theta = self.rng.uniform(0, 2 * math.pi)
            reach = r * self.rng.uniform(0.2, 1.1)
            return xs[k] + reach * math.cos(theta), ys[k] + reach * math.sin(theta)
        cx, cy = self.rng.uniform(-0.3 * r, np.array([self.width, self.height]) + 0.3 * r)
        return float(cx), float(cy)

    def _accept(self, category: int, crowd: bool, mask: np.ndarray, full_area: int,
                paint) -> None:
        color = self._color(mask)
        paint(color)
        for item in self.items:
            item.visible &= ~mask
        self.items.append(_Item(category, crowd, full_area, mask.copy(), color))

    def add_shape(self) -> bool:
        for _ in range(self.s.attempts):
            category = int(self.rng.integers(1, len(CATEGORIES) + 1))
            r = self._radius()
            cx, cy = self._center(r)
            outline = _outline(category, cx, cy, r, self.rng.uniform(0, 2 * math.pi),
                               self.rng.uniform(*self.s.aspect), self.s)
            mask, full_area = self._rasterize([outline])
            if self._fits(mask, full_area):
                self._accept(category, False, mask, full_area,
                             lambda color, mask=mask, r=r:
                             _paint(self.rng, self.canvas, mask, color, 2 * r))
                return True
        return False

    def add_crowd(self) -> bool:
        """Several small shapes of one class, touching or overlapping: one crowd region."""
        for _ in range(self.s.attempts):
            category = int(self.rng.integers(1, len(CATEGORIES) + 1))
            count = int(self.rng.integers(self.s.crowd_members[0], self.s.crowd_members[1] + 1))
            centers: List[Tuple[float, float]]
            radii: List[float]
            centers, radii = [], []
            cx, cy = self.rng.uniform(0.15 * np.array([self.width, self.height]),
                                      0.85 * np.array([self.width, self.height]))
            for index in range(count):
                r = max(self.size * self.rng.uniform(*self.s.crowd_radius), self.s.min_radius_px)
                if index:
                    k = int(self.rng.integers(0, index))
                    theta = self.rng.uniform(0, 2 * math.pi)
                    reach = (r + radii[k]) * self.rng.uniform(0.6, 0.95)
                    cx, cy = centers[k][0] + reach * math.cos(theta), \
                        centers[k][1] + reach * math.sin(theta)
                centers.append((float(cx), float(cy)))
                radii.append(r)
            outlines = [_outline(category, x, y, r, self.rng.uniform(0, 2 * math.pi),
                                 self.rng.uniform(*self.s.aspect), self.s)
                        for (x, y), r in zip(centers, radii)]
            mask, full_area = self._rasterize(outlines)
            if not self._fits(mask, full_area):
                continue

            def paint(color, outlines=outlines, radii=radii):
                for outline, r in zip(outlines, radii):  # one colour family, members drawn apart
                    member, _ = self._rasterize([outline])
                    if member.any():
                        jitter = self.rng.normal(0, 10, size=3)
                        _paint(self.rng, self.canvas, member, np.clip(color + jitter, 0, 255),
                               2 * r)

            self._accept(category, True, mask, full_area, paint)
            return True
        return False

    def image(self) -> Image.Image:
        return Image.fromarray(np.clip(np.rint(self.canvas), 0, 255).astype(np.uint8))


def uncompressed_rle(mask: np.ndarray) -> Dict:
    """COCO's uncompressed RLE, as its crowd annotations store masks: run lengths over the
    column-major pixels, starting with a run of zeros. pycocotools, this project's converter and
    Model Garden's create_coco_tf_record all read it; the latter does not read compressed
    (string) counts."""
    flat = np.asarray(mask, np.uint8).flatten(order="F")
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(flat)) + 1, [flat.size]])
    counts = np.diff(bounds).tolist()
    if flat[0]:
        counts = [0] + counts
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": counts}


def _make_hard_image(rng: np.random.Generator, height: int, width: int, max_shapes: int,
                     settings: HardSettings):
    """One image and its annotations (without ids): visible masks as RLE, in depth order."""
    from pycocotools import mask as mask_api

    scene = _Scene(rng, height, width, settings)
    count = int(rng.integers(min(settings.min_shapes, max_shapes), max_shapes + 1))
    crowd_at = int(rng.integers(0, count + 1)) if rng.random() < settings.crowd_fraction else -1
    for index in range(count + 1):
        if index == crowd_at:
            scene.add_crowd()
        if index < count:
            scene.add_shape()
    if not any(not item.crowd for item in scene.items):
        # Never an image without a (non-crowd) instance: one more try, then a centred shape.
        if not scene.add_shape():
            scene.s = dataclasses.replace(settings, near_fraction=0.0, min_visible=0.0,
                                          min_visible_px=1)
            for _ in range(100):
                if scene.add_shape():
                    break
    annotations = []
    for item in scene.items:
        rle = mask_api.encode(np.asfortranarray(item.visible.astype(np.uint8)))
        x, y, w, h = (float(v) for v in mask_api.toBbox(rle))
        annotations.append({
            "category_id": item.category,
            "segmentation": uncompressed_rle(item.visible),
            "area": float(mask_api.area(rle)),
            "bbox": [x, y, w, h],
            "iscrowd": int(item.crowd),
        })
    return scene.image(), annotations


def _write_split(out_dir: str, split: str, count: int, first_id: int, size: int,
                 max_shapes: int, rng: np.random.Generator, difficulty: str,
                 settings: HardSettings, layout: str, layout_rng: np.random.Generator,
                 real: RealLayout) -> Dict:
    image_dir = os.path.join(out_dir, f"{split}2017")
    os.makedirs(image_dir, exist_ok=True)
    annotations: List[Dict]
    images, annotations = [], []
    for index in range(count):
        image_id = first_id + index
        shape = _image_layout(layout_rng, size, layout, real)
        height, width = shape.height, shape.width
        if difficulty == "easy":
            image, shapes = _make_easy_image(rng, height, width, max_shapes)
            image_annotations, quality = _easy_annotations(shapes, height, width), 95
        else:
            image, image_annotations = _make_hard_image(rng, height, width, max_shapes, settings)
            quality = settings.jpeg_quality
        file_name = _save(image, shape, os.path.join(image_dir, f"{image_id:012d}"), quality)
        # The upright size, as the labeling tools record an image with an EXIF orientation.
        images.append({"id": image_id, "file_name": file_name, "height": height, "width": width})
        for ann in image_annotations:
            annotations.append(dict({"id": len(annotations) + 1, "image_id": image_id}, **ann))
    dataset = {
        "info": {"description": "synthetic shapes in COCO format", "version": "1.0"},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": EASY_CATEGORIES if difficulty == "easy" else CATEGORIES,
    }
    if difficulty != "easy":
        dataset["info"] = {"description": f"synthetic shapes in COCO format ({difficulty})",
                           "version": "2.0"}
    annotation_dir = os.path.join(out_dir, "annotations")
    os.makedirs(annotation_dir, exist_ok=True)
    path = os.path.join(annotation_dir, f"instances_{split}2017.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(dataset, f)
    os.replace(path + ".tmp", path)
    return dataset


def generate(out_dir: str, num_train: int = 400, num_val: int = 50, image_size: int = 128,
             max_shapes: Optional[int] = None, seed: int = 0, difficulty: str = "hard",
             settings: HardSettings = HARD, layout: str = "real",
             real: RealLayout = REAL) -> Dict[str, Dict]:
    """Writes both splits; returns {split: COCO dataset dict}.

    image_size: the model's input size (the side of every image in the square layout);
    max_shapes: instances per image at most (None: 7 hard, 4 easy); settings: the hard set's;
    layout: "real" or "square"; real: the real layout's.
    """
    if num_train < 1 or num_val < 1:
        raise ValueError(f"need at least one image per split, got train={num_train} val={num_val}")
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty {difficulty!r}: expected one of {DIFFICULTIES}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: expected one of {LAYOUTS}")
    if max_shapes is None:
        max_shapes = DEFAULT_MAX_SHAPES[difficulty]
    if max_shapes < 1:
        raise ValueError(f"max_shapes {max_shapes}: need at least 1")
    rng = np.random.default_rng(seed)
    # The images' sizes and formats from a stream of their own: the shapes' draws are the square
    # layout's, whatever the layout.
    layout_rng = np.random.default_rng([seed, 1])
    common = (image_size, max_shapes, rng, difficulty, settings, layout, layout_rng, real)
    return {
        "train": _write_split(out_dir, "train", num_train, 1, *common),
        "val": _write_split(out_dir, "val", num_val, 1_000_000, *common),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--train", type=int, default=400, help="training images (400)")
    parser.add_argument("--val", type=int, default=50, help="validation images (50)")
    parser.add_argument("--size", type=int, default=128,
                        help="the model's input size in pixels (128): the square layout's side, "
                             "the real layout's scale")
    parser.add_argument("--max-shapes", type=int, default=None,
                        help="instances per image at most (7 hard, 4 easy)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--difficulty", choices=DIFFICULTIES, default="hard",
                        help="hard (the default) or easy (the earlier, non-overlapping set)")
    parser.add_argument("--layout", choices=LAYOUTS, default="real",
                        help="real (the default: sizes, aspect ratios and formats as real "
                             "exports hold them) or square (every image --size x --size)")
    args = parser.parse_args(argv)
    splits = generate(args.out_dir, args.train, args.val, args.size, args.max_shapes, args.seed,
                      difficulty=args.difficulty, layout=args.layout)
    for split, data in splits.items():
        crowds = sum(a["iscrowd"] for a in data["annotations"])
        print(f"{split}: {len(data['images'])} images, {len(data['annotations'])} instances"
              + (f" ({crowds} crowd regions)" if crowds else ""))


if __name__ == "__main__":
    main()
