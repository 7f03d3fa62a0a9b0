"""`first-fit`: every pod, one at a time, on the lowest-indexed node where it fits."""

from __future__ import annotations

from collections.abc import Sequence

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.core.placement import first_fitting, place_all


class FirstFit:
    """Scans nodes in cluster order; a gang job's pods are placed pod by pod (they may hold GPUs and wait)."""

    name = "first-fit"
    all_or_nothing = False

    def place(self, pods: Sequence[PodSpec], job: JobSpec, state: ClusterState) -> list[Binding] | None:
        return place_all(pods, state, first_fitting)
