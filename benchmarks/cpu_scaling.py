"""CPU figures of the training job: throughput with 1 and 2 ranks, scaling efficiency, allreduce
share of the step, input pipeline against model consumption, mask AP after a fixed number of steps.

Prints figures only (no assertions). Runs the real job code through mpirun, on the synthetic
dataset of `maskrcnn_job.local_run`, with its demo hyperparameters (ResNet-18-FPN, 128 px, compact heads,
2 images per rank; batch_norm=sync, whose allreduces count in the step, not in "allreduce alone").
About 5 minutes on 2 cores, plus the AP run if --ap-steps > 0.

  .venv/bin/python benchmarks/cpu_scaling.py [--steps 30] [--ap-steps 600]
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

from maskrcnn_job import local_run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STEP_TIMING = os.path.join(REPO, "benchmarks", "step_timing.py")
# (ranks, intra-op threads per rank): one core, both cores in one process, one core per rank.
CONFIGS = ((1, 1), (1, 2), (2, 1))


def _machine() -> str:
    model = "unknown CPU"
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            found = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
            model = found.group(1) if found else model
    import tensorflow as tf
    return (f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, TensorFlow {tf.__version__}")


def _time_config(work_dir: str, ranks: int, threads: int, steps: int) -> dict:
    args = local_run.parse_args(["--work-dir", work_dir, "--ranks", str(ranks),
                                 "--hp", f"threads_per_rank={threads}"])
    host_env = local_run.prepare_layout(args, os.path.abspath(work_dir))
    command = local_run.mpirun_command(ranks, host_env, STEP_TIMING)
    env = dict(os.environ, BENCH_STEPS=str(steps), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    line = next((l for l in result.stdout.splitlines() if l.startswith("BENCH ")), None)
    if result.returncode != 0 or line is None:
        raise RuntimeError(f"timing run {ranks}x{threads} failed:\n{result.stdout[-3000:]}"
                           f"\n{result.stderr[-3000:]}")
    return json.loads(line[len("BENCH "):])


def _mask_ap_after(work_dir: str, steps: int) -> dict:
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "maskrcnn_job.local_run", "--work-dir",
         work_dir, "--hp", f"max_steps={steps}", "--hp", "eval_every_epochs=0"],
        capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        raise RuntimeError(f"AP run failed:\n{result.stdout[-3000:]}")
    values = dict(re.findall(r"^(eval/\w+): (\S+)$", result.stdout, re.M))
    return {"steps": steps, "seconds": time.time() - started,
            "segm_AP": float(values["eval/segm_AP"]), "bbox_AP": float(values["eval/bbox_AP"])}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default="build/bench")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per config (30)")
    parser.add_argument("--ap-steps", type=int, default=0,
                        help="also train this many steps with local_run and report AP (0: skip)")
    args = parser.parse_args(argv)

    print(f"machine: {_machine()}")
    rows = {config: _time_config(args.work_dir, *config, args.steps) for config in CONFIGS}
    print("\n| ranks x threads | step (s) | images/s | allreduce (ms) | allreduce share "
          "| input pipeline images/s per rank: decode+parse / cached "
          "| model consumes images/s per rank |")
    print("|---|---|---|---|---|---|---|")
    throughput = {}
    for (ranks, threads), r in rows.items():
        throughput[(ranks, threads)] = ranks * r["images_per_rank"] / r["step_s"]
        print(f"| {ranks} x {threads} | {r['step_s']:.3f} | {throughput[(ranks, threads)]:.1f} "
              f"| {1000 * r['allreduce_s']:.0f} | {r['allreduce_s'] / r['step_s']:.0%} "
              f"| {r['parse_images_per_sec_per_rank']:.0f} / {r['input_images_per_sec_per_rank']:.0f} "
              f"| {r['images_per_rank'] / r['step_s']:.1f} |")
    parameters = rows[CONFIGS[0]]["parameters"]
    print(f"\nmodel: {parameters / 1e6:.1f}M trainable parameters "
          f"({parameters * 4 / 1e6:.0f} MB of fp32 gradients per allreduce)")
    print(f"scaling efficiency, 2 ranks x 1 thread vs 2 x (1 rank x 1 thread): "
          f"{throughput[(2, 1)] / (2 * throughput[(1, 1)]):.2f}")
    print(f"2 ranks x 1 thread vs 1 rank x 2 threads (same cores): "
          f"{throughput[(2, 1)] / throughput[(1, 2)]:.2f}")
    if args.ap_steps:
        ap = _mask_ap_after(os.path.join(args.work_dir, "ap"), args.ap_steps)
        print(f"\nafter {ap['steps']} steps (2 ranks x 2 images, {ap['seconds'] / 60:.1f} min "
              f"incl. start-up, eval, export): mask AP {ap['segm_AP']:.3f}, "
              f"box AP {ap['bbox_AP']:.3f}")


if __name__ == "__main__":
    main()
