"""Simulator extensions: wall time and jobs per second of each extension on a scaled-up trace."""

from __future__ import annotations

import time

from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.experiments.variants import run_variant
from gpuslice.sim.traces import resolve_trace

# (trace, variants): each trace about ten times the documented default.
CASES = (
    ("preemption:nodes=64,hours=48", ("gang", "preempt:ckpt=1800", "preempt:ckpt=1800:grace=inf")),
    ("tenants:nodes=64,hours=24,burst=192", ("fifo", "drf", "wdrf")),
    ("topology:nodes=128,jobs=6000", ("best-fit", "nvlink-aware")),
    ("sharing:nodes=64,jobs=15000", ("whole", "time-slicing", "mps", "mig", "tiered")),
    ("synthetic:jobs=5000,nodes=64", ("kueue", "kueue:overcommit=2")),
)


def main() -> None:
    print(f"{'trace':40} {'variant':30} {'jobs':>7} {'wall s':>8} {'jobs/s':>9}")
    for ref, variants in CASES:
        trace = resolve_trace(ref, seed=42)
        for variant in variants:
            started = time.perf_counter()
            run_variant(trace, variant, SimConfig(seed=42))
            wall = time.perf_counter() - started
            print(
                f"{ref:40} {variant:30} {len(trace.jobs):>7} {wall:>8.2f} {len(trace.jobs) / wall:>9,.0f}", flush=True
            )


if __name__ == "__main__":
    main()
