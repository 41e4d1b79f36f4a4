"""CPU figures of the training job, its three distributions side by side (`make bench`).

Figures only, no assertions. Every run is `python -m maskrcnn_local.local_run`, on its synthetic
dataset, with the demo's hyperparameters (ResNet-18-FPN, 128 px, compact heads, 2 images per
worker) and batch_norm=per_rank for all three (parameter_server cannot synchronize batch norm, and
so the only communication is the gradients'):
1. Horovod on one host (mpirun): 1 rank x 1 thread, 1 x 2, 2 x 1; step time, allreduce alone and
   its share, the input pipeline alone (benchmarks/step_timing.py, in place of train.py).
2. horovod, multi_worker_mirrored and parameter_server with 1 worker (one host, 1 thread) and with
   2 workers (2 emulated hosts under the real SageMaker toolkit, 1 process of 1 thread each: the
   placement the strategies need, and the one SageMaker gives): images/s, scaling efficiency,
   a worker's step, one step's communication alone and its share of the step.
3. Mask AP after the same wall-clock budget of training (--budget seconds) on 2 emulated hosts:
   each strategy trains train.py itself for the steps its measured throughput makes of the
   budget, then evaluates the 50 val images.
Each timing run also records what its processes used, start-up included (user and kernel CPU
seconds, minor page faults; complete on one host, where every process is local_run's descendant).
Writes every figure to <results-dir>/cpu_scaling.json (benchmarks/results.py; `make bench`
renders it into docs/benchmarks.md) and prints the same tables; each run's output goes to
<work-dir>/logs/. Root only (emulated hosts). --smoke checks the whole path (tiny dataset, 4
timed steps, 5 s budget: the figures mean nothing); --runs picks timing runs (the AP runs follow
the 2-host ones picked).

  .venv/bin/python benchmarks/cpu_scaling.py [--steps 30] [--budget 90] [--smoke]
      [--runs horovod-2x1,mwms-2h] [--hp KEY=VALUE] [--env KEY=VALUE]
      [--work-dir build/bench] [--results-dir build/bench/results]
"""

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

import report
import results

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP_TIMING = os.path.join(REPO, "benchmarks", "step_timing.py")
STRATEGIES = ("horovod", "multi_worker_mirrored", "parameter_server")
SHORT = {"horovod": "horovod", "multi_worker_mirrored": "mwms", "parameter_server": "ps"}

# name -> (distribution, hosts, ranks, threads per rank, measure the input pipeline)
TIMING_RUNS = {
    "horovod-1x1": ("horovod", 1, 1, 1, True),
    "horovod-1x2": ("horovod", 1, 1, 2, True),
    "horovod-2x1": ("horovod", 1, 2, 1, True),
    "horovod-2h": ("horovod", 2, 2, 1, False),
    "mwms-1x1": ("multi_worker_mirrored", 1, 1, 1, False),
    "mwms-2h": ("multi_worker_mirrored", 2, 2, 1, False),
    "ps-1x1": ("parameter_server", 1, 1, 1, False),
    "ps-2h": ("parameter_server", 2, 2, 1, False),
}
HOROVOD_ONE_HOST = ("horovod-1x1", "horovod-1x2", "horovod-2x1")
# Every run: what the bench compares is the gradients' communication; see the docstring.
COMMON_HPS = ["batch_norm=per_rank"]
SMOKE_DATASET = ["--train-images", "16", "--val-images", "8", "--image-size", "64"]
# The demo's 50 warmup steps outlast a run of its 4 epochs on 16 images (the contract refuses that).
SMOKE_HPS = ["--hp", "warmup_steps=2"]
# The AP runs' own, besides max_steps: no checkpoints or evaluation on the way. 0.01, not the
# demo's 0.04: a short budget, and asynchronous PS updates (the rate these runs have been measured
# at since before the demo's rose on 2026-11-24).
AP_HPS = ["eval_every_epochs=0", "checkpoint_every_steps=1000000", "base_learning_rate=0.01"]


