"""`nvlink-aware`: all-or-nothing, whole jobs kept on one node or island, and NVLink-ring GPU sets inside a node."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpuslice.sim.core.cluster import Binding, BoolArray, ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.core.placement import largest_first
from gpuslice.sim.extensions.nvlink import choose_gpu_set, cluster_topologies
from gpuslice.topology import Topology
from gpuslice.units import MILLI


class NvlinkAware:
    """All-or-nothing. A multi-pod job goes onto one node when one can hold it all, else inside one node island;
    every multi-GPU pod gets an NVLink-ring set of GPUs when its node has one (nodes offering a ring first, then
    best-fit). GPU sets come from go-gpuallocator's partition rule; a ring set replaces its answer if needed."""

    name = "nvlink-aware"
    all_or_nothing = True

    def __init__(self, topologies: Sequence[Topology] | None = None) -> None:
        self.topologies: tuple[Topology, ...] | None = tuple(topologies) if topologies is not None else None
        self._sets: dict[tuple[int, tuple[int, ...], int], tuple[tuple[int, ...], bool]] = {}

    def place(self, pods: Sequence[PodSpec], job: JobSpec, state: ClusterState) -> list[Binding] | None:
        if self.topologies is None:
            self.topologies = cluster_topologies(state.spec)
        if len(pods) > 1:
            together = self._one_node(pods, state)
            if together is not None:
                return together
            for island in _islands_by_free(state):
                bindings = self._each(pods, state, state.island_of == island)
                if bindings is not None:
                    return bindings
        return self._each(pods, state, None)

    def _one_node(self, pods: Sequence[PodSpec], state: ClusterState) -> list[Binding] | None:
        if any(pod.fractional or not pod.gpu_count for pod in pods):
            return None
        need = sum(pod.gpu_count for pod in pods)
        cpu = sum(pod.cpu_milli for pod in pods)
        memory = sum(pod.memory_mib for pod in pods)
        mask = (state.full_free >= need) & (state.cpu_free >= cpu) & (state.memory_free >= memory)
        for model in {pod.gpu_model for pod in pods if pod.gpu_model is not None}:
            mask &= state.fit_mask(PodSpec(1, MILLI, 0, 0, model))
        node = self._pick_node(state, mask, need)
        if node is None:
            return None
        chosen, _ = self._gpu_set(state, node, need)
        bindings: list[Binding] = []
        offset = 0
        for pod in pods:
            binding = Binding(node, tuple(chosen[offset : offset + pod.gpu_count]))
            offset += pod.gpu_count
            state.apply(binding, pod)
            bindings.append(binding)
        return bindings

    def _each(self, pods: Sequence[PodSpec], state: ClusterState, allowed: BoolArray | None) -> list[Binding] | None:
        bound: dict[int, Binding] = {}
        for position in largest_first(pods) if len(pods) > 1 else [0]:
            pod = pods[position]
            mask = state.fit_mask(pod)
            if allowed is not None:
                mask &= allowed
            whole = pod.gpu_count if pod.gpu_milli == MILLI else 0
            node = self._pick_node(state, mask, whole)
            if node is None:
                for undo, binding in bound.items():
                    state.release(binding, pods[undo])
                return None
            if whole >= 2:
                binding = Binding(node, self._gpu_set(state, node, whole)[0])
                state.apply(binding, pod)
            else:
                binding = state.bind(pod, node)
            bound[position] = binding
        return [bound[position] for position in range(len(pods))]

    def _pick_node(self, state: ClusterState, mask: BoolArray, whole_gpus: int) -> int | None:
        """Best-fit order (least free GPU capacity, then CPU, then index); with 2+ whole GPUs, ring-capable first."""
        candidates = np.flatnonzero(mask)
        if not len(candidates):
            return None
        order = candidates[np.lexsort((candidates, state.cpu_free[candidates], state.free_milli[candidates]))]
        if whole_gpus < 2:
            return int(order[0])
        for node in order:
            if self._gpu_set(state, int(node), whole_gpus)[1]:
                return int(node)
        return int(order[0])

    def _gpu_set(self, state: ClusterState, node: int, size: int) -> tuple[tuple[int, ...], bool]:
        assert self.topologies is not None
        free = tuple(int(g) for g in np.flatnonzero(state.gpu_free[node] == MILLI))
        key = (node, free, size)
        answer = self._sets.get(key)
        if answer is None:
            answer = self._sets[key] = choose_gpu_set(self.topologies[node], free, size)
        return answer


def _islands_by_free(state: ClusterState) -> list[int]:
    """Node islands, least free GPU capacity first (the tightest island that may hold the job is tried first)."""
    free = np.bincount(state.island_of, weights=state.free_milli, minlength=state.island_count)
    return [int(island) for island in np.lexsort((np.arange(state.island_count), free))]
