"""A training launch resolved once (`plan.training_plan`), and the request built from it."""

import dataclasses
import re

import pytest

from maskrcnn_contract import hyperparameters
from maskrcnn_launcher.training import jobs, plan, submit
from maskrcnn_launcher.training.options import LaunchOptions, LaunchRequestError

from tests.launcher.conftest import BUCKET, JOB_PREFIX, NOTEBOOKS, shared_boto_session
from tests.launcher.fake_aws import STAGED_INFO
from tests.launcher.cli import cli
from tests.launcher.test_datasets import stage


def test_a_plan_holds_every_choice_of_the_launch_and_the_request_carries_it(fake_aws,
                                                                           deployment):
    options = LaunchOptions(data_source="efs", instance_type="ml.g5.12xlarge",
                            distribution="parameter_server", use_pretrained=False,
                            run_name="trial-3", hyperparameters={"max_steps": "100"})
    resolved = plan.training_plan(deployment, options, fake_aws.client("s3"))
    assert (resolved.distribution, resolved.ranks_per_host) == ("parameter_server", 1)
    assert resolved.hyperparameters.max_steps == 100
    # No pretrained statistics and no synchronous step: the contract's fallback, said so.
    assert resolved.hyperparameters.batch_norm == "per_rank"
    assert resolved.sent_hyperparameters == {"max_steps": "100", "batch_norm": "per_rank",
                                             "distribution": "parameter_server"}
    assert resolved.channels == (
        plan.Channel("train", "/datasets/coco2017", "EFS", deployment.efs_id),)
    assert resolved.base_job_name == f"{JOB_PREFIX}-trial-3"
    assert resolved.checkpoint_s3_uri == f"s3://{BUCKET}/checkpoints/{JOB_PREFIX}-trial-3/"
    assert resolved.notes[0] == plan.FROM_SCRATCH_WARNING
    assert resolved.notes[1].startswith("batch_norm=per_rank: ")

    said = []
    launch = jobs.training_job(deployment, options, shared_boto_session(), echo=said.append)
    assert said == list(resolved.notes)
    request = submit.send(launch, deployment, dry_run=True)
    # What the job will parse from the request is what the plan parsed.
    assert hyperparameters.parse(hyperparameters.decode(request["HyperParameters"])) == \
        launch.plan.hyperparameters == resolved.hyperparameters


def test_a_launch_parses_the_users_hyperparameters_once(deployment, monkeypatch):
    """"Once" is per party: the launcher resolves the user's hyperparameters once, in the plan,
    and everything it builds from them (batch norm, the pretrained channel's backbone, the sent
    dictionary) reads that one result. The request check then parses what the SDK actually sends,
    once, with the job's own parser: that is the job's view of the request, not the launcher
    parsing the user's input again, so it is counted apart and asserted to see the sent dict."""
    calls = []
    real_parse = hyperparameters.parse

    def counting_parse(raw):
        calls.append(dict(raw))
        return real_parse(raw)

    monkeypatch.setattr(hyperparameters, "parse", counting_parse)
    options = LaunchOptions(data_source="s3", distribution="multi_worker_mirrored",
                            hyperparameters={"max_steps": "1000", "batch_norm": '"sync"'})
    launch = jobs.training_job(deployment, options, shared_boto_session())
    assert len(calls) == 1, calls
    assert calls[0] == {"max_steps": 1000, "batch_norm": "sync",
                        "distribution": "multi_worker_mirrored"}
    assert launch.plan.hyperparameters.batch_norm == "sync"

    request = submit.send(launch, deployment, dry_run=True)
    assert len(calls) == 2, calls
    assert calls[1] == hyperparameters.decode(request["HyperParameters"])


def _stage_parts(fake_aws, train_images: int) -> None:
    splits = {"train": {"num_images": train_images, "num_instances": 3 * train_images,
                        "shards": []},
              "val": {"num_images": 50, "num_instances": 150, "shards": []}}
    stage(fake_aws.client("s3"), "parts", dict(STAGED_INFO, splits=splits))


