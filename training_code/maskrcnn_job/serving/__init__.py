"""What serving needs from a run: the SavedModel (`export`), which turns each image upright by
its EXIF orientation (`orientation`, graph ops), and the TensorFlow Serving container's handler
copied beside it (`endpoint_handler`, standard library only)."""
