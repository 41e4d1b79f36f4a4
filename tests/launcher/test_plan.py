"""A training launch resolved once (`plan.training_plan`), and the request built from it."""

from maskrcnn_contract import hyperparameters
from maskrcnn_launcher import jobs, plan, submit
from maskrcnn_launcher.options import LaunchOptions

from tests.launcher.conftest import BUCKET, JOB_PREFIX, shared_boto_session


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
