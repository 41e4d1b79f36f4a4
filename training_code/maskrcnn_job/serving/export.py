"""The trained model -> a SavedModel for serving, with Model Garden's DetectionModule.

Written to <SM_MODEL_DIR>/1/ (the version directory TensorFlow Serving and the SageMaker
TensorFlow serving container expect). Signatures: `serving_default` takes uint8 image tensors
[batch, height, width, 3]; `serving_bytes` takes encoded JPEG/PNG strings, each turned upright by
its EXIF orientation (serving/orientation.py). Both return
detection_boxes ([ymin, xmin, ymax, xmax] in the input image's own pixels), detection_classes
(the model's class ids), detection_scores, detection_masks (28x28 per box), num_detections,
image_info (Model Garden's: the image's [height, width], the resized one, the [y, x] scale, the
offset).

Beside it, <SM_MODEL_DIR>/code/: inference.py (maskrcnn_job/serving/endpoint_handler.py: the
TensorFlow Serving container's pre/post-processing, an image in and JSON detections out) and
categories.json (the dataset's categories, for names in that JSON and in `maskrcnn_local.predict`).
The job's model.tar.gz is then what the container deploys as it is (docs/serving.md, "The model
archive").
"""

import json
import os
import shutil
from typing import List, Optional

import tensorflow as tf
from official.core import config_definitions as cfg
from official.vision.serving import detection

# tf_keras's switch for per-layer traces (its own model.save(save_traces=False) sets it).
from tf_keras.src.saving.legacy.saved_model import utils as keras_saved_model_utils

from maskrcnn_job.serving import endpoint_handler, orientation

SERVING_VERSION = "1"
CODE_DIR = "code"
HANDLER = os.path.abspath(endpoint_handler.__file__)  # copied into code/ as inference.py


def write_serving_code(model_dir: str, categories: List[dict]) -> str:
    """<model_dir>/code/inference.py and categories.json, written whole or not at all."""
    final_dir = os.path.join(model_dir, CODE_DIR)
    temp_dir = final_dir + ".incomplete"
    shutil.rmtree(temp_dir, ignore_errors=True)
    os.makedirs(temp_dir)
    shutil.copyfile(HANDLER, os.path.join(temp_dir, "inference.py"))
    with open(os.path.join(temp_dir, "categories.json"), "w", encoding="utf-8") as f:
        # id: the model's class (1..K); source_id: the dataset's own id, which answers carry.
        json.dump([{"id": int(c["id"]), "name": c["name"],
                    "source_id": int(c.get("source_id", c["id"]))} for c in categories], f,
                  indent=1)
    shutil.rmtree(final_dir, ignore_errors=True)
    os.replace(temp_dir, final_dir)
    return final_dir


class _DetectionModule(detection.DetectionModule):
    """Model Garden's module, its `serving_bytes` signature calling the traced `serving_default`
    function instead of tracing Mask R-CNN's inference a second time (~10 s of each export),
    each encoded image turned upright by its EXIF orientation, and its boxes in the input
    image's own pixels."""

    def _decode_image(self, encoded_image_bytes: tf.Tensor) -> tf.Tensor:
        """The image as the people who labeled it saw it (serving/orientation.py): Model
        Garden's decode_image, then its EXIF orientation's turn."""
        return orientation.upright_image(encoded_image_bytes)

    def serve(self, images: tf.Tensor):
        """Model Garden's answer, the boxes divided by the resize's scale: its DetectionModule
        maps them back to the image for RetinaNet only and leaves Mask R-CNN's in the resized
        image's pixels (official/vision/serving/detection.py, tf-models-official 2.20), which
        are the image's own only for an image of the model's input size. Its evaluation divides
        them so (coco_utils; training/evaluation.py does the same)."""
        outputs = dict(super().serve(images))
        scale = tf.tile(outputs["image_info"][:, 2:3, :], [1, 1, 2])
        outputs["detection_boxes"] = outputs["detection_boxes"] / scale
        return outputs

    @tf.function
    def inference_from_image_bytes(self, inputs: tf.Tensor):
        with tf.device("cpu:0"):  # decoding as Model Garden's own signature does
            images = tf.map_fn(self._decode_image, elems=inputs, parallel_iterations=32,
                               fn_output_signature=tf.TensorSpec([None, None, 3], tf.uint8))
        return self.inference_from_image_tensors(images)


def export_saved_model(config: cfg.ExperimentConfig, model, model_dir: str,
                       categories: Optional[List[dict]] = None) -> str:
    """Exports `model` (the trained weights, called in inference mode by the signatures).

    The model object the job already holds, not a fresh one restored from a checkpoint: building
    Mask R-CNN again took ~15 s per exporting process. tf_keras would trace a training model's
    own training-mode call (which needs ground truth) into the SavedModel and fail; without its
    per-layer traces (below) only the signatures are traced, and they call the model with
    training=False. Model Garden's own build would only switch NMS v1 to `batched` for the
    dynamic batch size; the job's config uses v2, which supports it.
    """
    size = config.task.model.input_size[:2]
    module = _DetectionModule(params=config, model=model, batch_size=None,
                              input_image_size=size, input_type="image_tensor")
    final_dir = os.path.join(model_dir, SERVING_VERSION)
    temp_dir = final_dir + ".incomplete"
    shutil.rmtree(temp_dir, ignore_errors=True)
    signatures = module.get_inference_signatures(
        {"image_tensor": "serving_default", "image_bytes": endpoint_handler.SIGNATURE})
    # Serving reads the signatures only. So the SavedModel's root holds the model's variables
    # and nothing else to trace at save time: saving the module itself (as Model Garden's
    # export_base.export does) traces its tf.functions again, inference twice more, and tf_keras's
    # per-layer traces for a Keras reload took half of the export (~30 of 57 s in the demo).
    root = tf.Module()
    root.model = model
    with keras_saved_model_utils.keras_option_scope(save_traces=False):
        tf.saved_model.save(root, temp_dir, signatures=signatures)
    # Only a complete export gets the name that serving loads.
    shutil.rmtree(final_dir, ignore_errors=True)
    os.replace(temp_dir, final_dir)
    if categories is not None:
        write_serving_code(model_dir, categories)
    return final_dir
