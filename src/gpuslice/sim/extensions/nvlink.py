"""GPU-level topology in the simulator: NVLink rings and islands per node, and the slowdown of a split job.

A multi-GPU job all-reduces over a ring of its GPUs (NCCL's ring algorithm). Inside one node the ring
runs over NVLink when every consecutive pair of some cycle through the job's GPUs is NVLinked (directly,
or through an NVSwitch); GPUs in different NVLink islands (gpuslice.topology's `nvlink_islands`) never
have such a cycle. Penalties (placement_slowdown, applied by sim.topology_penalty): a job whose GPUs
on one node have no NVLink ring runs (1 + split_penalty) times longer; a job spread over several nodes
talks over the network and runs (1 + node_penalty) times longer, plus the engine's cross_island_penalty
when those nodes sit in different node islands. Which GPUs a policy picks therefore matters: the core policies take the
lowest-indexed free GPUs; `nvlink-aware` (sim.policies.nvlink_aware) asks choose_gpu_set, which uses the
project's topology scorer (go-gpuallocator's rule, gpuslice.allocation) and insists on a ring when it can.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.model import ClusterSpec, SimNode
from gpuslice.topology import Topology, preferred_whole_gpus, preset_topology


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
