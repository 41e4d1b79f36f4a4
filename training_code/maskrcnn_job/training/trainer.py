"""The training loop: Model Garden's Mask R-CNN task, data-parallel through a distribution backend.

Model, inputs and losses come from Model Garden's MaskRCNNTask; this module owns the custom loop:
the chief's state everywhere before the first step, steps run by the backend (Horovod's averaged
gradients, or a tf.distribute strategy's), periodic checkpoints (the chief's copy into the
directory SageMaker syncs) and resume, COCO evaluation, validation losses and the report,
TensorBoard summaries, metric lines, the checkpoint of the best evaluation by the objective
(best.py) and early stopping, and the SavedModel of that best checkpoint at the end with its
report beside it (the chief's: no other process writes /opt/ml/model). Each finished step,
evaluated batch and phase goes to the stall watchdog (watchdog.py), which fails the job when they
stop coming; before the first step the processes exchange the addresses at which their watchdogs
answer each other (peers.py), so that the one that fires names a peer that is frozen. The backend
(horovod_backend.HorovodBackend, tf_strategies.MultiWorkerMirroredBackend or
tf_strategies.ParameterServerBackend) is the seam: nothing here depends on which one runs.
"""

import dataclasses
import glob
import logging
import os
import re
import shutil
import time
from typing import Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf
import tf_keras
from official.modeling import optimization, performance
from official.vision.tasks import maskrcnn

from maskrcnn_contract import metrics as metric_lines
from maskrcnn_contract.hyperparameters import Hyperparameters

from maskrcnn_job import sagemaker_env
from maskrcnn_job.data import layout
from maskrcnn_job.distribution.backend import Backend
from maskrcnn_job.serving import export
from maskrcnn_job.training import best as best_evaluation
from maskrcnn_job.training import evaluation, experiment, init_from_checkpoint, tracking
from maskrcnn_job.training import watchdog as stall
from maskrcnn_job.training.schedule import Schedule

log = logging.getLogger(__name__)

LOSS_NAMES = ("total_loss", "rpn_score_loss", "rpn_box_loss", "frcnn_cls_loss", "frcnn_box_loss",
              "mask_loss")


@dataclasses.dataclass(frozen=True)
class Paths:
    checkpoint_dir: str
    model_dir: str
    output_data_dir: str
    tensorboard_dir: str
    init_checkpoint: Optional[str] = None
    init_from: Optional[str] = None  # the `init` channel: an earlier run's checkpoints (fine-tune)


