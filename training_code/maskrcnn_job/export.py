"""The trained model -> a SavedModel for serving, with Model Garden's DetectionModule.

Written to <SM_MODEL_DIR>/1/ (the version directory TensorFlow Serving and the SageMaker
TensorFlow serving container expect). Signatures: `serving_default` takes uint8 image tensors
[batch, height, width, 3]; `serving_bytes` takes encoded JPEG/PNG strings. Both return
detection_boxes ([ymin, xmin, ymax, xmax] in input-image pixels), detection_classes (COCO category
ids), detection_scores, detection_masks (28x28 per box), num_detections, image_info.

Beside it, <SM_MODEL_DIR>/code/: inference.py (maskrcnn_job/serving_handler.py: the TensorFlow
Serving container's pre/post-processing, an image in and JSON detections out) and categories.json
(the dataset's categories, for names in that JSON and in `maskrcnn_job.predict`). The job's
model.tar.gz is then what the container deploys as it is (training_code/README.md, "Serving").
"""

import json
import os
import shutil
from typing import List, Optional

from official.core import config_definitions as cfg
from official.core import export_base
from official.vision.serving import detection
# tf_keras's switch for per-layer traces (its own model.save(save_traces=False) sets it).
from tf_keras.src.saving.legacy.saved_model import utils as keras_saved_model_utils

SERVING_VERSION = "1"
CODE_DIR = "code"
HANDLER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_handler.py")


def write_serving_code(model_dir: str, categories: List[dict]) -> str:
    """<model_dir>/code/inference.py and categories.json, written whole or not at all."""
    final_dir = os.path.join(model_dir, CODE_DIR)
    temp_dir = final_dir + ".incomplete"
    shutil.rmtree(temp_dir, ignore_errors=True)
    os.makedirs(temp_dir)
    shutil.copyfile(HANDLER, os.path.join(temp_dir, "inference.py"))
    with open(os.path.join(temp_dir, "categories.json"), "w", encoding="utf-8") as f:
        json.dump([{"id": int(c["id"]), "name": c["name"]} for c in categories], f, indent=1)
    shutil.rmtree(final_dir, ignore_errors=True)
    os.replace(temp_dir, final_dir)
    return final_dir


def read_categories(annotations_path: str) -> List[dict]:
    """The `categories` list of a COCO annotation file."""
    with open(annotations_path, encoding="utf-8") as f:
        return json.load(f)["categories"]


def export_saved_model(config: cfg.ExperimentConfig, checkpoint_path: str, model_dir: str,
                       categories: Optional[List[dict]] = None) -> str:
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
    # Without tf_keras's per-layer traces: serving reads the signatures only, and tracing every
    # layer's call for a Keras reload took half of the export (~30 of 57 s in the demo).
    with keras_saved_model_utils.keras_option_scope(save_traces=False):
        export_base.export(
            module,
            function_keys={"image_tensor": "serving_default", "image_bytes": "serving_bytes"},
            export_savedmodel_dir=temp_dir, checkpoint_path=checkpoint_path, timestamped=False)
    # Only a complete export gets the name that serving loads.
    shutil.rmtree(final_dir, ignore_errors=True)
    os.replace(temp_dir, final_dir)
    if categories is not None:
        write_serving_code(model_dir, categories)
    return final_dir
