"""COCO evaluation (bbox and segm) with the inference spread over the ranks, and its report.

Each rank (each input pipeline of the backend) predicts on its shard of the val TFRecords and turns
its detections into COCO results with Model Garden's coco_utils (boxes back to original pixels,
masks pasted into the image and RLE-encoded); rank 0 gathers them and runs COCOeval against the
original annotation file (faster-coco-eval's, or pycocotools' when it is not installed:
maskrcnn_job/evaluation/coco.py), then writes the evaluation report
(maskrcnn_job/evaluation/report.py: per-class AP, curves, confusion matrix, score thresholds) under
<SM_OUTPUT_DATA_DIR>/evaluation/step-<N>/; the best one is copied beside the model
(<SM_MODEL_DIR>/code/evaluation/) by the export. Each rank also computes the training losses on its
share of the same images (validation losses); rank 0 averages them over all the images.
docs/evaluation.md.
"""

import contextlib
import glob
import gzip
import io
import json
import logging
import math
import os
import shutil
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf
import tf_keras
from official.vision.dataloaders import (
    input_reader,
    input_reader_factory,
    maskrcnn_input,
    tf_example_decoder,
)
from official.vision.evaluation import coco_utils

from maskrcnn_contract import metrics as metric_names

from maskrcnn_job import sagemaker_env
from maskrcnn_job.evaluation import coco as coco_evaluation
from maskrcnn_job.evaluation import report as evaluation_report

REPORT_DIR = evaluation_report.OUTPUT_REPORT_DIR  # under SM_OUTPUT_DATA_DIR
MODEL_REPORT_DIR = evaluation_report.MODEL_REPORT_DIR  # under SM_MODEL_DIR
# The latest evaluation's detections, in its report folder: COCO's results format, with the
# image and category ids of the export the dataset came from (each class's source_id), boxes and
# RLE masks in the images' own pixels: pycocotools' loadRes reads it against that export's own
# annotation file as it is. Only the latest evaluation's folder keeps them (one
# evaluation's worth in the job's output, however many it runs), and the report's copies beside
# the best checkpoint and the model leave them out.
DETECTIONS_FILE = "detections.json.gz"

log = logging.getLogger(__name__)


def report_dir(root: str, step: Optional[int]) -> str:
    return os.path.join(root, f"step-{step}" if step is not None else "latest")


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


# Model Garden's loss names -> the metric lines' (metrics.VALIDATION_LOSS_METRICS).
LOSS_METRICS = {"total_loss": "eval/loss", **{
    name[len("eval/"):]: name for name in metric_names.VALIDATION_LOSS_METRICS
    if name != "eval/loss"}}


def validation_loss_inputs(task, data_config, input_context) -> tf.data.Dataset:
    """The split of `data_config` with the labels the training losses need (RPN targets, sampled
    boxes' classes, cropped masks): parsed as Model Garden's training parses, read as its
    evaluation reads (each image once, in order, sharded over the input pipelines), with the
    augmentation `data_config` sets (none for validation). Model Garden's build_inputs ties the
    parsing to is_training, which also makes its reader shuffle and repeat: the same parts are
    put together here, with the training parse."""
    model, parser_config = task.task_config.model, data_config.parser
    decoder_config = data_config.decoder.get()
    decoder = tf_example_decoder.TfExampleDecoder(
        include_mask=model.include_mask, regenerate_source_id=decoder_config.regenerate_source_id,
        mask_binarize_threshold=decoder_config.mask_binarize_threshold)
    parser = maskrcnn_input.Parser(
        output_size=model.input_size[:2], min_level=model.min_level, max_level=model.max_level,
        num_scales=model.anchor.num_scales, aspect_ratios=model.anchor.aspect_ratios,
        anchor_size=model.anchor.anchor_size,
        rpn_match_threshold=parser_config.rpn_match_threshold,
        rpn_unmatched_threshold=parser_config.rpn_unmatched_threshold,
        rpn_batch_size_per_im=parser_config.rpn_batch_size_per_im,
        rpn_fg_fraction=parser_config.rpn_fg_fraction,
        aug_rand_hflip=parser_config.aug_rand_hflip, aug_rand_vflip=parser_config.aug_rand_vflip,
        aug_scale_min=parser_config.aug_scale_min, aug_scale_max=parser_config.aug_scale_max,
        aug_type=parser_config.aug_type,
        skip_crowd_during_training=parser_config.skip_crowd_during_training,
        max_num_instances=parser_config.max_num_instances, include_mask=model.include_mask,
        outer_boxes_scale=model.outer_boxes_scale, mask_crop_size=parser_config.mask_crop_size,
        dtype=data_config.dtype)
    reader = input_reader_factory.input_reader_generator(
        data_config, dataset_fn=tf.data.TFRecordDataset, decoder_fn=decoder.decode,
        combine_fn=input_reader.create_combine_fn(data_config),
        parser_fn=parser.parse_fn(is_training=True))
    return reader.read(input_context=input_context)


