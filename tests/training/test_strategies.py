"""TensorFlow's strategies end to end on 2 emulated hosts under the real SageMaker toolkit: the
same job, inputs and outputs as Horovod's (tests/training/test_job.py), and each strategy's own
failure behaviour. Each first run is the launcher's request, played as SageMaker starts it
(tests/training/playback.py), on a data source of its own (Horovod's is S3):

- multi_worker_mirrored, from EFS: 20 steps; then two local runs that resume them: in one a
  worker fails, in the other worker 1 is stopped (SIGSTOP).
- parameter_server, from FSx: 40 steps during which the worker on algo-2 is killed (the job still
  finishes); then a local run that resumes them and in which ps:1 is stopped (SIGSTOP).
Both first runs evaluate more than once with an early_stopping_min_delta no AP can gain: the best
evaluation is the first, and the export restores its checkpoint over the last weights, under each
strategy (the chief reads it; MWMS hands it to the other worker, PS writes it to the PS tasks),
before the inference copy is refreshed (FIRST_STAYS_BEST). The MWMS run also stops early on that
plateau, both workers at the same step (EARLY_STOP).
The failing runs check the resume too, without paying for an evaluation and an export. A stopped
process writes nothing: the process that waits for it fails the job, naming the stopped one and
its host (docs/operations.md, "A hung job"; Horovod's: test_stall.py): under MWMS worker 0, whose
collectives TensorFlow aborts once worker 1's heartbeats stop (job.peer_lost); under parameter
servers the chief's stall watchdog, from every host's supervisor. A PS that exits instead
(SIGKILL) ends its host at once, naming it: the supervisor's unit test
(test_parameter_server_host.py); the first parameter_server run's killed worker and the MWMS
failing worker cover a task's death and a second host's failure ending the job end to end.
The supervision of one host's tasks is tested with stand-in tasks in test_parameter_server_host,
a failing chief included (its host fails; the failure file is the job's, as under the other
strategies).
"""

import os
import re
import signal
import time

import pytest

from tests.launcher import cli as launcher_cli
from tests.training import job_runs, playback
from tests.training.job_runs import FAILING_TRAIN, measured
from tests.training.learning import assert_the_loss_falls, assert_the_rpn_learns

# Starts training runs (make check leaves it to make test).
pytestmark = pytest.mark.end_to_end

# Measured 2026-11-24 on this 2-core machine, loaded (test_job.py's FAILURE_TO_END_SECONDS):
# from a worker's failure to the job's end 3.6 s (MultiWorkerMirroredStrategy), from a parameter
# server's kill to the job's end 4.1 s.
FAILURE_TO_END_SECONDS = {"multi_worker_mirrored": 30, "parameter_server": 30}
# The parameter-server stall run's step budget (stall_timeout_minutes; the slow phases get 5 min):
# above a step's time with make test's other sessions beside it, under the first steps' tracing.
STALL_BUDGET_MINUTES = 0.25
# TensorFlow's coordination service declares a MultiWorkerMirroredStrategy worker that sent no
# heartbeat for this long lost (its default), and aborts the others'
# collectives: before any stall budget (its source: coordination_service.cc in TensorFlow's XLA/TSL
# tree, `kDefaultHeartbeatTimeoutMs = 10 * 1000`; one abort measured here 10.7 s after the stop).
TF_HEARTBEAT_TIMEOUT_SECONDS = 10
# From the stop to the job's end, beyond the step budget (MWMS: the heartbeat timeout): the
# watchdog's check period (a tenth of the budget), asking the peers (peers.ASK_ALL_TIMEOUT_S at
# most), the failure report, the host's exit and the cluster's teardown. Measured 2026-11-27 on
# this 2-core machine with other sessions' runs beside (load 4 to 6): MWMS 13.7 s from the stop
# to the end (TensorFlow's abort 10.7 s after the stop, in an earlier run), PS 20.2, 19.3 and
# 17.7 s (5.2, 4.3 and 2.7 s beyond the budget).
END_AFTER_BUDGET_SECONDS = {"multi_worker_mirrored": 30, "parameter_server": 30}
# No later AP can beat the first evaluation's by 1.0: the first stays the best and is exported.
FIRST_STAYS_BEST = {"early_stopping_min_delta": "1"}
# MWMS (16 images, 4 steps an epoch: 2 replicas x 2): 25 steps planned, an evaluation every 5
# (1.25 epochs), a patience of 3: the best at step 5, no improvement at 10, 15 and 20, a stop at
# step 20 (as many steps as the run trained before it evaluated: its loss bound and checkpoints).
EARLY_STOP = dict(FIRST_STAYS_BEST, eval_every_epochs="1.25", early_stopping_patience="3")
MIRRORED_MAX_STEPS, MIRRORED_STEPS, MIRRORED_BEST = 25, 20, 5
# PS (8 steps an epoch: a worker's step of 2 at a time): 40 steps, evaluations at 20 (2.5 epochs)
# and 40; the best at 20, exported in place of the last.
PS_STEPS, PS_BEST = 40, 20


