"""A JPEG's EXIF orientation, read and applied in graph ops: the exported model's serving_bytes
signature turns each image upright before the model sees it, as the people who labeled and will
look at it see it (Pillow's ImageOps.exif_transpose, browsers, Label Studio and CVAT, and the
training data's converter, maskrcnn_job/data/coco_to_tfrecord.py, turn it so). TensorFlow's
decoders ignore EXIF: without this, a phone photo taken upright is answered in its stored pixels,
a quarter turn away from the image its user sees. The orientation is the TIFF Orientation tag
(0x0112) of the first image directory in the APP1 segment headed "Exif" (TIFF 6.0; Exif 2.3,
section 4.5.4); an image without one, a PNG, or one whose EXIF block cannot be read is left as
stored."""

import tensorflow as tf

# How far into a JPEG the orientation is looked for: the segments before the EXIF one (APP0's
# JFIF header, at most one APP1 of 64 KiB) and the EXIF header's first directory.
_EXIF_SCAN_BYTES = 2 * 65536 + 1024
_EXIF_SEGMENTS = 4      # APPn segments looked at before giving up (EXIF is APP1, first or second)
_IFD_ENTRIES = 64       # directory entries looked at for the orientation tag
_ORIENTATION_TAG = 0x0112


def exif_orientation(encoded: tf.Tensor) -> tf.Tensor:
    """The EXIF orientation (1..8) of one encoded JPEG, 1 for an image without one, a PNG, or an
    EXIF block it cannot read; graph ops only. Reads what Pillow's ImageOps.exif_transpose reads:
    the TIFF Orientation tag of the first image directory in the APP1 segment headed Exif."""
    head = tf.strings.substr(tf.strings.join([encoded, tf.constant(b"\0" * _EXIF_SCAN_BYTES)]),
                             0, _EXIF_SCAN_BYTES)
    data = tf.cast(tf.io.decode_raw(head, tf.uint8), tf.int32)
    last = _EXIF_SCAN_BYTES - 1

    def at(index):
        return tf.gather(data, tf.clip_by_value(index, 0, last))

    def u16(index, little):
        return tf.where(little, at(index) + 256 * at(index + 1), 256 * at(index) + at(index + 1))

    def u32(index, little):
        return tf.where(little, u16(index, little) + 65536 * u16(index + 2, little),
                        65536 * u16(index, little) + u16(index + 2, little))

    exif_header = tf.constant([0x45, 0x78, 0x69, 0x66, 0, 0])  # "Exif\0\0"
    is_jpeg = tf.logical_and(tf.equal(at(0), 0xFF), tf.equal(at(1), 0xD8))
    offset, found, orientation = tf.constant(2), tf.constant(False), tf.constant(1)
    for _ in range(_EXIF_SEGMENTS):
        is_app = tf.logical_and(tf.equal(at(offset), 0xFF),
                                tf.logical_and(at(offset + 1) >= 0xE0, at(offset + 1) <= 0xEF))
        is_exif = tf.logical_and(tf.equal(at(offset + 1), 0xE1),
                                 tf.reduce_all(tf.equal(at(offset + 4 + tf.range(6)), exif_header)))
        tiff = offset + 10
        little = tf.logical_and(tf.equal(at(tiff), 0x49), tf.equal(at(tiff + 1), 0x49))
        big = tf.logical_and(tf.equal(at(tiff), 0x4D), tf.equal(at(tiff + 1), 0x4D))
        directory = tiff + u32(tiff + 4, little)
        count = u16(directory, little)
        entries = directory + 2 + 12 * tf.range(_IFD_ENTRIES)
        tags = u16(entries, little)
        matches = tf.logical_and(tf.equal(tags, _ORIENTATION_TAG),
                                 tf.range(_IFD_ENTRIES) < count)
        first = tf.argmax(tf.cast(matches, tf.int32), output_type=tf.int32)
        value = u16(directory + 2 + 12 * first + 8, little)
        readable = tf.logical_and(tf.logical_and(is_exif, tf.logical_or(little, big)),
                                  tf.reduce_any(matches))
        readable = tf.logical_and(readable, tf.logical_and(value >= 1, value <= 8))
        take = tf.logical_and(tf.logical_and(is_jpeg, is_app),
                              tf.logical_and(tf.logical_not(found), readable))
        orientation = tf.where(take, value, orientation)
        found = tf.logical_or(found, tf.logical_and(is_app, is_exif))
        # The next segment, while these are APPn segments.
        offset = tf.where(is_app, offset + 2 + u16(offset + 2, tf.constant(False)), offset)
    return orientation


def upright(image: tf.Tensor, orientation: tf.Tensor) -> tf.Tensor:
    """`image` (height x width x channels) turned as Pillow's ImageOps.exif_transpose turns an
    image of this EXIF orientation."""
    return tf.switch_case(orientation - 1, [
        lambda: image,                                            # 1
        lambda: tf.image.flip_left_right(image),                  # 2
        lambda: tf.image.rot90(image, 2),                         # 3
        lambda: tf.image.flip_up_down(image),                     # 4
        lambda: tf.image.transpose(image),                        # 5
        lambda: tf.image.rot90(image, 3),                         # 6: a quarter clockwise
        lambda: tf.image.rot90(tf.image.transpose(image), 2),     # 7
        lambda: tf.image.rot90(image, 1),                         # 8: a quarter anticlockwise
    ])


def upright_image(encoded: tf.Tensor) -> tf.Tensor:
    """One encoded JPEG or PNG -> its uint8 pixels (height x width x 3), turned upright."""
    image = tf.image.decode_image(encoded, channels=3, expand_animations=False)
    image.set_shape((None, None, 3))
    turned = upright(image, exif_orientation(encoded))
    turned.set_shape((None, None, 3))
    return turned
