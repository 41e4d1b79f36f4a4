"""benchmarks/report.py: the JSON files of one `make bench` run -> docs/benchmarks.md (fast: a
small fixture, the renderer run as `make bench` runs it)."""

import json
import os
import subprocess
import sys

import pytest
from tests.paths import REPO

REPORT = os.path.join(REPO, "benchmarks", "report.py")
MACHINE = "Test CPU, 2 cores, 24 GiB, Debian 12, Python 3.11.7, TensorFlow 2.21.0, Horovod 0.28.1"


def _envelope(benchmark: str, command: str, smoke: bool = False) -> dict:
    return {"benchmark": benchmark, "date": "2026-01-02", "machine": MACHINE,
            "command": command, "smoke": smoke, "seconds": 90.0}


DATASET = {"train_images": 400, "val_images": 50, "image_size": 128, "difficulty": "hard",
           "generator": 4}
TIMING = {"workers": 1, "images_per_step": 2, "images_per_sec": 5.5, "step_s": 0.361,
          "comm_s": 0.0, "parameters": 12_400_000, "parse_images_per_sec_per_rank": 4682.0,
          "input_images_per_sec_per_rank": 5362.0, "hosts": 1, "cpu_user_s": 47.5,
          "cpu_sys_s": 9.7, "minor_faults": 3_460_000}


def _fixture() -> dict:
    demo = dict(_envelope("demo_accuracy", "python benchmarks/demo_accuracy.py"),
                hyperparameters={"backbone": "resnet18", "base_learning_rate": "0.04"},
                ranks=2, global_batch=4, dataset=DATASET, local_run_seconds=1000.0,
                evaluations=[{"step": 400, "eval/segm_AP": 0.0971, "eval/segm_AP50": 0.176,
                              "eval/bbox_AP": 0.107, "eval/bbox_AP50": 0.189},
                             {"step": 1200, "eval/segm_AP": 0.2124, "eval/segm_AP50": 0.336,
                              "eval/bbox_AP": 0.239, "eval/bbox_AP50": 0.359}],
                final={"eval/segm_AP": 0.2124, "eval/segm_AP50": 0.336, "eval/bbox_AP": 0.239,
                       "eval/bbox_AP50": 0.359})
    two_hosts = dict(TIMING, workers=2, images_per_sec=7.8, step_s=0.511, comm_s=0.096,
                     images_per_step=4, hosts=2)
    cpu = dict(_envelope("cpu_scaling", "python benchmarks/cpu_scaling.py --smoke", smoke=True),
               settings={"steps": 4, "chunk": 2, "warmup": 2, "budget": 5, "hp": [], "env": {},
                         "runs": ["horovod-1x1", "horovod-2h"]},
               dataset=DATASET, common_hyperparameters=["batch_norm=per_rank"],
               ap_hyperparameters=["base_learning_rate=0.01"],
               timing={"horovod-1x1": TIMING, "horovod-2h": two_hosts},
               ap={"horovod": {"steps": 10, "run_s": 248.0, "segm_AP": 0.02, "bbox_AP": 0.022}},
               figures={"horovod": {"images_per_sec_1": 5.5, "comm_share_1": 0.0,
                                    "images_per_sec_2": 7.8, "step_s_2": 0.511, "comm_ms_2": 96.0,
                                    "comm_share_2": 0.188, "images_per_step_2": 4,
                                    "scaling_efficiency": 0.709, "ap_steps": 10,
                                    "ap_run_s": 248.0, "ap_segm_AP": 0.02, "ap_bbox_AP": 0.022,
                                    "budget_s": 5},
                        "multi_worker_mirrored": {}, "parameter_server": {}})
    converter = dict(_envelope("converter_speed", "python benchmarks/converter_speed.py"),
                     images=2000, image_size=256, workers=2, repeats=3,
                     dataset={"difficulty": "easy", "generator": 4}, cores=2,
                     all_seconds={"model_garden": [9.0, 9.4, 8.8], "ours": [2.6, 2.7, 2.5]},
                     model_garden={"seconds": 9.0, "cpu_seconds": 11.8, "tfrecord_mb": 73.8},
                     ours={"seconds": 2.6, "cpu_seconds": 4.8, "tfrecord_mb": 75.2},
                     speed_ratio=3.46)
    task = {"stats": [0.25] + [0.5] * 11, "per_class": {}, "seconds": 0.2}
    case = {"name": "the demo's model", "images": 50, "detections": 1200,
            "pycocotools": {"bbox": dict(task, stats=[0.2391] + [0.5] * 11), "segm": task},
            "faster_coco_eval": {"bbox": dict(task, stats=[0.2391] + [0.5] * 11), "segm": task},
            "seconds": {"pycocotools": 1.234, "faster-coco-eval": 0.201},
            "max_abs_difference": 5.5e-17, "equal_at_printed_precision": True, "speedup": 6.14}
    coco_eval = dict(_envelope("coco_eval_speed", "python benchmarks/coco_eval_speed.py"),
                     repeats=3, cases=[case], equal_at_printed_precision=True,
                     versions={"pycocotools": "pycocotools 2.0.11",
                               "faster-coco-eval": "faster-coco-eval 1.8.0"},
                     demo_run={"last_evaluation_coco_eval_s": 1.5,
                               "last_evaluation_inference_s": 20.0, "evaluations": 4,
                               "run_seconds": 1000.0, "share_of_run": 0.006})
    large = dict(_envelope("large_images", "python benchmarks/large_images.py --model "
                                           "build/bench/demo/opt_ml/model"),
                 model=os.path.join(REPO, "build", "bench", "demo", "opt_ml", "model"),
                 rows=[{"width": 640, "height": 480, "jpeg_mb": 0.15,
                        "convert": {"seconds": 0.11, "peak_rss_mb": 41.3, "detections": None},
                        "predict": {"seconds": 11.43, "peak_rss_mb": 1094.4, "detections": 9},
                        "predict_batch": {"seconds": 14.2, "peak_rss_mb": 1105.1,
                                          "detections": 9}},
                       {"width": 8000, "height": 6000, "jpeg_mb": 22.35,
                        "convert": {"seconds": 1.11, "peak_rss_mb": 190.8, "detections": None},
                        "predict": {"seconds": 24.81, "peak_rss_mb": 2951.5, "detections": 2},
                        "predict_batch": {"failed": "MemoryError"}}])
    return {"demo_accuracy": demo, "cpu_scaling": cpu, "converter_speed": converter,
            "coco_eval_speed": coco_eval, "large_images": large}


