"""Made-up inputs of the endpoint's handler (training_code/maskrcnn_job/serving): the container's
request context and a row of the model's answer, no TensorFlow."""

import types

import numpy as np


def request_context(content_type="image/jpeg", attributes=""):
    """What the TensorFlow Serving container hands the handler beside the body (SageMaker's
    Context): the request's content type, JSON accepted, its custom attributes."""
    return types.SimpleNamespace(request_content_type=content_type,
                                 accept_header="application/json", custom_attributes=attributes)


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