def _resume_with_a_failure(work, distribution, max_steps, inject):
    """Resumes the run in `work` with task/rank `inject` = RANK:STEP failing on purpose."""
    run = job_runs.run(work, "--distribution", distribution, "--hosts", "2",
                     "--hp", f"max_steps={max_steps}", "--resume", "--program", FAILING_TRAIN,
                     "--container-env", f"INJECT_FAILURE={inject}")
    assert run.returncode != 0
    return run


def _stop_mirrored_worker(root: int, host: str) -> int:
    """SIGSTOPs the one MultiWorkerMirroredStrategy worker on `host` (the toolkit starts one
    training process a host, with SM_CURRENT_HOST); returns its id."""
    pid = job_runs.process_with(root, f"SM_CURRENT_HOST={host}")
    os.kill(pid, signal.SIGSTOP)
    return pid


def _when(pattern: str, act):
    """For job_runs.run_watching: `act(pid of local_run)` once a line matches `pattern`."""
    def on_line(line: str, root: int) -> bool:
        if re.search(pattern, line):
            act(root)
            return True
        return False
    return on_line


def _exported_best(model_dir, checkpoints, best: int, last: int) -> dict:
    """The SavedModel's values, the best evaluation's checkpoint's (kept apart in
    <checkpoints>/best/) as the ones it must hold, and the last checkpoint's as the ones most of
    them must differ from."""
    return job_runs.exported_values(model_dir, os.path.join(checkpoints, "best", f"ckpt-{best}"),
                                    os.path.join(checkpoints, f"ckpt-{last}"))


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory, launcher_deployment):
    work = tmp_path_factory.mktemp("mwms")
    # No drawing: drawing the predictions is the same code after every strategy (test_job.py).
    first = playback.play_training(launcher_deployment, work, "multi_worker_mirrored", "efs",
                                   max_steps=MIRRORED_MAX_STEPS, hyperparameters=EARLY_STOP)
    assert first.played.succeeded, first.stdout[-5000:]
    snapshot = {host: (job_runs.files(job_runs.opt_ml(work, host) / "checkpoints"),
                       job_runs.files(job_runs.opt_ml(work, host) / "model")) for host in ("algo-1", "algo-2")}
    weights = _exported_best(first.played.model_dir, job_runs.opt_ml(work, "algo-1") / "checkpoints",
                             MIRRORED_BEST, MIRRORED_STEPS)
    return {"work": work, "first": first, "snapshot": snapshot, "weights": weights}


def test_mirrored_the_toolkit_wrote_tf_config_and_the_losses_fall(mirrored):
    output = mirrored["first"].stdout
    assert "Running distributed training job with multi_worker_mirrored_strategy setup" in output
    assert "multi_worker_mirrored: 2 replica(s) per step on 2 host(s)" in output
    assert "mpirun" not in output
    losses = job_runs.losses(output)
    assert len(losses) == 4
    assert_the_loss_falls("multi_worker_mirrored", losses)
    rpn_score_losses = job_runs.losses(output, "rpn_score_loss")
    assert len(rpn_score_losses) == 4
    assert_the_rpn_learns("multi_worker_mirrored", rpn_score_losses)


