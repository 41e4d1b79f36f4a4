"""Shared fixtures for the training-job tests: a small synthetic COCO set."""

import pytest


@pytest.fixture(scope="session")
def small_coco(tmp_path_factory):
    """12 train / 6 val images of 64 px in COCO 2017 layout."""
    from maskrcnn_local import synthetic_coco

    out = tmp_path_factory.mktemp("coco")
    synthetic_coco.generate(str(out), num_train=12, num_val=6, image_size=64, seed=3)
    return str(out)
