"""Per-job topology constraints: a job that must sit on one node, or inside one NVLink island of one node.

ConstrainedPlacement wraps any placement policy. An unconstrained job goes to the policy as it is. For a
constrained one (always handed over as one unit) the policy's own placement is kept when it obeys the
constraint; otherwise it is undone and the job goes to the best-fitting node (least free GPU capacity,
then lowest index) that has room for all of it inside one GPU group: every GPU of the node for
`same-node`, one NVLink island of the node's topology for `nvlink`. Whole-GPU pods take the group's
lowest-indexed free GPUs, a fraction the group's GPU with the least free share that still fits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.core.placement import PlacementPolicy, largest_first
from gpuslice.topology import Topology
from gpuslice.units import MILLI


class ConstrainedPlacement:
    """`inner` with every job's topology constraint enforced (see the module docstring)."""

    def __init__(self, inner: PlacementPolicy, topologies: Sequence[Topology]) -> None:
        self.inner = inner
        self.name = inner.name
        self.all_or_nothing = inner.all_or_nothing
        self.islands = tuple(topology.nvlink_islands() for topology in topologies)

    def place(self, pods: Sequence[PodSpec], job: JobSpec, state: ClusterState) -> list[Binding] | None:
        bindings = self.inner.place(pods, job, state)
        # None from the policy means the unit fits nowhere at all (the protocol's contract), so in no group
        if job.topology == "any" or bindings is None or self.obeys(job.topology, bindings):
            return bindings
        for binding, pod in zip(bindings, pods, strict=True):
            state.release(binding, pod)
        return self._search(pods, job.topology, state)

    def obeys(self, constraint: str, bindings: Sequence[Binding]) -> bool:
        nodes = {binding.node for binding in bindings}
        if len(nodes) > 1:
            return False
        if constraint == "same-node" or not nodes:
            return True
        used = {gpu for binding in bindings for gpu in binding.gpus}
        return any(used <= island for island in self.islands[nodes.pop()])

    def _groups(self, constraint: str, state: ClusterState, node: int) -> Sequence[frozenset[int]]:
        if constraint == "nvlink":
            return self.islands[node]
        return (frozenset(range(int(state.gpu_count[node]))),)

    def _search(self, pods: Sequence[PodSpec], constraint: str, state: ClusterState) -> list[Binding] | None:
        need = sum(pod.gpu_milli * pod.gpu_count for pod in pods)
        candidates = np.flatnonzero(state.free_milli >= need)
        order = sorted(candidates.tolist(), key=lambda n: (int(state.free_milli[n]), int(state.cpu_free[n]), n))
        for node in order:
            for group in self._groups(constraint, state, node):
                bindings = _bind_inside(pods, state, node, sorted(group))
                if bindings is not None:
                    return bindings
        return None


def _bind_inside(pods: Sequence[PodSpec], state: ClusterState, node: int, group: list[int]) -> list[Binding] | None:
    """Bind every pod to `node` using only the GPUs of `group`; on failure undo all and return None."""
    bound: dict[int, Binding] = {}
    for position in largest_first(pods):
        pod = pods[position]
        gpus = _gpus_inside(pod, state, node, group) if state.fits_node(pod, node) else None
        if gpus is None:
            for undo, binding in bound.items():
                state.release(binding, pods[undo])
            return None
        bound[position] = Binding(node, gpus)
        state.apply(bound[position], pod)
    return [bound[position] for position in range(len(pods))]


def _gpus_inside(pod: PodSpec, state: ClusterState, node: int, group: list[int]) -> tuple[int, ...] | None:
    if not pod.gpu_count:
        return ()
    row = state.gpu_free[node]
    if pod.gpu_milli == MILLI:
        free = [gpu for gpu in group if row[gpu] == MILLI]
        return tuple(free[: pod.gpu_count]) if len(free) >= pod.gpu_count else None
    fitting = [gpu for gpu in group if row[gpu] >= pod.gpu_milli]
    return (min(fitting, key=lambda gpu: (int(row[gpu]), gpu)),) if fitting else None
