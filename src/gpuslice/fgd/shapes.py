"""Pod shapes (CPU, per-GPU milli, GPU count, model constraint) and FGD's typical-task distribution."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.trace import PodTable, spec_mask
from gpuslice.units import MILLI

POPULARITY_THRESHOLD_PCT = 95


@dataclass(frozen=True)
class Shape:
    """One pod shape; every pod of the trace maps to one. `mask` has bit i set when node model i is allowed."""

    index: int
    cpu: int
    gpu_milli: int
    num_gpu: int
    spec: str
    mask: int

    @property
    def gpu_request(self) -> int:
        return self.gpu_milli * self.num_gpu

    @property
    def is_fractional(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI

    @property
    def cluster_class(self) -> str:
        """GpuClustering's class: 'share', '<k>-gpu', or '' for a CPU-only pod."""
        if self.num_gpu == 0:
            return ""
        return "share" if self.is_fractional else f"{self.num_gpu}-gpu"


@dataclass(frozen=True)
class ShapeTable:
    shapes: tuple[Shape, ...]
    pod_shape: npt.NDArray[np.int64]  # shape index of each pod of the table, in the table's order
    counts: tuple[int, ...]


def shape_key(cpu: int, gpu_milli: int, num_gpu: int, spec: str) -> tuple[int, int, int, str]:
    return (cpu, gpu_milli, num_gpu, spec)


def build_shapes(pods: PodTable, models: tuple[str, ...]) -> ShapeTable:
    keys = [
        shape_key(int(c), int(u), int(k), s)
        for c, u, k, s in zip(pods.cpu.tolist(), pods.gpu_milli.tolist(), pods.num_gpu.tolist(), pods.spec, strict=True)
    ]
    counter = Counter(keys)
    ordered = sorted(counter)
    index = {key: i for i, key in enumerate(ordered)}
    shapes = tuple(
        Shape(index=i, cpu=c, gpu_milli=u, num_gpu=k, spec=s, mask=spec_mask(s, models))
        for i, (c, u, k, s) in enumerate(ordered)
    )
    pod_shape = np.array([index[key] for key in keys], dtype=np.int64)
    return ShapeTable(shapes=shapes, pod_shape=pod_shape, counts=tuple(counter[key] for key in ordered))


@dataclass(frozen=True)
class TypicalTasks:
    """The target workload M: the most popular shapes (>= 95 % of pods) with integer weights (pod counts).

    p_m = weight_m / total_weight. Weights stay integers so that fragmentation sums are exact.
    """

    shapes: tuple[Shape, ...]
    weights: tuple[int, ...]

    @property
    def total_weight(self) -> int:
        return sum(self.weights)

    def probabilities(self) -> list[float]:
        total = self.total_weight
        return [w / total for w in self.weights]


def typical_tasks(table: ShapeTable, threshold_pct: int = POPULARITY_THRESHOLD_PCT) -> TypicalTasks:
    """Sort shapes by pod count (ties: larger shape first, as the reference sort does) and keep adding
    them one at a time while the cumulative count is below threshold % of all pods (CPU-only pods included)."""
    total = sum(table.counts)
    ranked = sorted(
        zip(table.shapes, table.counts, strict=True),
        key=lambda item: (item[1], item[0].cpu, item[0].gpu_milli, item[0].num_gpu, item[0].spec),
        reverse=True,
    )
    chosen: list[tuple[Shape, int]] = []
    cumulative = 0
    for shape, count in ranked:
        if cumulative * 100 >= threshold_pct * total:
            break
        chosen.append((shape, count))
        cumulative += count
    return TypicalTasks(shapes=tuple(s for s, _ in chosen), weights=tuple(c for _, c in chosen))
