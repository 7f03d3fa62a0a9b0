"""The one preferred-GPU search: go-gpuallocator's best-effort partition rule as a pure function."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from gpuslice.topology.model import Topology
from gpuslice.topology.partition import MAX_PARTITION_ITEMS, best_partition

Ref = TypeVar("Ref", int, str)


def preferred_whole_gpus(
    topology: Topology, available: Sequence[Ref], must_include: Sequence[Ref], size: int
) -> list[Ref]:
    """The GPUs to prefer for a request of `size` whole GPUs, as the caller's own references (index or UUID).

    NVIDIA's best-effort rule (go-gpuallocator's NewBestEffortPolicy): partition every available GPU into sets
    of `size` (padded), keep partitions with a set holding all of `must_include`, take the highest-scoring one
    (first enumerated wins ties), and answer its best set holding `must_include`. GPUs are considered in index
    order whatever order the kubelet lists them in, so equal scores always resolve the same way. Invalid
    arguments (size <= 0, fewer GPUs than size, more must-include than size, a must-include GPU that is not
    available) give an empty list; references the topology does not know raise UnknownGpuError.
    """
    by_index = _resolve_unique(topology, available)
    required = list(_resolve_unique(topology, must_include))
    if size <= 0 or len(by_index) < size or len(required) > size:
        return []
    if any(gpu not in by_index for gpu in required):
        return []
    order = sorted(by_index)
    if size == 1:
        return [by_index[required[0] if required else order[0]]]
    if len(order) > MAX_PARTITION_ITEMS:
        return [by_index[gpu] for gpu in _greedy(topology, order, required, size)]

    weights = topology.score_matrix(order)
    position = {gpu: i for i, gpu in enumerate(order)}
    wanted = {position[gpu] for gpu in required}
    partition = best_partition(weights, size, wanted)
    if partition is None:
        return []
    best: tuple[int, ...] = ()
    best_score = -1
    for candidate in partition.sets:
        if partition.padding.intersection(candidate) or not wanted.issubset(candidate):
            continue  # go-gpuallocator would also consider the padded set here; it is never a valid answer
        score = topology.set_score(order[p] for p in candidate)
        if score > best_score:
            best, best_score = candidate, score
    return [by_index[order[p]] for p in best]


def _resolve_unique(topology: Topology, refs: Sequence[Ref]) -> dict[int, Ref]:
    """GPU index -> the first reference naming it (duplicates, also by another spelling, count once)."""
    found: dict[int, Ref] = {}
    for ref in refs:
        found.setdefault(topology.resolve(ref), ref)
    return found


def _greedy(topology: Topology, order: list[int], required: list[int], size: int) -> list[int]:
    """Beyond MAX_PARTITION_ITEMS GPUs the exact search is too large: grow the set one best GPU at a time."""
    chosen = sorted(required)
    if not chosen:
        first, second = max(
            ((a, b) for i, a in enumerate(order) for b in order[i + 1 :]),
            key=lambda pair: topology.pair_score(*pair),
        )
        chosen = [first, second]
    while len(chosen) < size:
        rest = [gpu for gpu in order if gpu not in chosen]
        chosen.append(max(rest, key=lambda gpu: sum(topology.pair_score(gpu, c) for c in chosen)))
    return sorted(chosen)
