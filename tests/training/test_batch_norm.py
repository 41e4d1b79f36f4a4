"""The `batch_norm` modes on 2 ranks under mpirun and Horovod, and the job's refusal of `frozen`
without a pretrained backbone.

One mpirun (module-scoped) runs batch_norm_ranks.py in each rank: the synchronized layer on its
own, then the job's Trainer with sync and with frozen (3 training steps each), every rank on
different data; the tests assert on what rank 0 wrote. The per-rank layer's observations show
that the checks can fail; per_rank's config (Model Garden's model unchanged) is checked in
test_experiment.py.
"""

import json
import os
import re
import subprocess

import pytest

from maskrcnn_job.data import coco_to_tfrecord
from maskrcnn_local import local_run

from tests.training.job_runs import single_rank_layout, train_single_rank

# Starts training runs (make check leaves it to make test).
pytestmark = pytest.mark.end_to_end

RANKS_PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "batch_norm_ranks.py")
SYNC = "HorovodSyncBatchNormalization"
HEADS = ("decoder", "rpn_head", "detection_head", "mask_head")


@pytest.fixture(scope="module")
def results(small_coco, tmp_path_factory):
    work = tmp_path_factory.mktemp("batch_norm")
    channel = work / "train"
    coco_to_tfrecord.convert_coco_dir(small_coco, str(channel), progress=False)
    command = local_run.mpirun_command(
        2, {"BN_TEST_OUT": str(work), "BN_TEST_CHANNEL": str(channel)}, RANKS_PROGRAM)
    run = subprocess.run(command, capture_output=True, text=True, timeout=900,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    results = json.loads((work / "results.json").read_text())
    assert results["ranks"] == 2
    return results


def test_a_horovod_step_on_2_ranks_is_the_step_on_all_their_images(results):
    """The gradient averaged over the ranks (not summed), at the learning rate scaled with them:
    one process's step on both ranks' images (tests/training/averaging_ranks.py)."""
    averaging = results["averaging"]
    assert averaging["replicas"] == 2 and averaging["peak_learning_rate"] == pytest.approx(0.02)
    assert averaging["relative_error"] < 1e-5, averaging


def test_sync_layer_uses_the_global_batch_statistics_and_gradients(results):
    for step in results["layer"]["sync"]:
        assert step["same_on_every_rank"]
        # moving = momentum * previous + (1 - momentum) * statistic of both ranks' inputs
        assert step["error_vs_global"] < 1e-5
        # The gradient flows through the allreduce: the concatenated batch's, to float precision.
        assert step["gradient_error"] < 1e-4


def test_a_per_rank_layer_fails_the_same_checks(results):
    for step in results["layer"]["per_rank"]:
        assert not step["same_on_every_rank"]
        assert step["error_vs_global"] > 0.01
        assert step["gradient_error"] > 1e-3


def test_sync_every_batch_norm_of_the_model_is_synchronized(results):
    sync = results["sync"]
    assert all(sync["layers"][part] for part in sync["layers"]), sync["layers"]
    assert sync["elsewhere"] == []  # every batch norm of the model is in one of these parts
    assert sync["classes"] == {part: [SYNC] for part in sync["layers"]}
    assert sync["frozen"] == []
    every = [name for names in sync["layers"].values() for name in names]
    for step in sync["steps"]:
        assert step["differ_between_ranks"] == []
        assert sorted(step["moved"]) == sorted(every)
        assert step["first_error_vs_global"] < 1e-4


def test_the_final_weights_check_compares_each_ranks_weights_and_fails_when_they_differ(results):
    """What test_job.py's "final weights fingerprints by rank" line rests on: the job's check
    (Backend.check_replicas_equal) gives each rank's fingerprint of the weights it holds, as the
    rank computes it itself (batch_norm_ranks.replicas), equal after synchronized steps; and
    with rank 1's weights made to differ it raises, naming both fingerprints."""
    replicas = results["replicas"]
    assert replicas["checked"] == replicas["own"] and len(set(replicas["own"])) == 1
    assert replicas["diverged"] is not None, "a divergence passed the check"
    assert replicas["diverged"].startswith("replicas diverged: weight fingerprints per rank [")
    named = re.findall(r"[0-9a-f]{64}", replicas["diverged"])
    assert len(named) == 2 and named[0] == replicas["own"][0] and named[1] != named[0]


def test_the_validation_losses_move_no_weight_and_no_batch_norm_statistic(results):
    """The evaluator's validation losses (the model in training mode for the sampled proposals,
    its batch norm in inference mode, no gradient) leave every variable of the model as it was,
    on each rank's share of the 6 val images; the same pass with batch norm in training mode
    moves the moving statistics (the check can fail)."""
    losses = results["validation_losses"]
    assert losses["images"] == 3
    assert set(losses["losses"]) == {"eval/loss", "eval/rpn_score_loss", "eval/rpn_box_loss",
                                     "eval/frcnn_cls_loss", "eval/frcnn_box_loss", "eval/mask_loss"}
    assert all(0 < value < 100 for value in losses["losses"].values()), losses["losses"]
    assert losses["moved"] == []
    moved = losses["moved_in_training_mode"]
    assert moved and all(name.endswith(("moving_mean:0", "moving_variance:0")) for name in moved)


def test_frozen_keeps_the_pretrained_backbone_statistics_and_syncs_the_rest(results):
    frozen = results["frozen"]
    backbone = frozen["layers"]["backbone"]
    # Restored from the checkpoint, and unchanged by training, on both ranks.
    assert frozen["backbone_is_the_pretrained_one"] == [[True, True], [True, True]]
    # Inference mode, gamma and beta not trained.
    assert sorted(frozen["frozen"]) == sorted(backbone)
    heads = [name for part in HEADS for name in frozen["layers"][part]]
    assert {part: frozen["classes"][part] for part in HEADS} == {part: [SYNC] for part in HEADS}
    for step in frozen["steps"]:
        assert step["differ_between_ranks"] == []
        assert sorted(step["moved"]) == sorted(heads)
    # The other weights train.
    assert frozen["backbone_kernels_moved"] == frozen["backbone_kernels"] > 0


def test_frozen_without_a_pretrained_channel_is_refused_with_the_fix(tmp_path):
    """The default (no batch_norm hyperparameter) is frozen; the job has no `pretrained` channel."""
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    opt_ml = single_rank_layout(tmp_path, {}, {"train": dataset})
    result = train_single_rank(opt_ml)
    assert result.returncode != 0
    failure = (opt_ml / "output" / "failure").read_text()
    assert "HyperparameterError: batch_norm=frozen" in failure, failure
    assert "`pretrained` channel" in failure and "batch_norm=sync" in failure
