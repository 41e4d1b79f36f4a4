"""The trained model -> a SavedModel for serving, with Model Garden's DetectionModule.

Written to <SM_MODEL_DIR>/1/ (the version directory TensorFlow Serving and the SageMaker
TensorFlow serving container expect). Signatures: `serving_default` takes uint8 image tensors
[batch, height, width, 3]; `serving_bytes` takes encoded JPEG/PNG strings. Both return
detection_boxes ([ymin, xmin, ymax, xmax] in input-image pixels), detection_classes (COCO category
ids), detection_scores, detection_masks (28x28 per box), num_detections, image_info.
"""

import os
import shutil

from official.core import config_definitions as cfg
from official.core import export_base
from official.vision.serving import detection

SERVING_VERSION = "1"


def export_saved_model(config: cfg.ExperimentConfig, checkpoint_path: str, model_dir: str) -> str:
    """Builds a fresh inference model from the config and restores the final checkpoint into it.

    Not the training model object itself: tf_keras would trace that one's training-mode call
    (which needs ground truth) into the SavedModel and fail.
    """
    size = config.task.model.input_size[:2]
    module = detection.DetectionModule(params=config, batch_size=None, input_image_size=size,
                                       input_type="image_tensor")
    final_dir = os.path.join(model_dir, SERVING_VERSION)
    temp_dir = final_dir + ".incomplete"
    shutil.rmtree(temp_dir, ignore_errors=True)
    export_base.export(
        module, function_keys={"image_tensor": "serving_default", "image_bytes": "serving_bytes"},
        export_savedmodel_dir=temp_dir, checkpoint_path=checkpoint_path, timestamped=False)
    # Only a complete export gets the name that serving loads.
    shutil.rmtree(final_dir, ignore_errors=True)
    os.replace(temp_dir, final_dir)
    return final_dir