def test_a_warmup_past_the_end_of_the_run_is_refused_before_anything_is_sent(fake_aws):
    """The fine-tune recipe training_code/README.md gave (warmup_steps=500, "for a few hundred
    images") on 300 images and the default 2 x 8 GPUs: an 80-step run that the job trained in
    warmup only. The launcher knows the run's length from the staged dataset_info.json and
    refuses it, exit 2, by the contract's rule (the job's at start: tests/contract)."""
    _stage_parts(fake_aws, 300)
    before = len(fake_aws.requests_since(0))
    result = cli(fake_aws, "launch", "--dataset", "parts", "--hp", "epochs=8",
                 "--hp", "lr_decay_epochs=7", "--hp", "warmup_steps=500")
    assert result.returncode == 2, result.stdout + result.stderr
    assert ("hyperparameter warmup_steps=500: this run is 80 steps (epochs=8 x 10 steps per "
            "epoch, for 300 training images in global batches of 32: images_per_gpu=2 x 16 "
            "replicas)") in result.stderr
    assert "allowed: warmup_steps from 0 to 79 for this run" in result.stderr
    assert fake_aws.requests_since(before) == []


def test_an_evaluation_period_under_one_step_is_refused_and_a_cut_warmup_said(fake_aws,
                                                                             deployment):
    _stage_parts(fake_aws, 300)
    options = LaunchOptions(dataset="parts", hyperparameters={"eval_every_epochs": "0.05",
                                                              "max_steps": "60"})
    with pytest.raises(LaunchRequestError) as refused:
        plan.training_plan(deployment, options, fake_aws.client("s3"))
    assert "hyperparameter eval_every_epochs=0.05: this run is 60 steps (max_steps=60; an " \
           "epoch is 10 steps" in str(refused.value)
    assert "allowed: 0 (only at the end) or at least 0.1 (one step)" in str(refused.value)
    # A run cut short by max_steps keeps the default warmup (500), cut to its 60 steps: said.
    options = dataclasses.replace(options, hyperparameters={"max_steps": "60"})
    notes = plan.training_plan(deployment, options, fake_aws.client("s3")).notes
    assert "warning: warmup_steps=500 is longer than this run (max_steps=60): the learning " \
           "rate warms up over all 60 steps instead (warmup_steps=60)" in notes[-1]


def _readme_fine_tune_launch():
    """The instance and hyperparameter options of training_code/README.md's fine-tune command."""
    text = (NOTEBOOKS.parent / "training_code" / "README.md").read_text()
    section = text.split("## Fine-tuning from an earlier run", 1)[1]
    command = section.split("```", 2)[1].replace("\\\n", " ")
    args = re.sub(r"<[^>]*>", "JOB", command).split()
    hps = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--hp")
    return (args[args.index("--instance-type") + 1], int(args[args.index("--instances") + 1]),
            hps)


def test_the_readmes_fine_tune_recipe_fits_a_few_hundred_images(fake_aws, deployment):
    instance_type, count, hps = _readme_fine_tune_launch()
    _stage_parts(fake_aws, 300)
    options = LaunchOptions(dataset="parts", instance_type=instance_type, instance_count=count,
                            hyperparameters=hps)
    resolved = plan.training_plan(deployment, options, fake_aws.client("s3"))
    assert not [note for note in resolved.notes if "warmup" in note]
    # The recipe's warmup, as the README sizes it: about a sixth of the run (MMDetection's 500 of
    # about 3,000 iterations).
    length = hyperparameters.run_length(resolved.hyperparameters, 300,
                                        plan.step_replicas(resolved.distribution, options,
                                                           resolved.ranks_per_host))
    assert 0.1 < resolved.hyperparameters.warmup_steps / length.total_steps < 0.25