def _write(directory, records: dict) -> None:
    for name, record in records.items():
        (directory / f"{name}.json").write_text(json.dumps(record))


def _report(results, out):
    return subprocess.run([sys.executable, REPORT, str(results), "--out", str(out)],
                          capture_output=True, text=True, timeout=60)


def _sections(text: str) -> dict:
    parts = text.split("\n## ")
    return {part.split("\n", 1)[0]: part for part in parts[1:]}


def test_each_section_is_one_run_with_its_date_machine_and_command(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    _write(results, _fixture())
    out = tmp_path / "benchmarks.md"
    done = _report(results, out)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("# Benchmarks\n") and "Written by `make bench`" in text
    sections = _sections(text)
    assert list(sections) == ["`make demo`'s accuracy",
                              "Training on CPU: the three distributions side by side",
                              "COCO converter speed",
                              "COCO evaluation: pycocotools and faster-coco-eval",
                              "Large images: conversion and predictions"]
    for section, command in zip(sections.values(), (
            "benchmarks/demo_accuracy.py", "benchmarks/cpu_scaling.py --smoke",
            "benchmarks/converter_speed.py", "benchmarks/coco_eval_speed.py",
            "benchmarks/large_images.py --model build/bench/demo/opt_ml/model")):
        assert f"Measured 2026-01-02 on {MACHINE}, in 1.5 min, by `python {command}`." in section
    demo, cpu, converter, coco_eval, large = sections.values()
    assert "the model (`build/bench/demo/opt_ml/model`)" in large
    assert ("| 640 x 480 (0.3 MP) | 0.15 MB | 0.1 s, 41 MB | 11.4 s, 1,094 MB (9 detections) "
            "| 14.2 s, 1,105 MB (9 detections) |") in large
    assert ("| 8000 x 6000 (48.0 MP) | 22.35 MB | 1.1 s, 191 MB | 24.8 s, 2,952 MB "
            "(2 detections) | failed: MemoryError |") in large
    assert "| 400 | 4.0 | 0.097 | 0.176 | 0.107 | 0.189 |" in demo
    assert "| 1200 | 12.0 | 0.212 | 0.336 | 0.239 | 0.359 |" in demo
    assert "| final (printed) | – | 0.212 | 0.336 | 0.239 | 0.359 |" in demo
    assert "`base_learning_rate=0.04`" in demo and "400 training and 50 validation" in demo
    # Only the smoke run says its figures mean nothing, and the page says it holds one.
    assert "mean nothing" in cpu and "mean nothing" not in demo + converter
    assert "This page holds a smoke run" in text
    assert "| images/s, 2 workers (2 emulated hosts x 1 process) | 7.8 | – | – |" in cpu
    assert "| scaling efficiency (2 workers / twice 1 worker) | 0.71 | – | – |" in cpu
    assert "| communication share, 1 worker | – | – | – |" in cpu
    assert "| steps in 5 s of training (images per step) | 10 (4) | – | – |" in cpu
    assert "Hyperparameters of every run: `batch_norm=per_rank`." in cpu
    assert "The model: 12.4M trainable parameters (50 MB of fp32 gradients per step)." in cpu
    assert "| 1 x 1 | 0.361 | 5.5 | – | – | 4682 / 5362 | 5.5 |" in cpu
    # The one-host runs' CPU time and page faults; the 2-host run's are incomplete, not shown.
    assert "| `horovod-1x1` | 48 | 9.7 | 17% | 3.46 |" in cpu and "`horovod-2h` |" not in cpu
    assert ("| Model Garden `create_coco_tf_record` | 9.0 s | 11.8 s | 73.8 MB |" in converter)
    assert "**3.46x**" in converter and "9.0, 9.4, 8.8 s" in converter
    assert "3 alternating runs each, the median" in converter
    assert ("| the demo's model | 50 | 1200 | 0.250 | 0.250 | 0.239 | 0.239 | 5.5e-17 | yes "
            "| 1.234 s | 0.201 s | 6.1x |") in coco_eval
    assert "pycocotools 2.0.11 (the reference) and faster-coco-eval 1.8.0" in coco_eval
    assert "about 0.6% of its 16.7 min" in coco_eval


def test_a_run_without_ap_shows_no_ap_rows(tmp_path):
    records = {"cpu_scaling": _fixture()["cpu_scaling"]}
    records["cpu_scaling"]["settings"]["budget"] = 0
    _write(tmp_path, records)
    done = _report(tmp_path, tmp_path / "out.md")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out.md").read_text()
    assert "AP" not in text.split("| 2 workers on this machine")[1]


@pytest.mark.parametrize("case", ["empty", "two machines"])
def test_results_that_are_not_one_run_are_refused(tmp_path, case):
    if case == "two machines":
        records = _fixture()
        records["converter_speed"]["machine"] = "Another CPU"
        _write(tmp_path, records)
    out = tmp_path / "out.md"
    done = _report(tmp_path, out)
    assert done.returncode == 2 and not out.exists()
    assert ("no benchmark results" if case == "empty" else "2 machines") in done.stderr


def test_a_baseline_run_is_set_beside_this_one_and_a_slower_step_is_marked(tmp_path):
    """--baseline: the key figures of an earlier run (a platform move's before) beside this
    run's; a step time more than 10% slower is marked, a faster one or a 5% slower one is not."""
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir(), after.mkdir()
    old = _fixture()
    _write(before, {name: dict(record, machine="Old TF") for name, record in old.items()})
    new = _fixture()
    new["cpu_scaling"]["timing"]["horovod-1x1"] = dict(TIMING, step_s=0.379)   # +5%
    new["cpu_scaling"]["figures"]["horovod"]["step_s_2"] = 0.600              # +17%
    new["converter_speed"]["ours"]["seconds"] = 2.0                            # faster
    _write(after, new)
    out = tmp_path / "out.md"
    done = subprocess.run([sys.executable, REPORT, str(after), "--baseline", str(before),
                           "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    section = _sections(out.read_text())["Before and after"]
    assert "(measured on Old TF) beside this run's (" + MACHINE + ")" in section
    assert "| `make demo`'s final mask AP | 0.212 | 0.212 | +0% |" in section
    assert "| Horovod step, 1 x 1 on one host (s) | 0.361 | 0.379 | +5% |" in section
    assert "| `horovod` worker's step, 2 emulated hosts (s) | 0.511 | 0.600 | **+17% slower** |" in section
    assert "| converter, ours (s) | 2.6 | 2.0 | -23% |" in section


def _evaluation_report() -> dict:
    """A two-class report in the job's schema (the fields the contract's table reads)."""
    def task(ap):
        best = {"score_threshold": 0.31, "precision": 0.5, "recall": 0.6}
        return {"per_class": [dict(AP=ap, AP50=0.5, instances=7, best_f1=best),
                              dict(AP=None, AP50=None, instances=0, best_f1=best)],
                "best_f1_all_classes": best,
                "confusion": {"score_threshold": 0.3, "iou": 0.5, "most_confused": [
                    {"ground_truth": "circle", "predicted": "square", "count": 3,
                     "share": 0.25}]}}
    return {"step": 1200, "images": 50, "evaluator": "faster-coco-eval 1.8.0",
            "categories": [{"id": 1, "source_id": 1, "name": "circle"},
                           {"id": 2, "source_id": 2, "name": "square"}],
            "tasks": {"segm": task(0.4321), "bbox": task(0.3456)}}


def test_the_demos_repeated_runs_show_their_spread_and_its_report_becomes_the_docs_example(
        tmp_path):
    """make bench runs the demo 3 times: each run's final AP, their mean and range on the page;
    the first run's evaluation report replaces docs/evaluation.md's example, between its markers
    and nowhere else."""
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    import report

    demo = _fixture()["demo_accuracy"]
    runs = [{"final": {"eval/segm_AP": ap, "eval/bbox_AP": ap + 0.01},
             "local_run_seconds": 1320.0} for ap in (0.148, 0.223, 0.167)]
    demo.update(runs=runs, evaluation_report=_evaluation_report(),
                spread={"eval/segm_AP": {"mean": 0.1793, "stdev": 0.039, "min": 0.148,
                                         "max": 0.223}})
    results = tmp_path / "results"
    results.mkdir()
    _write(results, {"demo_accuracy": demo})
    doc = tmp_path / "evaluation.md"
    doc.write_text(f"# before\n{report.EXAMPLE_BEGIN}\nold example 0.223\n{report.EXAMPLE_END}\n"
                   "after\n")
    done = subprocess.run([sys.executable, REPORT, str(results), "--out",
                           str(tmp_path / "b.md"), "--evaluation-doc", str(doc)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "b.md").read_text()
    assert "| 2 | 0.223 | – | 0.233 | – | 22.0 |" in page
    assert "| mean | 0.179 | – | – | – | – |" in page
    assert "| least | 0.148 | – | – | – | – |" in page and "| greatest | 0.223 |" in page
    text = doc.read_text()
    assert text.startswith("# before\n") and text.endswith(f"{report.EXAMPLE_END}\nafter\n")
    assert "old example" not in text
    assert "`make bench` of 2026-01-02" in text and "1200 steps" in text
    assert "circle     7    0.432  0.500    0.346" in text and "circle as square 3 (25%)" in text

    doc.write_text("no markers\n")
    refused = subprocess.run([sys.executable, REPORT, str(results), "--out",
                              str(tmp_path / "b.md"), "--evaluation-doc", str(doc)],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "expected one" in refused.stderr
    assert doc.read_text() == "no markers\n"
