"""`gang`: a gang job's pods are placed all together or not at all (best-fit node choice for each pod)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.core.placement import best_fitting, place_all


class Gang:
    """All-or-nothing: the engine hands over every pod of a gang job at once, and nothing is held while waiting."""

    name = "gang"
    all_or_nothing = True

    def place(self, pods: Sequence[PodSpec], job: JobSpec, state: ClusterState) -> list[Binding] | None:
        return place_all(pods, state, best_fitting)
