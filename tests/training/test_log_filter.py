"""TensorFlow's start-up lines out of what local_run prints (local_run.STARTUP_LINES): exactly
those, wherever they come from, and nothing else, a real warning or error of the same libraries
included. No training run: the lines are the ones TensorFlow 2.21 prints here, and one TensorFlow
import checks that they still are."""

import os
import subprocess
import sys

from maskrcnn_local import local_run

# As TensorFlow 2.21 prints them on a machine without a GPU (its import, twice each; the first
# step, once), and as an emulated host's echo of its toolkit's tagged mpirun output shows them.
ABSL_NOTICE = ("WARNING: All log messages before absl::InitializeLog() is called are written to "
               "STDERR")
ONEDNN_ON = (
    "I0000 00:00:1796647229.044019    9904 port.cc:153] oneDNN custom operations are on. You may "
    "see slightly different numerical results due to floating-point round-off errors from "
    "different computation orders. To turn them off, set the environment variable "
    "`TF_ENABLE_ONEDNN_OPTS=0`.")
NO_CUDA_DRIVER = ("I0000 00:00:1796647229.046872    9904 cudart_stub.cc:31] Could not find cuda "
                  "drivers on your machine, GPU will not be used.")
ONEDNN_FALLBACK = ("E0000 00:00:1796647301.552210   10021 util.cc:131] oneDNN supports DT_BOOL "
                   "only on platforms with AVX-512. Falling back to the default Eigen-based "
                   "implementation if present.")
KNOWN = [ABSL_NOTICE, ONEDNN_ON, NO_CUDA_DRIVER, ONEDNN_FALLBACK]

# The same libraries' lines that say something: kept.
NEWS = [
    # A real error of the same file and prefix as a known line.
    "E0000 00:00:1796647301.552210   10021 util.cc:131] Invalid argument: shapes must be equal",
    # A known line with more after it, and one cut short (two ranks' lines interleaved).
    ONEDNN_FALLBACK + " And then something else.",
    ONEDNN_ON[:80],
    # Grappler's warning through absl, and a Python warning.
    "W0000 00:00:1796647310.123456   10021 op_level_cost_estimator.cc:699] Error in PredictCost() "
    "for the op: op: \"CropAndResize\"",
    "/opt/ml/code/maskrcnn_job/job.py:88: UserWarning: something the job's reader should see",
    # The job's own lines.
    "step 50/1200 epoch 1 loss 2.3141 lr 0.04000 4.1 img/s ETA 14:02",
    "eval/segm_AP: 0.1234",
]


def test_exactly_the_known_lines_are_startup_lines():
    for line in KNOWN:
        assert local_run.startup_line(line + "\n", gpu=False), line
    for line in NEWS:
        assert not local_run.startup_line(line + "\n", gpu=False), line


def test_where_there_is_a_gpu_the_missing_driver_is_news():
    assert not local_run.startup_line(NO_CUDA_DRIVER, gpu=True)
    assert all(local_run.startup_line(line, gpu=True) for line in KNOWN if line != NO_CUDA_DRIVER)


def test_from_an_emulated_host_and_a_tagged_rank_too():
    for line in KNOWN:
        assert local_run.startup_line(f"[algo-2] [1,1]<stderr>:{line}\n", gpu=False)
        assert local_run.startup_line(f"[algo-1] {line}\n", gpu=False)
    assert not local_run.startup_line(f"[algo-1] [1,0]<stderr>:{NEWS[0]}\n", gpu=False)


def test_the_jobs_output_keeps_every_other_line_and_its_metrics(capsys, monkeypatch):
    monkeypatch.setattr(local_run, "gpu_device", lambda: False)
    # A known line before each of the first lines of news, then the rest of the news.
    interleaved = [line for pair in zip(KNOWN, NEWS[:len(KNOWN)], strict=True) for line in pair]
    output = [line + "\n" for line in interleaved + NEWS[len(KNOWN):]]
    final = {}
    local_run._stream(output, final)
    assert capsys.readouterr().out.splitlines() == NEWS
    assert final == {"eval/segm_AP": 0.1234}


def test_this_processs_stderr_loses_only_the_known_lines(capfd, monkeypatch):
    """What C++ code writes to file descriptor 2 while the block runs (as TensorFlow's, imported
    in local_run's drawing), in its order."""
    monkeypatch.setattr(local_run, "gpu_device", lambda: False)
    with local_run.startup_lines_dropped_from_stderr():
        for line in [KNOWN[0], NEWS[0], KNOWN[1], KNOWN[2], NEWS[1], KNOWN[3], NEWS[2]]:
            os.write(2, (line + "\n").encode())
    assert capfd.readouterr().err.splitlines() == NEWS[:3]


def test_tensorflows_import_prints_only_known_lines():
    """TensorFlow's import, as the job's processes import it (local_run's settings): every line
    is a known one. A TensorFlow that prints another start-up line fails here, to be judged and,
    if harmless, added to STARTUP_LINES."""
    environment = dict(os.environ, **local_run.tensorflow_environment())
    run = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True,
                         text=True, timeout=300, env=environment)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = (run.stdout + run.stderr).splitlines()
    assert lines, "TensorFlow printed nothing: the start-up lines are gone, and so can the filter"
    assert [line for line in lines if not local_run.startup_line(line)] == []