def _local_run(args, name: str, distribution: str, hosts: int, extra: list, env: dict,
               timeout: int) -> tuple[str, dict]:
    """One local_run: (its output, also kept in <work-dir>/logs/<name>.txt; what its processes
    used). `env` goes to the processes on one host or emulated ones."""
    command = [sys.executable, "-m", "maskrcnn_local.local_run", "--work-dir", args.work_dir,
               "--distribution", distribution, "--hosts", str(hosts),
               "--timeout", str(timeout), "--draw", "0"]
    if args.smoke:
        command += SMOKE_DATASET + SMOKE_HPS
    for item in COMMON_HPS + args.hp:
        command += ["--hp", item]
    for key, value in env.items():
        command += ["--container-env", f"{key}={value}"]
    command += extra
    started = time.time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 120,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **env))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # What the run's processes used (those waited for, local_run's descendants): on one host all
    # of them. Under the strategies TF 2.21 takes about twice TF 2.18's kernel time (docs/image.md,
    # "The move, measured").
    usage = {"cpu_user_s": after.ru_utime - before.ru_utime,
             "cpu_sys_s": after.ru_stime - before.ru_stime,
             "minor_faults": after.ru_minflt - before.ru_minflt}
    log = os.path.join(args.work_dir, "logs", f"{name}.txt")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w", encoding="utf-8") as f:
        f.write(f"{' '.join(command)}\n{result.stdout}\n{result.stderr}")
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed ({result.returncode}), log {log}:\n"
                           f"{result.stdout[-4000:]}\n{result.stderr[-3000:]}")
    print(f"  {name}: {time.time() - started:.0f} s", flush=True)
    return result.stdout, usage


def _time_run(args, name: str) -> dict:
    distribution, hosts, ranks, threads, measure_input = TIMING_RUNS[name]
    env = dict(args.env, BENCH_STEPS=str(args.steps), BENCH_CHUNK=str(args.chunk),
               BENCH_WARMUP=str(args.warmup), BENCH_INPUT="1" if measure_input else "0")
    # step_timing.py times steps and exports nothing: local_run would fail the run otherwise.
    extra = ["--program", STEP_TIMING, "--no-model-expected", "--hp", f"threads_per_rank={threads}"]
    if distribution == "horovod":
        extra += ["--ranks", str(ranks)]
    output, usage = _local_run(args, name, distribution, hosts, extra, env, timeout=900)
    found = re.findall(r"BENCH (\{.*\})", output)
    if not found:
        raise RuntimeError(f"{name}: no BENCH line in its output:\n{output[-4000:]}")
    return dict(json.loads(found[-1]), run=name, **usage, placement=(
        f"{hosts} emulated hosts x 1 process" if hosts > 1 else f"1 host, {ranks} x {threads}"))


def _ap_run(args, distribution: str, steps: int) -> dict:
    started = time.time()
    extra = ["--hp", f"max_steps={steps}"]
    for item in AP_HPS:
        extra += ["--hp", item]
    output, _ = _local_run(args, f"ap-{SHORT[distribution]}", distribution, 2, extra,
                        dict(args.env), timeout=600 + 20 * args.budget)
    values = dict(re.findall(r"^(eval/\w+): (\S+)$", output, re.M))
    speeds = [float(v) for v in re.findall(r"train/images_per_sec: (\S+)", output)]
    return {"steps": steps, "run_s": time.time() - started,
            "segm_AP": float(values["eval/segm_AP"]), "bbox_AP": float(values["eval/bbox_AP"]),
            "logged_images_per_sec": speeds}


