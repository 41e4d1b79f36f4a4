"""Fine-tuning: a job that starts from an earlier run's checkpoint (the `init` channel).

Every variable of the model whose shape matches the checkpoint's value of the same key is restored;
the class-specific layers of Model Garden's Mask R-CNN (the detection head's classifier and
class-specific box regression, the mask head's final predictor) keep their fresh initialization
when the run's class list differs from this job's, and so does any variable whose shape differs.
The optimizer starts anew. Keys are the checkpoint's own: the saved object graph of
tf.train.Checkpoint(model=..., optimizer=...) is walked beside the live model.

Each run's chief records what it trains (job_io.RUN_INFO: backbone, preset, image size, classes)
beside its checkpoints and in its model's code/ directory, so that a fine-tune can refuse weights
of another backbone or preset (hyperparameters.init_run_problems) before it builds anything.
"""

import glob
import json
import logging
import os
from typing import Any, Dict, List, Optional

from maskrcnn_contract import hyperparameters, job_io
from maskrcnn_contract.hyperparameters import Hyperparameters

log = logging.getLogger(__name__)

_VALUE = "VARIABLE_VALUE"


class InitError(RuntimeError):
    """The init channel holds nothing this job can start from."""


def run_info(hps: Hyperparameters, categories: List[dict], dataset: Optional[str]) -> dict:
    return {"backbone": hps.backbone, "model_preset": hps.model_preset,
            "image_size": hps.image_size, "dataset": dataset, "categories": categories}


def write_run_info(directory: str, info: dict) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, job_io.RUN_INFO)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
    return path


def _find(channel: str, name: str) -> Optional[str]:
    """`name` in the channel or one folder below it (a model directory keeps it in code/)."""
    for candidate in (os.path.join(channel, name), os.path.join(channel, "code", name)):
        if os.path.isfile(candidate):
            return candidate
    return None


def _no_checkpoint(channel: str) -> InitError:
    return InitError(f"{job_io.INIT_CHANNEL} channel {channel}: no checkpoint (ckpt-N.index and "
                     ".data-*); give an earlier run's checkpoint directory")


def latest_checkpoint(channel: str) -> str:
    """The newest checkpoint prefix (ckpt-N) of the channel, by step."""
    from maskrcnn_job.training.trainer import checkpoints_newest_first

    found = checkpoints_newest_first(channel)
    if not found:
        raise _no_checkpoint(channel)
    return found[0]


def check(channel: str, hps: Hyperparameters) -> dict:
    """The earlier run's RUN_INFO, once its checkpoint and its backbone and preset fit `hps`
    (before TensorFlow is imported: a wrong channel fails in a second)."""
    if not glob.glob(os.path.join(channel, "ckpt-*.index")):
        raise _no_checkpoint(channel)
    path = _find(channel, job_io.RUN_INFO)
    if path is None:
        raise InitError(f"{job_io.INIT_CHANNEL} channel {channel}: no {job_io.RUN_INFO}, so its "
                        "backbone, preset and classes are unknown: fine-tune from a run of this "
                        "version of the job")
    with open(path, encoding="utf-8") as f:
        info = json.load(f)
    problems = hyperparameters.init_run_problems(hps, info, where=f"{job_io.INIT_CHANNEL} "
                                                 f"channel {channel}")
    if problems:
        raise InitError("; ".join(problems))
    return info


def reinitialize_class_specific(info: dict, categories: List[dict]) -> bool:
    """Whether the class-specific layers keep their fresh initialization: the earlier run
    (`info`, its RUN_INFO) trained other classes than `categories`, this job's. The rule is the
    contract's (hyperparameters.same_classes), which the launcher's description applies too."""
    return not hyperparameters.same_classes(info, categories)


def checkpoint_keys(root, prefix: str) -> Dict[str, Any]:
    """{checkpoint key: live variable} of `root` (a tf.train.Checkpoint), walking the checkpoint's
    object graph beside the live objects' children (tf.train.TrackableView)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = tf.train.load_checkpoint(prefix)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    keys, seen, stack = {}, set(), [(0, root)]
    while stack:
        node_id, live = stack.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        node = graph.nodes[node_id]
        if isinstance(live, tf.Variable):
            for attribute in node.attributes:
                if attribute.name == _VALUE:
                    keys[attribute.checkpoint_key] = live
        children = tf.train.TrackableView(live).children(live)
        for child in node.children:
            if child.local_name in children:
                stack.append((child.node_id, children[child.local_name]))
    return keys


def class_specific_layers(model) -> list:
    """The layers of Model Garden's Mask R-CNN (official/vision/modeling/heads/instance_heads.py)
    with one output per class: each detection head's classifier (`detection-scores`) and, unless
    class-agnostic, its box regression (`detection-boxes`); the mask head's predictor
    (`mask-logits`, one mask per class)."""
    heads = model.detection_head if isinstance(model.detection_head, list) \
        else [model.detection_head]
    layers = []
    for head in heads:
        layers.append(head._classifier)  # pylint: disable=protected-access
        if not head.get_config().get("class_agnostic_bbox_pred"):
            layers.append(head._box_regressor)  # pylint: disable=protected-access
    if getattr(model, "mask_head", None) is not None:
        layers.append(model.mask_head._mask_regressor)  # pylint: disable=protected-access
    return layers


def restore(model, checkpoint: str, reinitialize_class_specific: bool) -> dict:
    """Assigns the checkpoint's value to every model variable of the same key and shape, except
    the class-specific ones when `reinitialize_class_specific`. Returns what it did."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(checkpoint)
    shapes = reader.get_variable_to_shape_map()
    keys = checkpoint_keys(tf.train.Checkpoint(model=model), checkpoint)
    owner = {}
    for layer in class_specific_layers(model) if reinitialize_class_specific else []:
        owner.update({variable.ref(): layer.name for variable in layer.weights})
    restored, reinitialized, layer_names = [], [], set()
    for key, variable in sorted(keys.items()):
        if variable.ref() in owner or list(shapes[key]) != variable.shape.as_list():
            reinitialized.append(key)
            layer_names.add(owner.get(variable.ref(), key.split("/.ATTRIBUTES")[0]))
            continue
        variable.assign(reader.get_tensor(key))
        restored.append(key)
    found = {v.ref() for v in keys.values()}
    missing = [v.name for v in model.variables if v.ref() not in found]
    layers = sorted(layer_names)
    log.info("fine-tuning from %s: restored %d variable(s); re-initialized %d in %d layer(s)%s%s",
             checkpoint, len(restored), len(reinitialized), len(layers),
             f" ({', '.join(layers)})" if layers else "",
             f"; {len(missing)} not in the checkpoint keep their initialization" if missing
             else "")
    return {"checkpoint": checkpoint, "restored": restored, "reinitialized": reinitialized,
            "reinitialized_layers": layers, "not_in_checkpoint": missing}


def freeze_backbone(model) -> None:
    """The backbone keeps the weights it starts from (and, frozen, its batch-norm statistics)."""
    model.backbone.trainable = False
    log.info("freeze_backbone: the backbone's %d variable(s) are not trained",
             len(model.backbone.variables))
