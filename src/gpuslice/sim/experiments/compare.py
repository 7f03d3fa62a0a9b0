"""Run several policies on one trace and collect their results in the comparison's JSON shape."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.core.metrics import SimResult
from gpuslice.sim.experiments.variants import check_variant, run_variant
from gpuslice.sim.extensions.orders import ORDERS
from gpuslice.sim.traces import Trace

DEFAULT_POLICIES = ("first-fit", "best-fit", "gang", "topology-aware")

# (policy, jobs settled, jobs in the trace) -> None
ComparisonProgress = Callable[[str, int, int], None]


@dataclass
class Comparison:
    trace: Trace
    seed: int
    config: SimConfig
    order: str
    results: list[SimResult]

    def to_json(self) -> dict[str, Any]:
        """`{"trace": ..., "results": [{"policy": ..., "gpu_utilization": ..., ...}]}` plus run context."""
        return {
            "trace": self.trace.name,
            "seed": self.seed,
            "cluster": self.trace.cluster_text or self.trace.cluster.description,
            "gpus": self.trace.cluster.total_gpus,
            "jobs": len(self.trace.jobs),
            "queue_order": self.order,
            "cross_island_penalty": self.config.cross_island_penalty,
            "results": [result.summary() for result in self.results],
        }


def compare(
    trace: Trace,
    policies: Sequence[str] = DEFAULT_POLICIES,
    config: SimConfig | None = None,
    order: str = "priority",
    progress: ComparisonProgress | None = None,
) -> Comparison:
    """Simulate `trace` once per policy (same seed, same trace) and return the results in order.

    A policy is a core placement policy or a variant such as `preempt:ckpt=900`, `drf` or `kueue` (see
    gpuslice.sim.experiments.variants); the result's `policy` is the name as given.
    """
    config = config or SimConfig()
    if order not in ORDERS:
        raise ValueError(f"unknown queue order {order!r}; known: {', '.join(ORDERS)}")
    for name in policies:  # fail on a bad name before running anything
        check_variant(name, trace)
    results = []
    for name in policies:  # each variant runs on the core engine with its listeners, or on the sharing tiers
        callback = None if progress is None else _bind(progress, name)
        results.append(run_variant(trace, name, config, order, callback))
    return Comparison(trace, config.seed, config, order, results)


def _bind(progress: ComparisonProgress, name: str) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        progress(name, done, total)

    return report
