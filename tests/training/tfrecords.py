"""The converter's TFRecords read back by Model Garden's own decoder, as training reads them."""

import glob


def decode_all(pattern):
    """Every record of the files matching `pattern` (in name order), decoded with masks into
    numpy values."""
    import tensorflow as tf
    from official.vision.dataloaders import tf_example_decoder

    decoder = tf_example_decoder.TfExampleDecoder(include_mask=True)
    files = sorted(glob.glob(pattern))
    return [tf.nest.map_structure(lambda t: t.numpy(), decoder.decode(record))
            for record in tf.data.TFRecordDataset(files)]
