"""A 0/1 mask as the polygons the labeling tools edit: each polygon [x1, y1, x2, y2, ...] in image
coordinates where pixel (i, j) spans [i, i + 1) x [j, j + 1), as COCO, CVAT and Label Studio place
shapes on an image.

The contours are Datumaro's (`datumaro.util.mask_tools.extract_contours` and `mask_to_polygons`,
what CVAT's Datumaro runs when a mask becomes a COCO polygon): OpenCV's `findContours` with
RETR_EXTERNAL (outer boundaries only: a tool's polygon has no holes, so a hole is filled) and
CHAIN_APPROX_TC89_KCOS (the Teh-Chin approximation: about a quarter of the boundary's points,
measured, and a closer fit than every boundary pixel), contours of 2 points or fewer dropped, and a
polygon kept only where its area (pycocotools' rasterization) is at least 1 pixel. OpenCV's points
are pixel indices, i.e. pixel centres; like Detectron2 (`GenericMask.mask_to_polygons` in
detectron2/utils/visualizer.py) 0.5 is added to put them at those centres in image coordinates.
The polygon is not repeated back to its first point (COCO's and the tools' polygons close
themselves).
"""

from typing import List

# Datumaro's `mask_to_polygons(mask, area_threshold=1)`: smaller polygons are dropped.
MIN_AREA = 1


def mask_polygons(mask) -> List[List[float]]:
    """The polygons of a 0/1 mask (numpy, height x width), largest first; [] when none is left."""
    import cv2
    import numpy as np
    from pycocotools import mask as mask_utils

    height, width = mask.shape
    contours, _ = cv2.findContours(np.ascontiguousarray(mask, dtype=np.uint8),
                                   cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_TC89_KCOS)
    found = []
    for contour in contours:
        if len(contour) < 3:
            continue
        polygon = (contour.reshape(-1, 2).astype(np.float64) + 0.5).flatten().tolist()
        area = float(mask_utils.area(mask_utils.frPyObjects([polygon], height, width))[0])
        if area >= MIN_AREA:
            found.append((area, polygon))
    found.sort(key=lambda pair: -pair[0])
    return [polygon for _, polygon in found]
