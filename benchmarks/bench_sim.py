"""Simulator throughput: jobs per second for each policy on a 1,000-node, 8,000-GPU cluster with 100,000 jobs."""

from __future__ import annotations

import time

from gpuslice.sim.core.engine import Engine, SimConfig
from gpuslice.sim.experiments.compare import DEFAULT_POLICIES
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import SyntheticParams, generate

PARAMS = SyntheticParams(jobs=100_000, nodes=1_000, load=0.9, island=8)
GOAL_SECONDS = {"best-fit": 30.0}


def main() -> None:
    started = time.perf_counter()
    trace = generate(PARAMS, seed=42)
    print(
        f"trace: {len(trace.jobs):,} jobs, {len(trace.cluster.nodes):,} nodes, {trace.cluster.total_gpus:,} GPUs, "
        f"offered load {PARAMS.load:g}, generated in {time.perf_counter() - started:.2f} s"
    )
    for name in DEFAULT_POLICIES:
        started, cpu_started = time.perf_counter(), time.process_time()
        result = Engine(trace.cluster, trace.jobs, make_policy(name), config=SimConfig(seed=42)).run()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        goal = GOAL_SECONDS.get(name)
        verdict = "" if goal is None else f"  (goal < {goal:g} s: {'met' if elapsed < goal else 'MISSED'})"
        print(
            f"{name:>15}: {elapsed:6.2f} s ({cpu:5.2f} s CPU)  {len(trace.jobs) / elapsed:8,.0f} jobs/s  "
            f"util {100 * result.gpu_utilization:.1f} %  wait p99 {result.wait_p99 / 3600:.2f} h  "
            f"deadlocks {result.partial_allocation_deadlocks}{verdict}"
        )


if __name__ == "__main__":
    main()