def test_mirrored_replicas_end_identical_and_evaluate(mirrored):
    from maskrcnn_contract import metrics

    output = mirrored["first"].stdout
    fingerprints = job_runs.fingerprints(output)
    assert len(fingerprints) == 2 and len(set(fingerprints.values())) == 1
    # Evaluated at steps 5, 10, 15 and 20, then stopped early by both workers (a worker that
    # trained on would wait for the other's collectives until the job's end).
    assert output.count("evaluated 8 images") == 4
    assert len(re.findall(metrics.regex_for("eval/segm_AP"), output)) == 4
    assert re.search(rf"early stopping at step {MIRRORED_STEPS}: eval/segm_AP has not improved on "
                     rf"step {MIRRORED_BEST} \(eval/segm_AP \S+\) for 3 evaluations "
                     r"\(early_stopping_patience=3, early_stopping_min_delta=1(\.0)?\)", output), \
        output[-3000:]
    assert f"step {MIRRORED_STEPS + 1}/{MIRRORED_MAX_STEPS}" not in output


def test_mirrored_checkpoints_and_exports_only_the_chiefs_copy(mirrored):
    checkpoints_1, model_1 = mirrored["snapshot"]["algo-1"]
    checkpoints_2, model_2 = mirrored["snapshot"]["algo-2"]
    assert "ckpt-10.index" in checkpoints_1 and "ckpt-20.index" in checkpoints_1
    assert checkpoints_2 == []  # worker 1 saved too, into a scratch directory it removed
    # Worker 1 refreshed its inference copy too (a collective), and wrote nothing to
    # /opt/ml/model: SageMaker aggregates every host's (docs/aws-rules.md SM-10).
    assert model_1 == ["1", "code"] and model_2 == []
    assert sorted(os.listdir(mirrored["first"].played.model_dir)) == ["1", "code"]
    # The chief's copy, restored from the best evaluation's checkpoint: the export holds
    # best/ckpt-5's values, not the last ckpt-20's.
    assert re.search(rf"exporting the best evaluation, step {MIRRORED_BEST} \(eval/segm_AP \S+\); "
                     rf"the last, step {MIRRORED_STEPS}", mirrored["first"].stdout)
    job_runs.assert_exports_the_trained_weights(mirrored["weights"])


def test_mirrored_the_efs_channel_is_the_file_systems_directory(mirrored):
    request, work = mirrored["first"].request, mirrored["work"]
    source, = [c["DataSource"]["FileSystemDataSource"] for c in request["InputDataConfig"]]
    assert source["FileSystemType"] == "EFS" and source["DirectoryPath"] == "/datasets/coco2017"
    assert not (work / "channels").exists()  # mounted, not copied


def test_mirrored_resumes_and_a_failing_worker_fails_the_job_fast(mirrored):
    work = mirrored["work"]
    run = _resume_with_a_failure(work, "multi_worker_mirrored", 30, "1:23")
    assert "resumed from /opt/ml/checkpoints/ckpt-20 at step 20" in run.stdout
    assert re.search(r"failure \(job failure reason\):\n.*worker 1 on algo-2: RuntimeError: "
                     r"injected failure at step 23", run.stdout), run.stdout[-3000:]
    failed_at = (job_runs.opt_ml(work, "algo-2") / "output" / "failure").stat().st_mtime
    seconds = measured("multi_worker_mirrored: failure to the job's end (s)",
                       run.finished_at - failed_at)
    assert seconds < FAILURE_TO_END_SECONDS["multi_worker_mirrored"]


