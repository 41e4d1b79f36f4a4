"""What serving needs from a run: the SavedModel (`export`) and the TensorFlow Serving
container's handler copied beside it (`endpoint_handler`, standard library only)."""
