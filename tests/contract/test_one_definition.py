"""Rules that the job and the launcher share have one definition, the contract's: each side's
decision follows the contract's function when a test replaces it, so a side that decided by a
copy of its own (as "same classes" and the fp16_allreduce refusal once were) fails here.

Pure Python: the launcher's plan and init_from, the job's schedule and start-up checks, none of
which imports TensorFlow or talks to AWS."""

import json
import os
import types

import pytest

from maskrcnn_contract import hyperparameters, job_io
from maskrcnn_contract.hyperparameters import HyperparameterError
from maskrcnn_job import job
from maskrcnn_job.training import init_from_checkpoint
from maskrcnn_job.training.schedule import Schedule
from maskrcnn_launcher.training import init_from, plan, validation
from maskrcnn_launcher.training.options import LaunchOptions, LaunchRequestError

BOLTS = [{"id": 1, "name": "bolt", "source_id": 3}, {"id": 2, "name": "nut", "source_id": 17}]
PEOPLE = [{"id": 1, "name": "person", "source_id": 1}]


def _launcher_keeps_class_layers(run_info, categories) -> bool:
    source = init_from.InitSource("s3://bucket/checkpoints/run/", run_info)
    said = init_from.describe(source, "parts", categories)
    assert ("has the same classes" in said) != ("re-initialized" in said), said
    return "has the same classes" in said


def _job_keeps_class_layers(run_info, categories) -> bool:
    return not init_from_checkpoint.reinitialize_class_specific(run_info, categories)


@pytest.mark.parametrize("answer", [True, False])
def test_same_classes_is_decided_by_the_contract_on_both_sides(monkeypatch, answer):
    """The launcher says what the job will do with the class-specific layers, and the job does
    it, both by hyperparameters.same_classes: replaced by a rule that answers `answer` whatever
    the classes, both sides follow it, for classes that are the same and classes that differ."""
    for theirs, ours in (({"categories": BOLTS}, BOLTS), ({"categories": PEOPLE}, BOLTS)):
        assert _launcher_keeps_class_layers(theirs, ours) == _job_keeps_class_layers(
            theirs, ours) == hyperparameters.same_classes(theirs, ours)
    monkeypatch.setattr(hyperparameters, "same_classes", lambda run_info, categories: answer)
    for theirs, ours in (({"categories": BOLTS}, BOLTS), ({"categories": PEOPLE}, BOLTS)):
        assert _launcher_keeps_class_layers(theirs, ours) is answer
        assert _job_keeps_class_layers(theirs, ours) is answer


def _launcher_distribution_problems(raw: dict) -> list:
    """The launcher's problems with hyperparameters `raw` as the request sends them (with the
    toolkit's for the distribution, so that only the distribution's rule can speak)."""
    distribution = raw.get("distribution", "horovod")
    sent = {**{key: str(value).lower() for key, value in raw.items()},
            **job_io.distribution_hyperparameters(distribution, 1)}
    return validation._hyperparameter_problems(  # pylint: disable=protected-access
        sent, [{"ChannelName": "train"}, {"ChannelName": "pretrained"}], instance_count=2)


def _job_start(tmp_path, raw: dict):
    """The job's hyperparameters as it reads them at start (hyperparameters.json)."""
    path = tmp_path / "hyperparameters.json"
    path.write_text(json.dumps({key: str(value).lower() for key, value in raw.items()}))
    return job.read_hyperparameters(types.SimpleNamespace(hyperparameters_file=str(path)))


def test_what_a_distribution_allows_is_the_contracts_on_both_sides(monkeypatch, tmp_path):
    """fp16_allreduce=true under multi_worker_mirrored: refused by the job at start and by the
    launcher, through check_distribution alone (the launcher's copy of the refusal is gone, so a
    rule that allows it lets it through on both sides, and one that refuses anything refuses on
    both)."""
    raw = {"distribution": "multi_worker_mirrored", "fp16_allreduce": True}
    message = "fp16_allreduce=true compresses Horovod's allreduce"
    assert any(message in p for p in _launcher_distribution_problems(raw))
    with pytest.raises(HyperparameterError, match=message):
        _job_start(tmp_path, raw)

    monkeypatch.setattr(hyperparameters, "check_distribution", lambda hps: None)
    assert not any("fp16" in p for p in _launcher_distribution_problems(raw))
    assert _job_start(tmp_path, raw).fp16_allreduce is True

    def refuse(hps):
        raise HyperparameterError("the contract's rule")
    monkeypatch.setattr(hyperparameters, "check_distribution", refuse)
    assert "the contract's rule" in _launcher_distribution_problems({"distribution": "horovod"})
    with pytest.raises(HyperparameterError, match="the contract's rule"):
        _job_start(tmp_path, {"distribution": "horovod"})


# The fine-tune recipe training_code/README.md gave, on a few hundred images and 2 x 8 GPUs.
RECIPE = hyperparameters.parse({"epochs": "8", "lr_decay_epochs": "7", "warmup_steps": "500"})
INFO = {"splits": {"train": {"num_images": 300}}}