def test_mirrored_a_stopped_worker_fails_the_job_naming_it(mirrored):
    """Worker 1 (algo-2) is stopped once step 25 is logged: worker 0 waits in step 26's
    collectives until TensorFlow's coordination service, which worker 1 no longer sends
    heartbeats, aborts them (TF_HEARTBEAT_TIMEOUT_SECONDS, long before any stall budget: this
    run's is a minute, so that the order is sure). Worker 0 fails naming worker 1 and its host,
    and its status server confirms it frozen (not answering) rather than gone."""
    work = mirrored["work"]
    status, output, stopped_at, ended_at = job_runs.run_watching(
        work, ["--distribution", "multi_worker_mirrored", "--hosts", "2", "--hp", "max_steps=60",
               "--resume", "--hp", "stall_timeout_minutes=1",
               "--hp", "stall_timeout_slow_phases_minutes=5"],
        _when(r"^\[algo-1\].*\bstep 25/60 ", lambda root: _stop_mirrored_worker(root, "algo-2")))
    assert stopped_at is not None, output[-5000:]
    assert "resumed from /opt/ml/checkpoints/ckpt-20 at step 20" in output
    assert status != 0
    assert "stalled: no progress" not in output
    reason = output.split("failure (job failure reason):\n", 1)[1]
    first = reason.splitlines()[0]
    assert first == ("worker 0 on algo-1: PeerLostError: TensorFlow's coordination service lost "
                     "worker 1 on algo-2 (no heartbeats within its timeout); not answering: "
                     "worker 1 on algo-2"), reason[:1500]
    assert (job_runs.opt_ml(work, "algo-1") / "output" / "failure").read_text().startswith(first)
    seconds = measured("multi_worker_mirrored: worker stopped to the job's end (s)",
                       ended_at - stopped_at)
    assert seconds < TF_HEARTBEAT_TIMEOUT_SECONDS + END_AFTER_BUDGET_SECONDS["multi_worker_mirrored"]


@pytest.fixture(scope="module")
def parameter_servers(tmp_path_factory, launcher_deployment):
    work = tmp_path_factory.mktemp("ps")
    killed = {}

    def kill_once(line):
        # The worker on algo-2 is killed once the first progress line is out. The hosts are
        # this process's children (the playback runs them from here).
        if not killed and re.search(r"^\[algo-1\] step 5/40", line):
            try:
                killed["pid"] = job_runs.task_process(os.getpid(), "worker:1")
                os.kill(killed["pid"], signal.SIGKILL)
                killed["at"] = time.time()
            except AssertionError as error:  # raised in the hosts' output reader: kept for below
                killed["error"] = str(error)

    first = playback.play_training(launcher_deployment, work, "parameter_server", "fsx",
                                   max_steps=PS_STEPS, on_line=kill_once,
                                   hyperparameters=dict(FIRST_STAYS_BEST,
                                                        eval_every_epochs="2.5"))
    assert first.played.succeeded, first.stdout[-6000:]
    assert "pid" in killed, f"worker:1 was not killed: {killed}"
    snapshot = {host: (job_runs.files(job_runs.opt_ml(work, host) / "checkpoints"),
                       job_runs.files(job_runs.opt_ml(work, host) / "model")) for host in ("algo-1", "algo-2")}
    weights = _exported_best(first.played.model_dir, job_runs.opt_ml(work, "algo-1") / "checkpoints",
                             PS_BEST, PS_STEPS)
    return {"work": work, "first": first.stdout, "killed_at": killed["at"], "snapshot": snapshot,
            "run": first, "weights": weights}


def test_parameter_servers_finish_after_losing_a_worker(parameter_servers):
    output = parameter_servers["first"]
    assert parameter_servers["killed_at"] is not None
    assert "worker worker:1 on algo-2 was killed by signal SIGKILL; restarting it (1/3)" in output
    assert job_runs.steps(output)[-1] >= 40
    assert_the_loss_falls("parameter_server", job_runs.losses(output))
    assert_the_rpn_learns("parameter_server", job_runs.losses(output, "rpn_score_loss"))
    assert "algo-1: exit status 0" in output and "algo-2: exit status 0" in output


