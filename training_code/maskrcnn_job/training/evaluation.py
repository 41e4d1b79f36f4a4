"""COCO evaluation (pycocotools, bbox and segm) with the inference spread over the ranks.

Each rank (each input pipeline of the backend) predicts on its shard of the val TFRecords and turns its detections into COCO results
with Model Garden's coco_utils (boxes back to original pixels, masks pasted into the image and
RLE-encoded); rank 0 gathers them and runs COCOeval against the original annotation file.
"""

import logging
import math
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
from official.vision.evaluation import coco_utils
from pycocotools import cocoeval

from maskrcnn_contract import metrics as metric_names

log = logging.getLogger(__name__)


def _to_coco_results(outputs: Dict[str, np.ndarray], labels: Dict[str, np.ndarray]) -> List[Dict]:
    """One batch of model outputs -> COCO result dicts, padded empty detections dropped."""
    image_info = labels["image_info"]
    scale = np.tile(image_info[:, 2:3, :], (1, 1, 2))  # boxes come in scaled-image pixels
    predictions = {
        "source_id": [labels["groundtruths"]["source_id"]],
        "image_info": [image_info],
        "detection_boxes": [outputs["detection_boxes"].astype(np.float32) / scale],
        "detection_classes": [outputs["detection_classes"]],
        "detection_scores": [outputs["detection_scores"]],
        "detection_masks": [outputs["detection_masks"]],
    }
    results = []
    for ann in coco_utils.convert_predictions_to_coco_annotations(predictions):
        if ann["score"] <= 0 or ann["category_id"] <= 0:
            continue
        results.append({
            "image_id": int(ann["image_id"]),
            "category_id": int(ann["category_id"]),
            "bbox": [float(v) for v in ann["bbox"]],
            "score": float(ann["score"]),
            "segmentation": ann["segmentation"],
        })
    return results


class Evaluator:
    """Runs inference on this rank's share of the val set; COCOeval on rank 0."""

    def __init__(self, task, data_config, backend, annotation_file: str, max_images: int = 0):
        self._task = task
        self._model = None  # evaluate()'s; one model object per run (the traced step keeps it)
        self._data_config = data_config
        self._backend = backend
        self._annotation_file = annotation_file
        self._max_batches = None
        if max_images:
            context = backend.input_context()
            per_pipeline_batch = context.get_per_replica_batch_size(data_config.global_batch_size)
            self._max_batches = math.ceil(
                max_images / (per_pipeline_batch * context.num_input_pipelines))
        self._coco_gt = None
        self._predict = tf.function(self._predict_batch)

    def _predict_batch(self, images, labels):
        outputs = self._model(images, anchor_boxes=labels["anchor_boxes"],
                              image_shape=labels["image_info"][:, 1, :], training=False)
        keep = ("detection_boxes", "detection_classes", "detection_scores", "detection_masks")
        return {k: outputs[k] for k in keep}

    def _local_results(self):
        dataset = self._task.build_inputs(self._data_config,
                                          input_context=self._backend.input_context())
        if self._max_batches:
            dataset = dataset.take(self._max_batches)
        results, image_ids = [], []
        for images, labels in dataset:
            outputs = tf.nest.map_structure(lambda t: t.numpy(), self._predict(images, labels))
            labels_np = {
                "image_info": labels["image_info"].numpy(),
                "groundtruths": {"source_id": labels["groundtruths"]["source_id"].numpy()},
            }
            image_ids += [int(i) for i in labels_np["groundtruths"]["source_id"]]
            results += _to_coco_results(outputs, labels_np)
        return results, image_ids

    def evaluate(self, model) -> Optional[Dict[str, float]]:
        """Runs `model` (the same object at every call); returns {'eval/bbox_AP': ..., ...} on
        rank 0, None on the others."""
        if self._model is not None and model is not self._model:
            raise ValueError("Evaluator.evaluate: its traced step runs the first model it got")
        self._model = model
        results, image_ids = self._local_results()
        gathered = self._backend.gather_objects((results, image_ids))
        if not self._backend.is_chief:
            return None
        all_results = [r for rank_results, _ in gathered for r in rank_results]
        for index, result in enumerate(all_results):
            result["id"] = index + 1  # pycocotools indexes results by id
        all_ids = sorted({i for _, ids in gathered for i in ids})
        if self._coco_gt is None:
            self._coco_gt = coco_utils.COCOWrapper(eval_type="mask",
                                                   annotation_file=self._annotation_file)
        unknown = set(all_ids) - set(self._coco_gt.getImgIds())
        if unknown:
            raise ValueError(f"val TFRecords hold image ids absent from {self._annotation_file}: "
                             f"{sorted(unknown)[:5]}")
        coco_dt = self._coco_gt.loadRes(predictions=all_results)
        values = {}
        for iou_type, kind in (("bbox", "bbox"), ("segm", "segm")):
            coco_eval = cocoeval.COCOeval(self._coco_gt, coco_dt, iouType=iou_type)
            # Every evaluated image counts, also those where the model detected nothing.
            coco_eval.params.imgIds = all_ids
            coco_eval.evaluate()
            coco_eval.accumulate()
            coco_eval.summarize()
            for stat, value in zip(metric_names.COCO_STATS, coco_eval.stats):
                values[f"eval/{kind}_{stat}"] = float(value)
        log.info("evaluated %d images, %d detections", len(all_ids), len(all_results))
        return values
