"""Run several policies on one trace and collect their results in the comparison's JSON shape."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuslice.sim.engine import Engine, SimConfig
from gpuslice.sim.metrics import SimResult
from gpuslice.sim.policies import make_policy
from gpuslice.sim.queue import ORDERS
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
    """Simulate `trace` once per policy (same seed, same trace) and return the results in order."""
    config = config or SimConfig()
    if order not in ORDERS:
        raise ValueError(f"unknown queue order {order!r}; known: {', '.join(ORDERS)}")
    made = [make_policy(name) for name in policies]  # fail on a bad name before running anything
    results = []
    for policy in made:
        callback = None
        if progress is not None:
            callback = _bind(progress, policy.name)
        engine = Engine(
            trace.cluster, trace.jobs, policy, ORDERS[order](), config, progress=callback, trace_name=trace.name
        )
        results.append(engine.run())
    return Comparison(trace, config.seed, config, order, results)


def _bind(progress: ComparisonProgress, name: str) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        progress(name, done, total)

    return report