def test_parameter_servers_chief_trains_on_the_jobs_own_cluster(parameter_servers):
    output = parameter_servers["first"]
    # The job's own TF2 cluster, not the toolkit's TF1 one (no `master` task).
    assert "Running distributed training job with parameter servers" not in output
    assert "algo-1: started chief:0" in output and "algo-2: started ps:1" in output
    assert "parameter_server: 1 replica(s) per step on 2 host(s)" in output
    assert output.count("evaluated 8 images") == 2


def test_parameter_servers_export_the_values_the_ps_tasks_trained(parameter_servers):
    """The chief's one fingerprint says nothing (one copy of the variables, by construction):
    what could differ is what it exported. Its SavedModel holds exactly best/ckpt-20's values
    (the best evaluation's, restored into the PS tasks' variables and read back through the
    chief at the end), and those differ from the last ckpt-40's: a stale or unrefreshed inference
    copy, or values that never reached the PS tasks, fail it."""
    assert len(job_runs.fingerprints(parameter_servers["first"])) == 1
    assert re.search(rf"exporting the best evaluation, step {PS_BEST} \(eval/segm_AP \S+\); "
                     rf"the last, step {PS_STEPS}", parameter_servers["first"])
    job_runs.assert_exports_the_trained_weights(parameter_servers["weights"])


def test_parameter_servers_checkpoint_on_the_chief_and_export(parameter_servers):
    checkpoints_1, model_1 = parameter_servers["snapshot"]["algo-1"]
    checkpoints_2, model_2 = parameter_servers["snapshot"]["algo-2"]
    # Written through the chief (io_device), though the variables live on both hosts' PS.
    assert "ckpt-40.index" in checkpoints_1 and checkpoints_2 == []
    assert model_1 == ["1", "code"] and model_2 == []  # the chief alone exports


def test_parameter_servers_the_fsx_channel_is_below_the_mount_name(parameter_servers):
    """FSX-4: the request's DirectoryPath starts with /<mount name>/, which the playback maps to
    the file system's root (it refuses a path that does not)."""
    request = parameter_servers["run"].request
    source, = [c["DataSource"]["FileSystemDataSource"] for c in request["InputDataConfig"]]
    assert source["FileSystemType"] == "FSxLustre"
    assert source["DirectoryPath"] == "/abcd1234/datasets/coco2017"


def test_parameter_servers_resume_and_a_stopped_ps_fails_the_job_naming_it(parameter_servers):
    """ps:1 (algo-2) is stopped once the resumed run logs its first steps: the workers' steps
    wait for its variables, the chief's watchdog fires, and every host's supervisor says how its
    tasks are: ps:1 stopped."""
    work = parameter_servers["work"]
    status, output, stopped_at, ended_at = job_runs.run_watching(
        work, ["--distribution", "parameter_server", "--hosts", "2", "--hp", "max_steps=200",
               "--resume", "--hp", f"stall_timeout_minutes={STALL_BUDGET_MINUTES}",
               "--hp", "stall_timeout_slow_phases_minutes=5"],
        _when(r"^\[algo-1\] step \d+/200",
              lambda root: os.kill(job_runs.task_process(root, "ps:1"), signal.SIGSTOP)))
    assert re.search(r"resumed from /opt/ml/checkpoints/ckpt-4\d at step 4\d", output), \
        output[-3000:]
    assert status != 0
    assert stopped_at is not None
    reason = output.split("failure (job failure reason):\n", 1)[1]
    first = reason.splitlines()[0]
    assert re.fullmatch(r"chief 0 on algo-1 stalled: no progress for 0\.(2[5-9]|3\d) min in "
                        r"phase train \(last finished step \d+\); stopped by a signal: ps:1 on "
                        r"algo-2; answering: the supervisor on algo-1 \(running: ps:0, worker:0, "
                        r"chief:0\), the supervisor on algo-2 \(running: worker:1\)", first), \
        reason[:1500]
    assert (job_runs.opt_ml(work, "algo-1") / "output" / "failure").read_text().startswith(first)
    seconds = measured("parameter_server: PS stopped to the job's end (s)", ended_at - stopped_at)
    assert seconds < STALL_BUDGET_MINUTES * 60 + END_AFTER_BUDGET_SECONDS["parameter_server"]


