"""GPU-level topology in the simulator: NVLink rings and islands per node, the slowdown of a split job, and a policy.

A multi-GPU job all-reduces over a ring of its GPUs (NCCL's ring algorithm). Inside one node the ring
runs over NVLink when every consecutive pair of some cycle through the job's GPUs is NVLinked (directly,
or through an NVSwitch); GPUs in different NVLink islands (gpuslice.topology's `nvlink_islands`) never
have such a cycle. Penalties (TopologyPenalty): a job whose GPUs on one node have no NVLink ring runs
(1 + split_penalty) times longer; a job spread over several nodes talks over the network and runs
(1 + node_penalty) times longer, plus the engine's cross_island_penalty when those nodes sit in
different node islands. Which GPUs a policy picks therefore matters: the core policies take the
lowest-indexed free GPUs; `nvlink-aware` asks the project's topology scorer (go-gpuallocator's rule,
gpuslice.allocation) and insists on a ring when the node has one free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from gpuslice.allocation.preferred_topology import preferred_whole_gpus
from gpuslice.sim.cluster import Binding, BoolArray, ClusterState
from gpuslice.sim.hooks import HookedEngine, Listener
from gpuslice.sim.model import MILLI, ClusterSpec, JobSpec, PodSpec, SimNode
from gpuslice.sim.policies.base import largest_first
from gpuslice.sim.runs import JobRun
from gpuslice.topology import Topology, preset_topology


def default_topology(node: SimNode) -> Topology:
    """A node's topology from its GPU model: DGX presets for 8-GPU V100/A100/H100/H200 nodes, else PCIe only."""
    product = node.product_name.upper()
    if len(node.gpus) == 8:
        for marker, preset in (("V100", "dgx1-v100"), ("A100", "dgx-a100"), ("H100", "dgx-h100"), ("H200", "dgx-h100")):
            if marker in product:
                return preset_topology(preset, node.gpus)
    return preset_topology("pcie-2socket", node.gpus or 1)


def cluster_topologies(cluster: ClusterSpec) -> tuple[Topology, ...]:
    return tuple(default_topology(node) for node in cluster.nodes)


def has_nvlink_ring(topology: Topology, gpus: Sequence[int]) -> bool:
    """Whether some cycle through all of `gpus` uses only NVLinked pairs (one GPU: trivially; two: a direct link)."""
    members = tuple(sorted(set(gpus)))
    key = (id(topology), members)
    known = _RINGS.get(key)
    if known is None or known[0] is not topology:
        if len(_RINGS) > 200_000:
            _RINGS.clear()  # many runs' worth of topologies: start over rather than grow without bound
        known = _RINGS[key] = (topology, _ring(topology, members))
    return known[1]


# (id(topology), GPUs) -> (the topology itself, so that a reused id is detected; the answer)
_RINGS: dict[tuple[int, tuple[int, ...]], tuple[Topology, bool]] = {}


def _ring(topology: Topology, gpus: tuple[int, ...]) -> bool:
    count = len(gpus)
    if count <= 1:
        return True
    linked = [[a != b and topology.link(gpus[a], gpus[b]).nvlinked for b in range(count)] for a in range(count)]
    if count == 2:
        return linked[0][1]
    # Hamiltonian cycle through position 0, by dynamic programming over visited sets (count <= 8 or so).
    reach = [[False] * count for _ in range(1 << count)]
    reach[1][0] = True
    for visited in range(1, 1 << count):
        if not visited & 1:
            continue
        for last in range(count):
            if not reach[visited][last]:
                continue
            for following in range(1, count):
                if not visited >> following & 1 and linked[last][following]:
                    reach[visited | 1 << following][following] = True
    full = (1 << count) - 1
    return any(reach[full][last] and linked[last][0] for last in range(1, count))


@dataclass(frozen=True)
class Penalties:
    split: float = 0.3  # GPUs on one node without an NVLink ring (traffic over PCIe and the CPU link)
    node: float = 0.4  # GPUs on several nodes (traffic over the network)

    def __post_init__(self) -> None:
        if self.split < 0 or self.node < 0:
            raise ValueError(f"penalties must be >= 0, got split={self.split}, node={self.node}")


def placement_slowdown(
    state: ClusterState,
    topologies: Sequence[Topology],
    bindings: Sequence[Binding],
    penalties: Penalties,
    island: float,
) -> float:
    """Run-time stretch of a job placed on `bindings` (see the module docstring)."""
    nodes = {binding.node for binding in bindings if binding.gpus}
    if len(nodes) > 1:
        islands = {int(state.island_of[node]) for node in nodes}
        return 1.0 + penalties.node + (island if len(islands) > 1 else 0.0)
    if not nodes:
        return 1.0
    node = nodes.pop()
    gpus = sorted({gpu for binding in bindings for gpu in binding.gpus})
    return 1.0 if has_nvlink_ring(topologies[node], gpus) else 1.0 + penalties.split


class TopologyPenalty(Listener):
    """Applies placement_slowdown to every job that starts; extras: split jobs and mean slowdown by job size."""

    def __init__(self, topologies: Sequence[Topology], penalties: Penalties | None = None) -> None:
        self.topologies = tuple(topologies)
        self.penalties = penalties or Penalties()
        self.by_size: dict[float, list[float]] = {}

    def slowdown(self, engine: HookedEngine, run: JobRun, positions: tuple[int, ...], slowdown: float) -> float:
        bindings = [binding for position in positions if (binding := run.bound[position]) is not None]
        value = placement_slowdown(
            engine.state, self.topologies, bindings, self.penalties, engine.config.cross_island_penalty
        )
        run.cross_island = value > 1.0  # the core's count of jobs that ran stretched
        self.by_size.setdefault(sum(run.spec.pods[p].gpus for p in positions), []).append(value)
        return value

    def extras(self, engine: HookedEngine) -> dict[str, Any]:
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


def choose_gpu_set(topology: Topology, free: tuple[int, ...], size: int) -> tuple[tuple[int, ...], bool]:
    """go-gpuallocator's preferred set of `size` among `free`; if it has no NVLink ring, the best-scoring set
    that has one (first in index order on ties); the flag says whether the answer is a ring."""
    preferred = tuple(sorted(preferred_whole_gpus(topology, list(free), [], size))) or free[:size]
    if has_nvlink_ring(topology, preferred):
        return preferred, True
    rings = [combo for combo in combinations(free, size) if has_nvlink_ring(topology, combo)]
    if rings:
        return max(rings, key=lambda combo: (topology.set_score(combo), [-g for g in combo])), True
    return preferred, False


def _islands_by_free(state: ClusterState) -> list[int]:
    """Node islands, least free GPU capacity first (the tightest island that may hold the job is tried first)."""
    free = np.bincount(state.island_of, weights=state.free_milli, minlength=state.island_count)
    return [int(island) for island in np.lexsort((np.arange(state.island_count), free))]
