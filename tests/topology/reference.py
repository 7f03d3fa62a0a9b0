"""Test helpers: GPUs without discovery, and a literal exhaustive version of go-gpuallocator's best-effort rule."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import combinations

from gpuslice.gpu import ComputeCapability, Gpu
from gpuslice.topology import Topology

Block = tuple[int | None, ...]  # None is a padding slot


def make_gpus(count: int, numa: Sequence[int | None] | None = None) -> list[Gpu]:
    """`count` H100s with indices 0..count-1 and the given NUMA nodes."""
    return [
        Gpu(
            index=i,
            uuid=f"GPU-test-{i:02d}",
            product_name="NVIDIA H100 80GB HBM3",
            memory_mib=81559,
            compute_capability=ComputeCapability(9, 0),
            numa_node=None if numa is None else numa[i],
        )
        for i in range(count)
    ]


def _partitions(items: list[int | None], size: int, padding: int) -> Iterator[list[Block]]:
    """Every partition in go-gpuallocator's order: the first item plus each (size-1)-combination of the rest,
    skipping sets that hold only part of the padding, then the same for what remains."""
    if len(items) == size:
        yield [tuple(items)]
        return
    for rest in combinations(range(1, len(items)), size - 1):
        block = (items[0], *(items[i] for i in rest))
        pads = sum(1 for item in block if item is None)
        if pads not in (0, padding):
            continue
        taken = {0, *rest}
        remaining = [item for i, item in enumerate(items) if i not in taken and not (pads and item is None)]
        for tail in _partitions(remaining, size, padding):
            yield [block, *tail]


def _set_score(weights: Sequence[Sequence[int]], block: Block) -> int:
    real = [p for p in block if p is not None]
    return sum(weights[a][b] for a, b in combinations(real, 2))


def exhaustive_partition(
    weights: Sequence[Sequence[int]], size: int, required: Sequence[int]
) -> tuple[list[Block], int] | None:
    """The first-enumerated highest-scoring partition with a padding-free set holding all of `required`."""
    count = len(weights)
    padding = -count % size
    items: list[int | None] = [*range(count), *([None] * padding)]
    best: list[Block] | None = None
    best_score = 0
    for partition in _partitions(items, size, padding):
        if not any(set(required) <= set(block) and None not in block for block in partition):
            continue
        score = sum(_set_score(weights, block) for block in partition)
        if best is None or score > best_score:
            best, best_score = partition, score
    return None if best is None else (best, best_score)


def exhaustive_preferred(
    topology: Topology, available: Sequence[int], must_include: Sequence[int], size: int
) -> list[int]:
    """The whole rule over GPU indices, written as plainly as possible (ties: GPUs in index order)."""
    order = sorted(set(available))
    required = sorted(set(must_include))
    if size <= 0 or len(order) < size or len(required) > size or not set(required) <= set(order):
        return []
    if size == 1:
        return [required[0] if required else order[0]]
    weights = topology.score_matrix(order)
    wanted = [order.index(gpu) for gpu in required]
    found = exhaustive_partition(weights, size, wanted)
    if found is None:
        return []
    best: Block = ()
    best_score = -1
    for block in found[0]:
        if None in block or not set(wanted) <= set(block):
            continue
        score = _set_score(weights, block)
        if score > best_score:
            best, best_score = block, score
    return [order[p] for p in best if p is not None]