# --- runs side by side: the two played jobs in the launcher's `runs` and `compare` ---------------

RUNS_COLUMNS = ("job", "status", "created", "dataset", "distribution", "instances",
                "hyperparameters", "tuning job", "training h", "instance-hours", "cost", "mask AP",
                "best", "worst class")


def _completed_as_played(fake, run) -> tuple:
    """The played request sent to the fake deployment (moto ends it Completed at once), with what
    the play made in place of what the fake job writes: its model.tar.gz, its log (SageMaker's
    final metric values are read from it), its TensorBoard output. Returns (job, its report)."""
    import io
    import json
    import tarfile
    from pathlib import Path

    from maskrcnn_contract.evaluation_report import MODEL_REPORT_DIR, REPORT_FILE
    from maskrcnn_contract.s3_objects import split_s3_uri

    from maskrcnn_local import sagemaker_job

    request, job = run.request, run.request["TrainingJobName"]
    s3, logs = fake.client("s3"), fake.client("logs")
    model_key = sagemaker_job.model_s3_uri(request).split("/", 3)[3]
    archive = s3.get_object(Bucket=fake.bucket, Key=model_key)["Body"].read()
    fake.client("sagemaker").create_training_job(**request)
    s3.put_object(Bucket=fake.bucket, Key=model_key, Body=archive)
    _, prefix = split_s3_uri(request["TensorBoardOutputConfig"]["S3OutputPath"])
    prefix += f"{job}/tensorboard-output/"
    for key in fake.keys(prefix):
        s3.delete_object(Bucket=fake.bucket, Key=key)
    fake.put_directory(run.tensorboard, prefix)
    assert fake.keys(prefix), f"the play left no TensorBoard output in {run.tensorboard}"
    group = "/aws/sagemaker/TrainingJobs"
    for stream in logs.describe_log_streams(logGroupName=group,
                                            logStreamNamePrefix=job + "/")["logStreams"]:
        logs.delete_log_stream(logGroupName=group, logStreamName=stream["logStreamName"])
    stream, now = f"{job}/algo-1-{int(time.time())}", int(time.time() * 1000)
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    for start in range(0, len(lines), 2000):
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
            {"timestamp": now + start + i, "message": line}
            for i, line in enumerate(lines[start:start + 2000])])
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member, = [m for m in tar.getmembers()
                   if m.name.lstrip("./") == f"{MODEL_REPORT_DIR}/{REPORT_FILE}"]
        report = json.loads(tar.extractfile(member).read())
    assert Path(run.tensorboard).is_dir()
    return job, report


def _tensorflow_scalars(directory) -> dict:
    """{tag: [(step, value)]} of the scalars in the event files below `directory`, read by
    TensorFlow's own reader: the reference the launcher's reader (no TensorFlow) is held to."""
    from pathlib import Path

    import tensorflow as tf

    curves = {}
    for path in sorted(Path(directory).rglob("*tfevents*"), key=lambda p: p.name):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "scalars":
                    curves.setdefault(value.tag, {})[event.step] = float(
                        tf.make_ndarray(value.tensor))
    return {tag: sorted(points.items()) for tag, points in curves.items()}


def _cell(header: str, line: str, column: str) -> str:
    start = header.index(column)
    later = [header.index(c) for c in RUNS_COLUMNS if header.index(c) > start]
    return line[start:min(later) if later else None].strip()


