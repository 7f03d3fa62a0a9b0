"""openb (FGD paper) speed and results: per-policy placement time, the whole command, the 6 x 10 sweep.

Set GPUSLICE_BENCH_OPENB_ALL=1 to also sweep every openb workload with FGD and our policies (10+ minutes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gpuslice.fgd.engine import Workload, simulate
from gpuslice.fgd.metrics import seed_stat
from gpuslice.fgd.policies import OUR_POLICIES, PAPER_POLICIES
from gpuslice.fgd.report import pairwise, select
from gpuslice.fgd.sweep import parse_seeds, run_sweep
from gpuslice.fgd.trace import OpenbTraceError, list_workloads, load_trace, resolve_trace_dir

PUBLISHED_PODS_PER_SECOND = 18.0  # the authors' Go simulator: ~10.8 k placements in ~10 min on 2 vCPUs
REPEATS = 3


def _whole_command_seconds() -> float:
    gpuslice = Path(sys.executable).with_name("gpuslice")
    command = [str(gpuslice), "sim", "openb", "--policies", "fgd", "--seeds", "42"]
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    try:
        folder = resolve_trace_dir()
    except OpenbTraceError as error:
        print(f"skipped: {error}")
        return
    started = time.perf_counter()
    workload = Workload.from_trace(load_trace("default", folder))
    print(f"load default trace + shapes: {time.perf_counter() - started:.2f} s")
    print(
        f"{'policy':<11} {'placement s':>12} {'run CPU s':>10} {'pods':>6} {'pods/s':>8} {'x Go sim':>9}  (best of 3)"
    )
    for name in (*PAPER_POLICIES, *OUR_POLICIES):
        wall, cpu = float("inf"), float("inf")
        for _ in range(REPEATS):
            started = time.process_time()
            run = simulate(workload, name, 42)
            cpu = min(cpu, time.process_time() - started)  # CPU time: robust when other work shares the cores
            wall = min(wall, run.placement_seconds)
        rate = run.pods / wall
        speedup = rate / PUBLISHED_PODS_PER_SECOND
        print(f"{name:<11} {wall:>12.3f} {cpu:>10.3f} {run.pods:>6} {rate:>8.0f} {speedup:>8.0f}x")
    print(f"whole command `gpuslice sim openb --policies fgd --seeds 42`: {_whole_command_seconds():.2f} s (best of 3)")

    started = time.perf_counter()
    records = run_sweep(["default"], PAPER_POLICIES, parse_seeds("42-51"), trace_dir=folder, jobs=2)
    print(f"the paper's 6 policies x 10 seeds, -j 2 (make reproduce): {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    records += run_sweep(["default"], OUR_POLICIES, parse_seeds("42-51"), trace_dir=folder, jobs=2)
    print(f"our {len(OUR_POLICIES)} policies x 10 seeds, -j 2: {time.perf_counter() - started:.1f} s")
    for name in (*PAPER_POLICIES, *OUR_POLICIES):
        a = seed_stat(select(records, "default", name), "unallocated_gpu_pct", 100)
        b = seed_stat(select(records, "default", name), "unallocated_gpu_pct", 130)
        print(f"  {name:<11} unallocated {a.mean:5.2f} ± {a.sd:4.2f} % @100   {b.mean:5.2f} ± {b.sd:4.2f} % @130")
    for name in OUR_POLICIES:
        pair = pairwise(records, "default", name, "fgd")
        print(f"{name} vs fgd @100: {pair['mean_diff']:+.2f} points, lower on {pair['wins']}/{pair['seeds']} seeds")

    if os.environ.get("GPUSLICE_BENCH_OPENB_ALL"):
        names = list_workloads(folder)
        started = time.perf_counter()
        records = run_sweep(names, ["fgd", "fgd-cpu"], parse_seeds("42-51"), trace_dir=folder, jobs=2)
        print(f"all {len(names)} workloads x (fgd, fgd-cpu) x 10 seeds: {time.perf_counter() - started:.0f} s")
        for name in names:
            pair = pairwise(records, name, "fgd-cpu", "fgd")
            fgd = seed_stat(select(records, name, "fgd"), "unallocated_gpu_pct", 100).mean
            print(
                f"  {name:<12} fgd {fgd:5.2f} %  fgd-cpu {pair['mean_diff']:+.2f}  wins {pair['wins']}/{pair['seeds']}"
            )


if __name__ == "__main__":
    main()
