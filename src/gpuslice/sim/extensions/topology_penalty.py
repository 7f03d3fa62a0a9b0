"""The NVLink slowdown as a listener: every job that starts is stretched by where its GPUs are (sim.nvlink)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gpuslice.sim.core.engine import Engine, Listener
from gpuslice.sim.core.runs import JobRun
from gpuslice.sim.core.sections import ReportSection, duration, number
from gpuslice.sim.extensions.nvlink import Penalties, placement_slowdown
from gpuslice.topology import Topology


class TopologyPenalty(Listener):
    """Applies placement_slowdown to every job that starts; extras: split jobs and mean slowdown by job size."""

    def __init__(self, topologies: Sequence[Topology], penalties: Penalties | None = None) -> None:
        self.topologies = tuple(topologies)
        self.penalties = penalties or Penalties()
        self.by_size: dict[float, list[float]] = {}

    def slowdown(self, engine: Engine, run: JobRun, positions: tuple[int, ...], slowdown: float) -> float:
        bindings = [binding for position in positions if (binding := run.bound[position]) is not None]
        value = placement_slowdown(
            engine.state, self.topologies, bindings, self.penalties, engine.config.cross_island_penalty
        )
        run.cross_island = value > 1.0  # the core's count of jobs that ran stretched
        self.by_size.setdefault(sum(run.spec.pods[p].gpus for p in positions), []).append(value)
        return value

    def extras(self, engine: Engine) -> dict[str, Any]:
        table = {}
        for size in sorted(self.by_size):
            values = self.by_size[size]
            table[f"{size:g}"] = {
                "jobs": len(values),
                "split": sum(value > 1.0 for value in values),
                "mean_slowdown": round(float(np.mean(values)), 4),
            }
        jct: dict[str, list[float]] = {}
        for run in engine.runs:
            if run.completion_time is not None:
                jct.setdefault(f"{run.spec.gpus:g}", []).append(run.completion_time)
        for label, values in jct.items():
            table.setdefault(label, {})["jct_mean"] = round(float(np.mean(values)), 3)
        return {"split_jobs": sum(row.get("split", 0) for row in table.values()), "topology_by_gpus": table}


NVLINK_SECTION = ReportSection(
    "NVLink topology (jobs without an NVLink ring or across nodes run slower)",
    (
        ("split jobs", number("split_jobs")),
        *(
            (f"{size}-GPU {label}", cell)
            for size in ("4", "8")
            for label, cell in (
                ("split", number("topology_by_gpus", size, "split")),
                ("slowdown", number("topology_by_gpus", size, "mean_slowdown", fmt="{:.3f}")),
                ("JCT", duration("topology_by_gpus", size, "jct_mean")),
            )
        ),
        ("goodput", number("gpu_goodput", fmt="{:.1%}")),
    ),
    figure="topology",
)
TopologyPenalty.section = NVLINK_SECTION
