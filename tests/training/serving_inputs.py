"""Made-up inputs of the endpoint's handler (training_code/maskrcnn_job/serving): the container's
request context and a row of the model's answer, no TensorFlow."""

import numpy as np


def request_context(content_type="image/jpeg", attributes=None):
    """What the TensorFlow Serving container hands the handler beside the body: its immutable
    Context, as maskrcnn_local.batch_transform builds it."""
    from maskrcnn_local import batch_transform

    return batch_transform.request_context(content_type, attributes)


def detection_row(scores=(0.9, 0.2), count=2):
    """A row of Model Garden's DetectionModule output for a 100x80 (h x w) image."""
    return {
        "num_detections": count,
        "image_info": [[100.0, 80.0], [64.0, 64.0], [0.64, 0.8], [0.0, 0.0]],
        "detection_boxes": [[10.0, 20.0, 50.0, 60.0], [0.0, 0.0, 5.0, 5.0], [0, 0, 0, 0]],
        "detection_classes": [3.0, 1.0, 0.0],
        "detection_scores": list(scores) + [0.0],
        "detection_masks": np.full((3, 28, 28), 0.75).tolist(),
    }
