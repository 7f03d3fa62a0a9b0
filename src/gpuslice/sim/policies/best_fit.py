"""`best-fit`: every pod, one at a time, on the fitting node with the least free GPU capacity left."""

from __future__ import annotations

from collections.abc import Sequence

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.core.placement import best_fitting, place_all


class BestFit:
    """Packs tight to keep whole nodes free; like first-fit it places a gang job's pods one by one."""

    name = "best-fit"
    all_or_nothing = False

    def place(self, pods: Sequence[PodSpec], job: JobSpec, state: ClusterState) -> list[Binding] | None:
        return place_all(pods, state, best_fitting)