# Every batch norm Model Garden builds: tf_keras's, the backends' synchronized ones (subclasses).
_BATCH_NORMS = (tf_keras.layers.BatchNormalization,
                tf_keras.layers.experimental.SyncBatchNormalization)


@contextlib.contextmanager
def batch_norm_in_inference_mode(model):
    """While active, `model`'s batch-norm layers normalize with their moving statistics and leave
    them as they are, whatever `training` the model is called with: tf_keras's BatchNormalization
    runs in inference mode when it is not trainable (the layer flag, read when a call is traced).
    The validation losses need the rest of the model in training mode (proposals sampled against
    the ground truth), and must not change the model."""
    layers = [layer for layer in model.submodules
              if isinstance(layer, _BATCH_NORMS) and layer.trainable]
    for layer in layers:
        layer.trainable = False
    try:
        yield
    finally:
        for layer in layers:
            layer.trainable = True


def report_failure(step: Optional[int], error: BaseException) -> str:
    """The one warning line of a report that could not be written: its cause and where it was
    raised, without a traceback and without an exception class name (sagemaker_env.
    quiet_for_the_failure_scan): the toolkit quotes a failed job's log from the first line naming
    one into the FailureReason (docs/aws-rules.md SM-9), and a report is not the job's failure."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    cause = (str(error).strip().splitlines() or [""])[0][:300]
    return (f"evaluation report of step {step} not written, training goes on without it: "
            + sagemaker_env.quiet_for_the_failure_scan(f"{type(error).__name__}: {cause}{where}"))


class Evaluator:
    """Runs inference on this rank's share of the val set; COCOeval on rank 0."""

    def __init__(self, task, data_config, backend, annotation_file: str, max_images: int = 0,
                 categories: Optional[List[Dict]] = None,
                 source_ids: Optional[Dict[int, int]] = None, report_root: Optional[str] = None,
                 loss_data_config=None):
        """`categories`: the dataset's (dataset_info.json), for the report's class names;
        `source_ids`: DatasetInfo.source_ids(), each class's id in the export it came from;
        `report_root`: where the chief writes each evaluation's report (None: no report);
        `loss_data_config`: the same images as training parses them, for the validation losses
        (validation_loss_inputs; None: no validation losses)."""
        self._task = task
        self._loss_data_config = loss_data_config
        self._categories = categories
        self._source_ids = source_ids
        self._report_root = report_root
        self.last_report: Optional[Dict] = None  # {"report": dict, "files": {kind: path}}
        self._model: Any = None  # evaluate()'s; one model object per run (the traced step keeps it)
        self._data_config = data_config
        self._backend = backend
        self._annotation_file = annotation_file
        self._max_batches = None
        if max_images:
            context = backend.input_context()
            per_pipeline_batch = context.get_per_replica_batch_size(data_config.global_batch_size)
            self._max_batches = math.ceil(
                max_images / (per_pipeline_batch * context.num_input_pipelines))
        self._coco_gt: Any = None
        self._predict = tf.function(self._predict_batch)
        self._losses = tf.function(self._loss_batch)

    def _predict_batch(self, images, labels):
        outputs = self._model(images, anchor_boxes=labels["anchor_boxes"],
                              image_shape=labels["image_info"][:, 1, :], training=False)
        keep = ("detection_boxes", "detection_classes", "detection_scores", "detection_masks")
        return {k: outputs[k] for k in keep}

    def _loss_batch(self, images, labels):
        """Model Garden's training losses of one batch (as the trainer's step computes them, the
        weight decay in the total), without a gradient."""
        outputs = self._model(
            images, image_shape=labels["image_info"][:, 1, :], anchor_boxes=labels["anchor_boxes"],
            gt_boxes=labels["gt_boxes"], gt_classes=labels["gt_classes"],
            gt_masks=labels["gt_masks"], training=True)
        outputs = tf.nest.map_structure(lambda x: tf.cast(x, tf.float32), outputs)
        losses = self._task.build_losses(outputs=outputs, labels=labels,
                                         aux_losses=self._model.losses)
        return {name: tf.stop_gradient(losses[name]) for name in LOSS_METRICS}

    def _local_losses(self, on_batch: Callable[[], None]):
        """This rank's validation losses: {metric: sum over its images of the batch mean times the
        batch's images}, and its number of images."""
        if self._loss_data_config is None:
            return {}, 0
        dataset = validation_loss_inputs(self._task, self._loss_data_config,
                                         self._backend.input_context())
        if self._max_batches:
            dataset = dataset.take(self._max_batches)
        sums, count = dict.fromkeys(LOSS_METRICS.values(), 0.0), 0
        with batch_norm_in_inference_mode(self._model):
            for images, labels in dataset:
                batch = int(images.shape[0])
                for name, value in self._losses(images, labels).items():
                    sums[LOSS_METRICS[name]] += float(value) * batch
                count += batch
                on_batch()
        return sums, count

    def _local_results(self, on_batch: Callable[[], None]):
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
            on_batch()
        return results, image_ids

    def evaluate(self, model, step: Optional[int] = None,
                 on_batch: Callable[[], None] = lambda: None) -> Optional[Dict[str, float]]:
        """Runs `model` (the same object at every call); returns {'eval/bbox_AP': ..., ...} on
        rank 0, None on the others. Rank 0 also writes the report of `step`. `on_batch` is
        called after each batch this rank ran (the stall watchdog's progress)."""
        if self._model is not None and model is not self._model:
            raise ValueError("Evaluator.evaluate: its traced step runs the first model it got")
        self._model = model
        started = time.time()
        results, image_ids = self._local_results(on_batch)
        inference_s = time.time() - started
        loss_sums, loss_images = self._local_losses(on_batch)
        losses_s = time.time() - started - inference_s
        gathered = self._backend.gather_objects((results, image_ids, loss_sums, loss_images))
        if not self._backend.is_chief:
            return None
        all_results = [r for rank_results, *_ in gathered for r in rank_results]
        all_ids = sorted({i for _, ids, *_ in gathered for i in ids})
        if self._coco_gt is None:
            # pycocotools' "loading annotations into memory..." lines say nothing to a user.
            with contextlib.redirect_stdout(io.StringIO()):
                self._coco_gt = coco_utils.COCOWrapper(eval_type="mask",
                                                       annotation_file=self._annotation_file)
        unknown = set(all_ids) - set(self._coco_gt.getImgIds())
        if unknown:
            raise ValueError(f"val TFRecords hold image ids absent from {self._annotation_file}: "
                             f"{sorted(unknown)[:5]}")
        # As Model Garden's COCOWrapper(eval_type="mask").loadRes: areas are the masks'.
        coco_dt = coco_evaluation.load_results(self._coco_gt, all_results)
        evaluator = coco_evaluation.default_evaluator()
        values, evaluations, coco_eval_s = {}, {}, {}
        for kind in coco_evaluation.IOU_TYPES:
            started_kind = time.time()
            # Every evaluated image counts, also those where the model detected nothing.
            # No COCO summary table in the log: the same figures are the metric lines and the
            # report (its per-class tables), and the evaluators' progress lines are noise.
            coco_eval = coco_evaluation.run(self._coco_gt, coco_dt, kind, all_ids, evaluator,
                                            print_function=None)
            coco_eval_s[kind] = time.time() - started_kind
            evaluations[kind] = coco_eval
            for stat, value in zip(metric_names.COCO_STATS, coco_eval.stats):
                values[f"eval/{kind}_{stat}"] = float(value)
        images = sum(count for *_, count in gathered)
        if images:  # the mean over every rank's images
            validation_losses = {name: sum(sums[name] for _, _, sums, _ in gathered) / images
                                 for name in LOSS_METRICS.values()}
            values.update(validation_losses)
        timing = {"inference_s": round(inference_s, 3),
                  "coco_eval_s": {k: round(v, 3) for k, v in coco_eval_s.items()},
                  "validation_losses_s": round(losses_s, 3)}
        log.info("evaluated %d images, %d detections: inference %.1f s, validation losses %.1f s "
                 "(rank 0), COCOeval %.1f s (%s)", len(all_ids), len(all_results), inference_s,
                 losses_s, sum(coco_eval_s.values()), coco_evaluation.describe(evaluator))
        if self._report_root is not None:
            values.update(self._write_report(
                evaluations, step, evaluator, timing, all_results,
                validation_losses if images else None))
        return values

    def _write_report(self, evaluations: Dict, step: Optional[int], evaluator: str,
                      timing: Dict, results: List[Dict],
                      validation_losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """The report of this evaluation into <report root>/step-<N>/; its headline metrics. A
        report that fails is one warning line (report_failure), and training and the export go
        on without it."""
        started = time.time()
        try:
            names = evaluation_report.category_names(
                evaluations["segm"].params.catIds, self._categories,
                self._coco_gt.dataset.get("categories"))
            report = evaluation_report.build(evaluations, names, step=step,
                                             evaluator=coco_evaluation.describe(evaluator),
                                             timing=timing, source_ids=self._source_ids)
            report["timing"]["report_s"] = round(time.time() - started, 3)  # without pictures
            if validation_losses is not None:
                report["validation_losses"] = {name[len("eval/"):]: round(value, 6)
                                               for name, value in validation_losses.items()}
            assert self._report_root is not None  # evaluate() writes reports only then
            folder = report_dir(self._report_root, step)
            files = evaluation_report.write(report, folder)
            files["detections"] = _write_detections(results, self._source_ids or {}, folder)
        except Exception as error:  # noqa: BLE001  (the report is secondary: the model is not)
            log.warning("%s", report_failure(step, error))
            self.last_report = None
            return {}
        self.last_report = {"report": report, "files": files}
        log.info("evaluation report in %.1f s: %s", time.time() - started,
                 os.path.dirname(files["report"]))
        return evaluation_report.worst_class_metrics(report)

    def write_summaries(self, writer, step: int) -> None:
        """The last report's per-class figures and pictures to TensorBoard (rank 0's writer)."""
        if writer is not None and self.last_report is not None:
            evaluation_report.write_summaries(writer, step, self.last_report["report"],
                                              self.last_report["files"])

    def last_report_dir(self) -> Optional[str]:
        """The folder of the last evaluation's report; None when it has none."""
        if self.last_report is None:
            return None
        return os.path.dirname(self.last_report["files"]["report"])


def _write_detections(results: List[Dict], source_ids: Dict[int, int], folder: str) -> str:
    """`results` into `folder`/DETECTIONS_FILE, each class as its `source_ids` id, written whole;
    the other evaluations' folders beside it lose theirs."""
    exported = []
    for result in results:
        segmentation = dict(result["segmentation"])
        if isinstance(segmentation.get("counts"), bytes):  # pycocotools' encode: JSON takes text
            segmentation["counts"] = segmentation["counts"].decode("ascii")
        exported.append(dict(result, segmentation=segmentation,
                             category_id=source_ids.get(result["category_id"],
                                                        result["category_id"])))
    path = os.path.join(folder, DETECTIONS_FILE)
    with gzip.open(path + ".incomplete", "wt", encoding="utf-8") as f:
        json.dump(exported, f)
    os.replace(path + ".incomplete", path)
    for other in glob.glob(os.path.join(os.path.dirname(folder), "*", DETECTIONS_FILE)):
        if os.path.dirname(other) != folder:
            os.remove(other)
    return path


def copy_report(source: str, target: str) -> str:
    """The report folder `source` as `target` without its detections, replaced whole (a job
    stopped while copying leaves the previous one, or none): beside the best checkpoint, or beside
    the model, <model_dir>/code/evaluation/ (after the export, which writes code/ whole). Returns
    `target`."""
    temporary = target + ".incomplete"
    shutil.rmtree(temporary, ignore_errors=True)
    shutil.copytree(source, temporary, ignore=shutil.ignore_patterns(DETECTIONS_FILE))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(temporary, target)
    return target
