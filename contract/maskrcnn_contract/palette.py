"""The colours of drawn instances, by category id, wherever the project draws them (the local
predictions' pictures, the notebooks' drawing of an endpoint's answer): one class, one colour."""

from typing import Tuple

# Okabe-Ito: distinct for colour-blind readers too.
PALETTE = ((230, 159, 0), (86, 180, 233), (0, 158, 115), (240, 228, 66), (0, 114, 178),
           (213, 94, 0), (204, 121, 167), (255, 255, 255))


def colour(category_id: int) -> Tuple[int, int, int]:
    return PALETTE[(int(category_id) - 1) % len(PALETTE)]
