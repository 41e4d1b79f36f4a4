"""The exported model reads an image as the people who labeled it saw it: a JPEG's EXIF
orientation (every phone photo taken upright carries one) turns the decoded pixels upright before
the model sees them (maskrcnn_job/serving/orientation.py), as Pillow's
ImageOps.exif_transpose, the labeling tools, browsers and the training data's converter turn it.
The reference is Pillow's, on JPEGs Pillow writes with each of the 8 orientations, after a JFIF
header or without one, in both TIFF byte orders; images without a readable orientation are left
as stored. Graph ops only: the SavedModel's serving_bytes signature runs them."""

import io
import struct

import numpy as np
import pytest
from PIL import ExifTags, Image, ImageOps

ORIENTATION = ExifTags.Base.Orientation  # TIFF tag 0x0112


def _picture(width=37, height=23) -> Image.Image:
    """An image whose every pixel differs from its mirror images and turns (a gradient per
    channel), so that a wrong turn cannot pass."""
    ys, xs = np.mgrid[0:height, 0:width]
    pixels = np.stack([xs * 255 // width, ys * 255 // height, (xs * 7 + ys * 3) % 256], axis=-1)
    return Image.fromarray(pixels.astype(np.uint8))


def _jpeg(orientation: int, jfif: bool = True) -> bytes:
    out = io.BytesIO()
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    _picture().save(out, format="JPEG", quality=98, exif=exif.tobytes())
    data = out.getvalue()
    if not jfif:  # APP1 (EXIF) right after the start of the image, as cameras write it
        assert data[2:4] == b"\xff\xe0"
        length = struct.unpack(">H", data[4:6])[0]
        data = data[:2] + data[4 + length:]
        assert data[2:4] == b"\xff\xe1"
    return data


def _big_endian_exif_jpeg(orientation: int) -> bytes:
    """A JPEG whose EXIF block is Motorola-ordered ("MM"), as some cameras write it."""
    tiff = b"MM\x00\x2a" + struct.pack(">I", 8) + struct.pack(">H", 1) + struct.pack(
        ">HHIHH", ORIENTATION, 3, 1, orientation, 0) + struct.pack(">I", 0)
    app1 = b"Exif\x00\x00" + tiff
    out = io.BytesIO()
    _picture().save(out, format="JPEG", quality=98)
    data = out.getvalue()
    return data[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + data[2:]


def _ours(data: bytes) -> np.ndarray:
    import tensorflow as tf

    from maskrcnn_job.serving.orientation import upright_image

    return upright_image(tf.constant(data)).numpy()


def _pillows(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(ImageOps.exif_transpose(image).convert("RGB"))


def _same(ours, pillows):
    assert ours.shape == pillows.shape
    # Two JPEG decoders (TensorFlow's and Pillow's libjpeg settings): the same pixels to within
    # their rounding, 2.3 on average at most here; a wrong turn of this picture differs by 40+.
    assert np.abs(ours.astype(int) - pillows.astype(int)).mean() < 5


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("jfif", [True, False])
def test_each_orientation_is_turned_as_pillow_turns_it(orientation, jfif):
    data = _jpeg(orientation, jfif)
    _same(_ours(data), _pillows(data))
    if orientation != 1:  # the turn is not the identity: the stored pixels differ
        with Image.open(io.BytesIO(data)) as stored:
            assert (np.asarray(stored.convert("RGB")).shape != _pillows(data).shape
                    or np.abs(np.asarray(stored.convert("RGB")).astype(int)
                              - _pillows(data).astype(int)).mean() > 10)


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_a_big_endian_exif_block_is_read(orientation):
    data = _big_endian_exif_jpeg(orientation)
    _same(_ours(data), _pillows(data))


def test_images_without_a_readable_orientation_are_left_as_stored():
    stored = np.asarray(_picture())
    png = io.BytesIO()
    _picture().save(png, format="PNG")
    assert np.array_equal(_ours(png.getvalue()), stored)
    plain = io.BytesIO()
    _picture().save(plain, format="JPEG", quality=98)
    _same(_ours(plain.getvalue()), stored)
    broken = bytearray(_jpeg(6))
    start = broken.index(b"Exif\x00\x00") + 6
    broken[start:start + 2] = b"XX"  # neither byte order
    _same(_ours(bytes(broken)), stored)