def test_runs_and_compare_show_the_played_jobs_figures(mirrored, parameter_servers,
                                                       launcher_deployment, tmp_path):
    """`runs` and `compare` on the two played jobs, Completed in the fake deployment with their
    own model.tar.gz (the evaluation report), log (SageMaker's final metrics) and TensorBoard
    output: the table's mask AP and worst class are the reports', its settings the requests';
    the compared curves are TensorFlow's own reading of the jobs' event files, the per-class AP
    the reports'. The picture is checked here as a PNG only: that it draws exactly the compared
    curves and per-class AP is tests/launcher/test_runs.py's
    test_the_compare_figure_draws_each_jobs_curves_and_per_class_ap."""
    from maskrcnn_contract import metrics

    fake = launcher_deployment
    played = {"multi_worker_mirrored": (mirrored["first"], "efs", MIRRORED_MAX_STEPS),
              "parameter_server": (parameter_servers["run"], "fsx", PS_STEPS)}
    jobs = {}
    for distribution, (run, source, steps) in played.items():
        jobs[distribution] = _completed_as_played(fake, run) + (run, source, steps)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    environment.update(fake.environment(), MASKRCNN_REPORTS_DIR=str(tmp_path / "reports"),
                       MASKRCNN_TENSORBOARD_DIR=str(tmp_path / "tensorboard"))

    def cli(*args):
        result = launcher_cli.run(environment, *args, timeout=300)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        return result.stdout.splitlines()

    lines = cli("runs", "--dataset", "coco2017")
    header = lines[0]
    for distribution, (job, report, run, source, steps) in jobs.items():
        line, = [line for line in lines if line.startswith(job + " ")]
        cell = lambda column: _cell(header, line, column)  # noqa: E731
        assert cell("status") == "Completed" and cell("distribution") == distribution
        assert cell("dataset") == f"coco2017 ({source})"
        assert cell("instances") == "2 x ml.m5.xlarge"
        assert f"max_steps={steps} " in cell("hyperparameters") + " "
        segm = report["tasks"]["segm"]
        assert cell("mask AP") == f"{segm['summary']['AP']:.3f}"
        # The exported (best) evaluation's, through SageMaker's metric definitions on the log.
        assert run.final[metrics.BEST_OBJECTIVE] == pytest.approx(segm["summary"]["AP"],
                                                                  abs=1e-4)
        worst = min((row["AP"], k, row["name"]) for k, row in enumerate(segm["per_class"])
                    if row["AP"] is not None)
        assert cell("worst class") == f"{worst[2]} {worst[0]:.3f}"
        if metrics.BEST_OBJECTIVE in run.final:
            assert cell("best").startswith(f"{run.final[metrics.BEST_OBJECTIVE]:.3f}")
        assert cell("instance-hours") != "-" and cell("cost") == "unknown"

    (first, *_), (second, *_) = jobs["multi_worker_mirrored"], jobs["parameter_server"]
    picture = tmp_path / "compare.png"
    lines = cli("compare", first, second, "--out", str(picture))
    assert lines[:2] == [f"J1 = {first}", f"J2 = {second}"]
    assert picture.read_bytes()[:4] == b"\x89PNG" and f"picture: {picture}" in lines
    curves = {label: _tensorflow_scalars(jobs[d][2].tensorboard)
              for label, d in (("J1", "multi_worker_mirrored"), ("J2", "parameter_server"))}
    compared = [line.split() for line in lines[3:] if line.split()[1:2] in (["J1"], ["J2"])]
    assert {tag for tag, *_ in compared} >= {"train/loss", "eval/segm_AP", "eval/bbox_AP"}
    for tag, label, *figures in compared:
        points = curves[label].get(tag, [])
        values = [value for _, value in points]
        expected = [str(len(points)), f"{points[0][0]}-{points[-1][0]}",
                    *(f"{v:.4g}" for v in (values[0], values[-1], min(values), max(values)))] \
            if points else ["0", "-"]
        assert figures == expected, (tag, label)
    assert len(curves["J1"]["train/loss"]) == 4 and len(curves["J2"]["train/loss"]) >= 4
    per_class = lines[lines.index(next(line for line in lines if line.startswith("mask AP"))):]
    reports = (jobs["multi_worker_mirrored"][1], jobs["parameter_server"][1])
    for k, row in enumerate(reports[0]["tasks"]["segm"]["per_class"]):
        aps = [r["tasks"]["segm"]["per_class"][k]["AP"] for r in reports]
        assert per_class[1 + k].split() == [
            row["name"], *("-" if ap is None else f"{ap:.3f}" for ap in aps)]
