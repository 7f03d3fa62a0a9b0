"""`topology-aware`: all-or-nothing, and a multi-pod job goes inside one NVLink island whenever one can hold it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.core.placement import best_fitting, place_all
from gpuslice.units import MILLI


class TopologyAware:
    """Tries islands tightest first (least free GPU capacity that could hold the job), best-fit inside each.

    Only when no single island can hold the job does it spread the pods over islands; the engine then
    stretches the job's run time by the cross-island penalty. Single-pod units are plain best-fit.
    """

    name = "topology-aware"
    all_or_nothing = True

    def place(self, pods: Sequence[PodSpec], job: JobSpec, state: ClusterState) -> list[Binding] | None:
        if len(pods) > 1 and state.island_count > 1:
            for island in _islands_tightest_first(pods, state):
                bindings = place_all(pods, state, best_fitting, state.island_of == island)
                if bindings is not None:
                    return bindings
        return place_all(pods, state, best_fitting)


def _islands_tightest_first(pods: Sequence[PodSpec], state: ClusterState) -> list[int]:
    """Islands whose free GPU capacity covers the request, least free first (lowest index on ties)."""
    need = sum(pod.gpu_count * pod.gpu_milli for pod in pods)
    free = np.bincount(state.island_of, weights=state.free_milli, minlength=state.island_count)
    # Whole-GPU pods also need whole free GPUs: count them per island too (a cheap necessary condition).
    whole = sum(pod.gpu_count for pod in pods if pod.gpu_milli == MILLI)
    full = np.bincount(state.island_of, weights=state.full_free, minlength=state.island_count)
    candidates = np.flatnonzero((free >= need) & (full >= whole))
    order = np.lexsort((candidates, free[candidates]))
    return [int(island) for island in candidates[order]]