def _launcher_run_length(hps, info=INFO, replicas=16) -> list:
    return plan.run_length_notes(hps, info, replicas)


def test_the_run_length_rule_is_the_contracts_on_both_sides(monkeypatch):
    """A warmup past the run's end: the job's schedule and the launcher's plan refuse it with the
    contract's message, count the run with the contract's arithmetic, and refuse nothing the
    contract allows."""
    with pytest.raises(LaunchRequestError) as launcher:
        _launcher_run_length(RECIPE)
    with pytest.raises(HyperparameterError) as job_side:
        Schedule.build(RECIPE, num_train_images=300, num_replicas=16)
    problem, = hyperparameters.run_length_problems(
        RECIPE, hyperparameters.run_length(RECIPE, 300, 16))
    assert problem in str(launcher.value) and problem == str(job_side.value)

    monkeypatch.setattr(hyperparameters, "run_length_problems", lambda hps, length: [])
    assert _launcher_run_length(RECIPE) == []
    assert Schedule.build(RECIPE, num_train_images=300, num_replicas=16).total_steps == 80
    monkeypatch.setattr(hyperparameters, "run_length_problems",
                        lambda hps, length: [f"the contract's rule, {length.total_steps} steps"])
    monkeypatch.setattr(hyperparameters, "run_length", lambda hps, images, replicas:
                        hyperparameters.RunLength(images, replicas, 2 * replicas, 7, 84))
    with pytest.raises(LaunchRequestError, match="the contract's rule, 84 steps"):
        _launcher_run_length(RECIPE)
    with pytest.raises(HyperparameterError, match="the contract's rule, 84 steps"):
        Schedule.build(RECIPE, num_train_images=300, num_replicas=16)


@pytest.mark.parametrize("distribution, instance_type, count, ranks, replicas", [
    ("horovod", "ml.p4d.24xlarge", 2, 8, 16),
    ("horovod", "ml.m5.xlarge", 2, 1, 2),            # --processes-per-host 1 on a CPU type
    ("multi_worker_mirrored", "ml.g5.12xlarge", 3, 1, 12),
    ("parameter_server", "ml.g5.12xlarge", 3, 1, 4),  # one worker's GPUs step together
    ("multi_worker_mirrored", "ml.m5.xlarge", 2, 1, None),  # unknown: the job checks at start
])
def test_the_launcher_counts_a_steps_replicas_as_the_jobs_backend(distribution, instance_type,
                                                                  count, ranks, replicas):
    options = LaunchOptions(instance_type=instance_type, instance_count=count)
    assert plan.step_replicas(distribution, options, ranks) == replicas


def _job_checkpoint_dir(tmp_path, hyperparameters_sent: dict, job_name: str) -> str:
    """Where the job keeps its checkpoints, as it decides at start (sagemaker_env)."""
    from maskrcnn_job import sagemaker_env

    config = tmp_path / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "hyperparameters.json").write_text(json.dumps(hyperparameters_sent))
    env = sagemaker_env.load({"OPT_ML_ROOT": str(tmp_path), "TRAINING_JOB_NAME": job_name})
    return os.path.relpath(sagemaker_env.own_checkpoint_dir(env), env.checkpoint_dir)


def _launcher_checkpoint_folder(hyperparameters_sent: dict, job_name: str) -> str:
    """Where the launcher looks for a finished job's checkpoints (fine-tuning from it), below
    its CheckpointConfig S3Uri, from its DescribeTrainingJob."""
    shared = "s3://bucket/checkpoints/maskrcnn-lr-1/"
    uri = init_from.job_checkpoints({
        "TrainingJobName": job_name, "HyperParameters": hyperparameters_sent,
        "CheckpointConfig": {"S3Uri": shared, "LocalPath": job_io.CHECKPOINT_LOCAL_PATH}})
    return os.path.relpath(uri, shared)


def test_where_a_job_keeps_its_checkpoints_is_the_contracts_on_both_sides(monkeypatch, tmp_path):
    """A tuning job's candidate writes its checkpoints below its job name in the directory its
    candidates share, and the launcher fine-tunes from that folder; a launch keeps them in the
    run's. Both sides by job_io.own_checkpoints: replaced by another rule, both follow it."""
    candidate = {"max_steps": "10", job_io.TUNING_OBJECTIVE_METRIC: "eval/best_objective"}
    launch = {"max_steps": "10"}
    name = "maskrcnn-lr-1-002-0e830ada"
    for sent, folder in ((candidate, name), (launch, ".")):
        assert _job_checkpoint_dir(tmp_path, sent, name) == folder
        assert _launcher_checkpoint_folder(sent, name) == folder
    monkeypatch.setattr(job_io, "own_checkpoints",
                        lambda shared, hps, job: shared.rstrip("/") + "/the-contracts-rule/")
    for sent in (candidate, launch):
        assert _job_checkpoint_dir(tmp_path, sent, name) == "the-contracts-rule"
        assert _launcher_checkpoint_folder(sent, name) == "the-contracts-rule"
