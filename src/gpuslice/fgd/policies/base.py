"""What every openb placement policy shares: the protocol, its context, and the GPU-index rules of §4."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from gpuslice.fgd.shapes import Shape, TypicalTasks
from gpuslice.fgd.state import OpenbCluster
from gpuslice.units import MILLI

MAX_SPEC_CPU = 128_000
MAX_SPEC_GPU = 8_000
MAX_SCORE = 100


class Placement(NamedTuple):
    node: int
    gpus: tuple[int, ...]


class OpenbPolicy(Protocol):
    """Chooses a node (by tie rank) and the GPU indices for one pod, or None when no node fits.

    `bound` is called after the cluster has bound the placement, for policies that keep their own state.
    """

    name: str

    def place(self, shape: Shape, memory: int) -> Placement | None: ...

    def bound(self, placement: Placement, shape: Shape) -> None: ...


@dataclass(frozen=True)
class PolicyContext:
    cluster: OpenbCluster
    shapes: Sequence[Shape]
    typical: TypicalTasks
    rng: np.random.Generator


def lowest_full_gpus(row: Sequence[int], count: int) -> tuple[int, ...]:
    """Whole-GPU pods take the lowest-indexed fully free GPUs."""
    chosen = [i for i, free in enumerate(row) if free == MILLI][:count]
    if len(chosen) < count:
        raise ValueError(f"only {len(chosen)} fully free GPUs, pod needs {count}")
    return tuple(chosen)


def best_fit_gpu(row: Sequence[int], milli: int) -> int:
    """The GPU with the least free milli that still fits; lowest index on ties."""
    best = -1
    for i, free in enumerate(row):
        if free >= milli and (best < 0 or free < row[best]):
            best = i
    if best < 0:
        raise ValueError(f"no GPU has {milli} milli free")
    return best


def best_fit_gpus(row: Sequence[int], shape: Shape) -> tuple[int, ...]:
    """GPU indices under the best-fit rule (DotProd, GpuClustering, GpuPacking, BestFit)."""
    if shape.num_gpu == 0:
        return ()
    if shape.is_fractional:
        return (best_fit_gpu(row, shape.gpu_milli),)
    return lowest_full_gpus(row, shape.num_gpu)


def first_true(mask: np.ndarray) -> int:
    """Index of the first True (the smallest tie prefix), or -1."""
    index = int(np.argmax(mask))
    return index if mask[index] else -1


def argmax_or_none(scores: np.ndarray) -> int:
    """Highest score, first index on ties (the §4 tie rule); -1 when every score is negative (infeasible)."""
    index = int(np.argmax(scores))
    return index if scores[index] >= 0 else -1