def _format_eta(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{secs:02d}s"


class CheckpointError(RuntimeError):
    """No checkpoint of the checkpoint directory can be restored."""


def checkpoints_newest_first(directory: str) -> List[str]:
    """Checkpoint prefixes (ckpt-N, with an .index file) by step, newest first. From the files,
    not the `checkpoint` state file, which an interruption can leave behind or half-written."""
    found = []
    for index_file in glob.glob(os.path.join(directory, "ckpt-*.index")):
        match = re.fullmatch(r"ckpt-(\d+)\.index", os.path.basename(index_file))
        if match:
            found.append((int(match.group(1)), index_file[:-len(".index")]))
    return [prefix for _, prefix in sorted(found, reverse=True)]


def locate_corruption(pattern: str) -> str:
    """Where the first unreadable record of the shards matching `pattern` is, for an error
    message: 'shard S, record N (after image id I)'. Reads the shards in order (a failure path:
    the job stops anyway); the pattern itself when every record reads."""
    for shard in sorted(glob.glob(pattern)):
        index, last_id = 0, None
        try:
            for record in tf.data.TFRecordDataset(shard):
                example = tf.train.Example.FromString(record.numpy())
                ids = example.features.feature[layout.IMAGE_SOURCE_ID].bytes_list.value
                last_id = ids[0].decode() if ids else last_id
                index += 1
        except tf.errors.DataLossError:
            after = f" (after image id {last_id})" if last_id is not None else ""
            return f"shard {shard}, record {index}{after}"
    return pattern


class Trainer:
    def __init__(self, hps: Hyperparameters, channel: layout.Channel, info: layout.DatasetInfo,
                 backend: Backend, paths: Paths, watchdog: Optional[stall.Watchdog] = None,
                 tracker: Optional[tracking.Tracker] = None):
        self.channel, self.backend, self.paths = channel, backend, paths
        self.watchdog = watchdog or stall.Watchdog.off()
        # The chief's MLflow run, when the launch names one: the metric lines go there too.
        self.tracker = tracker or tracking.Tracker.off()
        self.seed = hps.seed
        self.schedule = Schedule.build(hps, info.splits[layout.TRAIN].num_images, backend.size)
        self.config = experiment.build(hps, channel, info, self.schedule,
                                       use_gpu=backend.num_gpus > 0,
                                       init_checkpoint=paths.init_checkpoint)
        self.mixed = self.config.runtime.mixed_precision_dtype == "float16"
        performance.set_mixed_precision_policy(self.config.runtime.mixed_precision_dtype)
        self.task = maskrcnn.MaskRCNNTask(self.config.task, logging_dir=paths.output_data_dir)
        with backend.scope():
            self.model = experiment.build_model(self.task, backend.sync_batch_norm_layer)
            if hps.freeze_backbone:  # before the optimizer's slots, which trainable weights get
                init_from_checkpoint.freeze_backbone(self.model)
            factory = optimization.OptimizerFactory(self.config.trainer.optimizer_config)
            self.learning_rate = factory.build_learning_rate()
            self.optimizer = performance.configure_optimizer(
                factory.build_optimizer(self.learning_rate), use_float16=self.mixed)
            # Model Garden builds a legacy tf_keras optimizer: create its slots now, so that
            # restore and broadcast see every optimizer variable before the first step.
            inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
            inner._create_all_weights(self.model.trainable_variables)  # pylint: disable=protected-access
        # What can differ between ranks: batch-norm moving statistics (per_rank; under sync, by
        # rounding at most). Not the frozen layers' (batch_norm=frozen): the same on every rank,
        # and an average of equal values rounds them when the number of ranks is not a power of 2.
        frozen = {variable.ref() for layer in self.model.submodules
                  if isinstance(layer, tf_keras.layers.Layer) and not layer.trainable
                  for variable in layer.weights}
        self._per_rank_state = [v for v in self.model.non_trainable_variables
                                if v.ref() not in frozen]
        if paths.init_checkpoint and backend.is_chief:
            self.task.initialize(self.model)  # the broadcast in start() hands it to the others
        self.run_info = init_from_checkpoint.run_info(hps, info.categories, info.name or None)
        self.fine_tuned = None
        if backend.is_chief:
            # Beside the checkpoints: a later run can fine-tune from them. A resumed run's own
            # checkpoint (start()) replaces what the init channel gives.
            init_from_checkpoint.write_run_info(paths.checkpoint_dir, self.run_info)
            if paths.init_from:
                self.fine_tuned = init_from_checkpoint.restore(
                    self.model, init_from_checkpoint.latest_checkpoint(paths.init_from),
                    reinitialize_class_specific=init_from_checkpoint.reinitialize_class_specific(
                        init_from_checkpoint.check(paths.init_from, hps), info.categories))
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
        self._managers: Dict[str, tf.train.CheckpointManager] = {}
        # Evaluation and export run on the model this returns: the training model, or (under a
        # strategy) a plain copy refreshed from it, so that inference runs outside the strategy.
        self._current_inference_model = backend.inference_model(
            self.model, lambda: experiment.build_model(self.task, backend.sync_batch_norm_layer))
        self.evaluator = evaluation.Evaluator(
            self.task, self.config.task.validation_data, backend,
            channel.annotations(layout.VAL), hps.eval_max_images, categories=info.categories,
            source_ids=info.source_ids(),
            report_root=os.path.join(paths.output_data_dir, evaluation.REPORT_DIR),
            loss_data_config=(experiment.validation_loss_data(self.config)
                              if hps.validation_losses else None))
        # The chief's (start() reads an earlier job's of this run); the others get its decisions.
        self.best = best_evaluation.Best(hps.objective_metric, hps.early_stopping_min_delta)
        self.patience = hps.early_stopping_patience
        self.best_dir = os.path.join(paths.checkpoint_dir, best_evaluation.BEST_DIR)
        self.stop_reason: Optional[str] = None  # set when early stopping ends the run
        self.summary_writer = (tf.summary.create_file_writer(
            paths.tensorboard_dir) if backend.is_chief else None)
        # Set by start(): the backend's step runner over the training set.
        self._run_steps: Optional[Callable[..., List[Dict]]] = None
        self._checkpoint_step: Optional[int] = None  # set by start()

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def _optimizer_variables(self) -> List[tf.Variable]:
        variables = self.optimizer.variables
        return list(variables() if callable(variables) else variables)

    def _restore_newest_complete(self) -> None:
        """Restores the newest checkpoint that reads whole. A spot interruption can leave the
        latest one truncated in /opt/ml/checkpoints: it is skipped with a warning, and the job
        fails naming each checkpoint's problem when none reads."""
        problems = []
        for path in checkpoints_newest_first(self.paths.checkpoint_dir):
            try:
                self.checkpoint.restore(
                    path, options=self.backend.checkpoint_options).assert_existing_objects_matched()
            except Exception as error:  # noqa: BLE001  (truncated files raise IndexError too)
                first_line = (str(error).strip().splitlines() or [""])[0][:300]
                problems.append(f"{os.path.basename(path)}: {type(error).__name__}: {first_line}")
                log.warning("checkpoint %s does not restore (%s); trying the one before it",
                            path, sagemaker_env.quiet_for_the_failure_scan(problems[-1]))
                continue
            log.info("resumed from %s at step %d", path, self.step)
            return
        if problems:
            raise CheckpointError(
                f"no checkpoint in {self.paths.checkpoint_dir} restores: {'; '.join(problems)}. "
                "Remove them to start from step 0, or copy complete ones from the job's "
                "checkpoint S3 prefix")

    def _restore_and_broadcast(self) -> None:
        if self.backend.is_chief:
            self._restore_newest_complete()
        # Once, before the loop: inside the first train step it would trace the step twice.
        self.backend.broadcast_from_chief(self.model.variables + self._optimizer_variables())
        # The step of the newest complete checkpoint, the same on every rank (the step was just
        # broadcast): the ranks decide together whether to save (saving synchronizes them).
        self._checkpoint_step = self.step if self.step > 0 else None
        if self.backend.is_chief and self.step == 0:
            log.info("starting from step 0 (no checkpoint in %s)", self.paths.checkpoint_dir)

    def _train_step_fn(self, images, labels) -> Dict[str, tf.Tensor]:
        """Model Garden's MaskRCNNTask.train_step, with gradients averaged over the replicas that
        step together (one replica's step: the backend runs it on each)."""
        with tf.GradientTape() as tape:
            model_kwargs = {
                "image_shape": labels["image_info"][:, 1, :],
                "anchor_boxes": labels["anchor_boxes"],
                "gt_boxes": labels["gt_boxes"],
                "gt_classes": labels["gt_classes"],
                "gt_masks": labels["gt_masks"],
                "training": True,
            }
            outputs = self.model(images, **model_kwargs)
            outputs = tf.nest.map_structure(lambda x: tf.cast(x, tf.float32), outputs)
            losses = self.task.build_losses(outputs=outputs, labels=labels,
                                            aux_losses=self.model.losses)
            loss = losses["total_loss"]
            if self.mixed:
                loss = self.optimizer.get_scaled_loss(loss)
        variables = self.model.trainable_variables
        gradients = self.backend.gradient_tape(tape).gradient(loss, variables)
        if self.mixed:
            gradients = self.optimizer.get_unscaled_gradients(gradients)
        self.optimizer.apply_gradients(zip(gradients, variables))
        return {name: losses[name] for name in LOSS_NAMES}

    def _synchronize_state(self) -> None:
        """Batch-norm moving statistics may differ between ranks; averaged before saving or
        evaluating."""
        self.backend.average_variables(self._per_rank_state)

    def _manager(self, directory: str, max_to_keep: int) -> tf.train.CheckpointManager:
        if directory not in self._managers:
            self._managers[directory] = tf.train.CheckpointManager(
                self.checkpoint, directory, max_to_keep=max_to_keep,
                step_counter=self.optimizer.iterations)
        return self._managers[directory]

    def _write_checkpoint(self, kept: str, max_to_keep: int) -> Optional[str]:
        """This step's checkpoint in `kept` (keeping its newest `max_to_keep`), as the backend
        has each process write its part; the path on the process that keeps it."""
        directory = self.backend.checkpoint_directory(kept)
        if directory == kept:
            return self._manager(directory, max_to_keep).save(
                checkpoint_number=self.step, options=self.backend.checkpoint_options)
        if directory is not None:
            # A copy the backend needs written (saving is a collective) but nobody keeps.
            tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=1).save(
                checkpoint_number=self.step, options=self.backend.checkpoint_options)
            shutil.rmtree(directory, ignore_errors=True)
        return None

    def _save_checkpoint(self) -> None:
        self.watchdog.phase(stall.CHECKPOINT)
        self._synchronize_state()
        path = self._write_checkpoint(self.paths.checkpoint_dir, max_to_keep=3)
        if path:
            log.info("rank %d wrote checkpoint %s", self.backend.rank, path)
        self._checkpoint_step = self.step

    def _read_best(self) -> None:
        """The chief's best so far: an earlier job's of this run (best.json beside its
        checkpoint), less the evaluations after the step this job resumed from, which it makes
        again."""
        self.best, why_not = best_evaluation.read(self.paths.checkpoint_dir, self.best.metric,
                                                  self.best.min_delta)
        if why_not:
            log.warning("%s", why_not)
        elif self.best.step is not None:
            if not glob.glob(os.path.join(self.best_dir, f"ckpt-{self.best.step}.index")):
                log.warning("the best checkpoint of step %d is not in %s: the best is tracked "
                            "again from this job's first evaluation", self.best.step, self.best_dir)
                self.best = best_evaluation.Best(self.best.metric, self.best.min_delta)
                return
            self.best.forget_after(self.step)
            log.info("best evaluation so far: %s, %d evaluation(s) without improvement since",
                     self.best.describe(), self.best.evaluations_since)

    def _save_best(self) -> None:
        """The evaluated weights as the best checkpoint (in BEST_DIR: the rolling checkpoints'
        manager never deletes it, resume never reads it), its report beside it."""
        self.watchdog.phase(stall.CHECKPOINT)
        path = self._write_checkpoint(self.best_dir, max_to_keep=1)
        if not self.backend.is_chief:
            return
        report = self.evaluator.last_report_dir()
        kept_report = os.path.join(self.best_dir, best_evaluation.REPORT_DIR)
        if report:
            evaluation.copy_report(report, kept_report)
        else:
            shutil.rmtree(kept_report, ignore_errors=True)
        log.info("new best evaluation: %s, checkpoint %s", self.best.describe(), path)

    def _evaluate(self) -> Optional[Dict[str, float]]:
        """Evaluates, and on the chief updates the best by the objective; every process then
        saves the best checkpoint when it improved, and sets stop_reason when early stopping
        ends the run (the chief decides, all follow: the ranks stop at the same step)."""
        self.watchdog.phase(stall.EVALUATION)
        self._synchronize_state()
        model = self._current_inference_model()
        started = time.time()
        values = self.evaluator.evaluate(model, step=self.step, on_batch=self.watchdog.progress)
        decision = None
        if values is not None:
            # The headline figures in the log itself: locally the metric lines go to a file.
            log.info("evaluation at step %d took %.0f s: %s", self.step, time.time() - started,
                     ", ".join(f"{name} {value:.3f}" for name, value in values.items()
                               if name.endswith(("_AP", "_AP50")) or name == "eval/loss"))
            decision = self._track_best(values)
            metric_lines.emit(values)
            self.tracker.log_metrics(values, self.step)
            self._write_summaries(values)
            self.evaluator.write_summaries(self.summary_writer, self.step)
        improved, self.stop_reason = self.backend.gather_objects(decision)[0]
        if improved:
            self._save_best()
        if self.backend.is_chief:
            best_evaluation.write(self.paths.checkpoint_dir, self.best)
        return values

    def _track_best(self, values: Dict[str, float]) -> tuple:
        """(improved, why it stops or None), from this evaluation's objective; its best so far
        becomes a metric line (metrics.BEST_OBJECTIVE)."""
        best, step = self.best, self.step
        value = values.get(best.metric)
        if value is None or not np.isfinite(value):
            # A figure of the report, when the report failed (logged): no improvement.
            log.warning("evaluation at step %d has no %s (objective_metric): counted as not "
                        "improving", step, best.metric)
            improved = False
            best.not_improved.append(step)
        else:
            improved = best.update(step, value)
        if best.value is not None:
            values[metric_lines.BEST_OBJECTIVE] = best.value
        stop = None
        if best.should_stop(self.patience) and step < self.schedule.total_steps:
            stop = (f"early stopping at step {step}: {best.metric} has not improved on "
                    f"{best.describe()} for {best.evaluations_since} evaluations "
                    f"(early_stopping_patience={self.patience}, early_stopping_min_delta="
                    f"{best.min_delta:g})")
        return improved, stop

    def _write_summaries(self, values: Dict[str, float]) -> None:
        if self.summary_writer is None:
            return
        with self.summary_writer.as_default(step=self.step):
            for name, value in values.items():
                tf.summary.scalar(name, value)
        self.summary_writer.flush()

    def _log_progress(self, window: List[Dict[str, np.ndarray]], timed_steps: int,
                      seconds: float) -> None:
        means = {name: float(np.mean([w[name] for w in window])) for name in LOSS_NAMES}
        # A collective: every rank logs at the same steps, rank 0 prints the mean over ranks.
        means = {name: self.backend.mean(value) for name, value in means.items()}
        global_batch = self.schedule.global_batch
        # None when the window holds only the first step of this process (it traces the graph,
        # so it is not timed): max_steps=1, log_every_steps=1, or a resume at the last step.
        images_per_sec = (timed_steps * global_batch / max(seconds, 1e-9) if timed_steps > 0
                          else None)
        if not self.backend.is_chief:
            return
        step, total = self.step, self.schedule.total_steps
        values = {
            "train/loss": means["total_loss"],
            **{f"train/{name}": means[name] for name in LOSS_NAMES if name != "total_loss"},
            "train/learning_rate": float(self.learning_rate(step - 1)),
            "train/step": step,
            "train/epoch": self.schedule.epoch(step),
        }
        speed = "img/s n/a ETA n/a"
        if images_per_sec is not None:
            values["train/images_per_sec"] = images_per_sec
            eta = (total - step) * global_batch / images_per_sec
            speed = f"{images_per_sec:.1f} img/s ETA {_format_eta(eta)}"
        print(f"step {step}/{total} epoch {values['train/epoch']:.2f} "
              f"loss {values['train/loss']:.4f} lr {values['train/learning_rate']:.5f} {speed}",
              flush=True)
        metric_lines.emit(values)
        self.tracker.log_metrics(values, step)
        self._write_summaries(values)

    def _training_inputs(self, input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        """One input pipeline's share of the training set, endless, shuffled, parsed by Model
        Garden (the backend calls this once per pipeline)."""
        return self.task.build_inputs(self.config.task.train_data, input_context=input_context)

    def start(self) -> None:
        """The chief's state (latest checkpoint) everywhere, then the backend's step runner."""
        self._restore_and_broadcast()
        if self.backend.is_chief:
            self._read_best()
        self._exchange_status_addresses()
        # A resumed run sees the data in a new order rather than replaying the first epochs.
        self.config.task.train_data.seed = self.backend.input_seed(self.seed + self.step)
        self._run_steps = self.backend.step_runner(self._train_step_fn, self._training_inputs)

    def _exchange_status_addresses(self) -> None:
        """Every process's stall-status address to every process (a collective, once), so that a
        watchdog that fires names the peers that no longer answer (watchdog.py, peers.py). Off
        with the watchdog, as it is everywhere alike (the same hyperparameters); a failure here
        is a warning, never the job's end."""
        if not self.watchdog.enabled:
            return
        address = self.watchdog.serve_status()  # never raises
        try:
            self.watchdog.set_peers(list(self.backend.gather_objects(address)))
        except Exception as error:  # noqa: BLE001  (the stall report says "peers not asked")
            log.warning("stall watchdog: peers' addresses not exchanged (%s); a stall report "
                        "will not name them", sagemaker_env.quiet_for_the_failure_scan(
                            f"{type(error).__name__}: {error}"))

    def train_steps(self, count: int) -> List[Dict[str, np.ndarray]]:
        """`count` steps; the losses of each (this rank's, or the worker's that ran it). Each
        finished step is the watchdog's progress."""
        first = self.step
        assert self._run_steps is not None  # start() ran
        try:
            return self._run_steps(count, lambda done: self.watchdog.progress(first + done))
        except tf.errors.DataLossError as error:
            where = locate_corruption(self.channel.shards(layout.TRAIN))
            raise RuntimeError(f"corrupt training data in {where}: {error.message}; re-run the "
                               "converter for this split") from None

    def _next_stop(self, step: int) -> int:
        """The next step after `step` at which the loop logs, saves, evaluates or ends."""
        schedule = self.schedule
        periods = [schedule.log_every_steps, schedule.checkpoint_every_steps,
                   schedule.eval_every_steps]
        return min([self.schedule.total_steps]
                   + [(step // p + 1) * p for p in periods if p])

    def run(self) -> Optional[Dict[str, float]]:
        """Trains to the end of the schedule, evaluates, exports. Returns final metrics on
        rank 0."""
        self.start()
        schedule = self.schedule
        total = schedule.total_steps
        if self.backend.is_chief and self.step < total:
            log.info("training steps %d..%d: %d replicas, %d images per step, %d steps per epoch",
                     self.step + 1, total, self.backend.size, schedule.global_batch,
                     schedule.steps_per_epoch)
        # The first steps (the backend's first_steps: one, or one per PS worker) also trace the
        # graph: they are not timed, and the watchdog gives them the slow phases' budget.
        window, timed_steps, timed_seconds, first = [], 0, 0.0, True
        final = None

        def crossed(before: int, after: int, period: int) -> bool:
            return bool(period) and before // period < after // period

        while self.step < total:
            before = self.step
            started = time.time()
            self.watchdog.phase(stall.FIRST_STEP if first else stall.TRAIN)
            losses = self.train_steps(
                min(self.backend.first_steps, self._next_stop(before) - before) if first
                else self._next_stop(before) - before)
            if not first:
                timed_steps += len(losses)
                timed_seconds += time.time() - started
            first = False
            window += losses
            step = self.step
            for values in losses:
                if not np.isfinite(values["total_loss"]):
                    raise FloatingPointError(f"loss is {values['total_loss']} at step {step}")
            if crossed(before, step, schedule.log_every_steps) or step >= total:
                self._log_progress(window, timed_steps, timed_seconds)
                window, timed_steps, timed_seconds = [], 0, 0.0
            if crossed(before, step, schedule.checkpoint_every_steps) and step < total:
                self._save_checkpoint()
            if crossed(before, step, schedule.eval_every_steps) and step < total:
                final = self._evaluate()
                if self.stop_reason:
                    log.info("%s", self.stop_reason)
                    break
        # Not the manager's latest: that may be a truncated checkpoint this run skipped.
        if self._checkpoint_step != self.step:
            self._save_checkpoint()
        if not self.stop_reason:  # else the evaluation that stopped it is the last
            final = self._evaluate()
        self.watchdog.phase(stall.EXPORT)
        fingerprints = self.backend.check_replicas_equal(self.model.variables)
        if self.backend.is_chief:
            # Each rank hashed its own weights; one line from rank 0, since lines that several
            # ranks print at once can interleave in mpirun's output.
            print(f"final weights fingerprints by rank: {' '.join(fingerprints)} "
                  f"({sum(int(np.prod(v.shape)) for v in self.model.variables)} values)",
                  flush=True)
        self._restore_best(final)
        # Every process refreshes the inference model (under MultiWorkerMirroredStrategy reading
        # the variables is a collective); the chief alone exports it.
        model = self._current_inference_model()
        if self.backend.is_chief:
            self._export(model)
        self.backend.gather_objects("done")  # the other ranks wait until the export succeeded
        return final

    def finish_tracking(self) -> None:
        """The chief's MLflow run, once every process is done: the SavedModel and the evaluation
        report beside it as artifacts, then FINISHED (nothing without a run)."""
        self.tracker.finish(self.paths.model_dir, export.SERVING_VERSION,
                            evaluation.MODEL_REPORT_DIR)

    def _restore_best(self, last: Optional[Dict[str, float]]) -> None:
        """The best evaluation's weights in the model, when it is not the last one (the chief
        reads the best checkpoint and hands its weights to the others, as at start); the log
        says which step is exported, and the last evaluation's objective beside it."""
        best_step = self.best.step if self.backend.is_chief else None
        best_step = self.backend.gather_objects(best_step)[0]
        if self.backend.is_chief:
            last_objective = (last or {}).get(self.best.metric)
            last_value = "n/a" if last_objective is None else f"{last_objective:.4f}"
            if best_step is None:
                log.warning("no evaluation gave %s (objective_metric): exporting the last "
                            "weights, step %d", self.best.metric, self.step)
            else:
                log.info("exporting the best evaluation, %s; the last, step %d: %s %s",
                         self.best.describe(), self.step, self.best.metric, last_value)
        if best_step is None or best_step == self.step:
            return
        if self.backend.is_chief:
            path = os.path.join(self.best_dir, f"ckpt-{best_step}")
            tf.train.Checkpoint(model=self.model).restore(
                path, options=self.backend.checkpoint_options).expect_partial() \
                .assert_existing_objects_matched()
        self.backend.broadcast_from_chief(self.model.variables)

    def _export(self, model) -> None:
        """The SavedModel and its serving code, from the chief alone: SageMaker packs what every
        host wrote to /opt/ml/model into one model.tar.gz, and names written on two hosts would
        clash (docs/aws-rules.md SM-10). The other processes write nothing there."""
        exported = export.export_saved_model(
            self.config, model, self.paths.model_dir,
            categories=self.run_info["categories"])  # dataset_info's: ids and source ids
        init_from_checkpoint.write_run_info(
            os.path.join(self.paths.model_dir, export.CODE_DIR), self.run_info)
        # print, not log: only rank 0 logs at INFO.
        print(f"rank {self.backend.rank} exported SavedModel to {exported}", flush=True)
        # The best evaluation's report beside it (docs/evaluation.md), after code/ is written.
        report = os.path.join(self.best_dir, best_evaluation.REPORT_DIR)
        if os.path.isdir(report):
            target = evaluation.copy_report(
                report, os.path.join(self.paths.model_dir, evaluation.MODEL_REPORT_DIR))
            print(f"evaluation report beside the model: {target}", flush=True)