def _figures(timing: dict, ap: dict, budget: int) -> dict:
    """Per strategy: what the side-by-side table shows."""
    out = {}
    for distribution in STRATEGIES:
        short = SHORT[distribution]
        one, two = timing.get(f"{short}-1x1"), timing.get(f"{short}-2h")
        row = {}
        if one:
            row["images_per_sec_1"] = one["images_per_sec"]
            row["comm_share_1"] = one["comm_s"] / one["step_s"]
        if two:
            row.update(images_per_sec_2=two["images_per_sec"], step_s_2=two["step_s"],
                       comm_ms_2=1000 * two["comm_s"], comm_share_2=two["comm_s"] / two["step_s"],
                       images_per_step_2=two["images_per_step"])
        if one and two:
            row["scaling_efficiency"] = two["images_per_sec"] / (2 * one["images_per_sec"])
        if distribution in ap:
            row.update({f"ap_{k}": v for k, v in ap[distribution].items()}, budget_s=budget)
        out[distribution] = row
    return out


def _key_value(text: str) -> tuple:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return tuple(text.split("=", 1))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default="build/bench",
                        help="local_run's work directory and the runs' logs (%(default)s)")
    parser.add_argument("--results-dir", default=results.DEFAULT_RESULTS_DIR,
                        help="where cpu_scaling.json goes (%(default)s)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per run (30)")
    parser.add_argument("--chunk", type=int, default=10,
                        help="steps per timed chunk; the median chunk counts (10)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (5)")
    parser.add_argument("--budget", type=int, default=90,
                        help="seconds of training before the AP of each strategy (90); 0: skip")
    parser.add_argument("--runs", default=",".join(TIMING_RUNS),
                        help=f"timing runs, comma-separated (all: {','.join(TIMING_RUNS)})")
    parser.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE",
                        help="a hyperparameter for every run (repeatable)")
    parser.add_argument("--env", action="append", default=[], type=_key_value,
                        metavar="KEY=VALUE", help="an environment variable of every run's "
                        "processes, e.g. HOROVOD_FUSION_THRESHOLD=0 (repeatable)")
    parser.add_argument("--smoke", action="store_true",
                        help="check the path only: tiny dataset, 4 steps, budget 5 s")
    args = parser.parse_args(argv)
    args.env = dict(args.env)
    args.runs = [r for r in args.runs.split(",") if r]
    unknown = set(args.runs) - set(TIMING_RUNS)
    if unknown:
        parser.error(f"--runs: unknown {sorted(unknown)}; known {list(TIMING_RUNS)}")
    if args.smoke:
        # 2 steps a chunk and 2 of warm-up: both parameter_server workers step at once.
        args.steps, args.chunk, args.warmup, args.budget = 4, 2, 2, min(args.budget, 5)
        args.env.setdefault("BENCH_COMM_REPEATS", "2")
    args.work_dir = os.path.abspath(args.work_dir)
    return args


def _dataset(args) -> dict:
    from maskrcnn_local import local_run, synthetic_coco

    defaults = local_run.parse_args(SMOKE_DATASET if args.smoke else [])
    return {"train_images": defaults.train_images, "val_images": defaults.val_images,
            "image_size": defaults.image_size, "difficulty": defaults.difficulty,
            "generator": synthetic_coco.VERSION}


def main(argv=None) -> None:
    args = parse_args(argv)
    started = time.time()
    print(f"machine: {results.machine()}", flush=True)
    timing = {}
    for name in args.runs:
        timing[name] = _time_run(args, name)
    ap = {}
    if args.budget:
        for distribution in STRATEGIES:
            two = timing.get(f"{SHORT[distribution]}-2h")
            if two:
                steps = max(1, round(args.budget * two["images_per_sec"] / two["images_per_step"]))
                ap[distribution] = _ap_run(args, distribution, steps)
    path = results.write(args.results_dir, "cpu_scaling", started, args.smoke, {
        "settings": {k: getattr(args, k) for k in
                     ("steps", "chunk", "warmup", "budget", "hp", "env", "runs")},
        "dataset": _dataset(args), "common_hyperparameters": COMMON_HPS,
        "ap_hyperparameters": AP_HPS, "timing": timing, "ap": ap,
        "figures": _figures(timing, ap, args.budget)})
    with open(path, encoding="utf-8") as f:
        print("\n" + "\n".join(report.cpu_scaling_section(json.load(f))))
    print(f"\nfigures: {path}")


if __name__ == "__main__":
    main()
