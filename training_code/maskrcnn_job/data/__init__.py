"""The `train` channel: its layout, written and read through one module (`layout`), and the
COCO -> TFRecord converter that writes it (`coco_to_tfrecord`, `tf_records`) from COCO 2017 or a
labeling tool's export as it really is (`exports`: found, read, split into train and val). No
module here imports TensorFlow (a test holds that): the converter runs in plain processes."""
