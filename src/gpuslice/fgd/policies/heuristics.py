"""The five baseline policies of the FGD paper (reference §5.1-5.5), vectorised over all nodes per pod."""

from __future__ import annotations

import numpy as np

from gpuslice.fgd.policies.base import (
    MAX_SCORE,
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    Placement,
    PolicyContext,
    argmax_or_none,
    best_fit_gpus,
    first_true,
    lowest_full_gpus,
)
from gpuslice.fgd.shapes import Shape
from gpuslice.units import MILLI

NO_FIT = 1 << 40  # larger than any free milli: "this GPU does not fit"


class _BestFitGpuPolicy:
    """Common frame: score feasible nodes, take the maximum (first on ties), bind best-fit GPUs."""

    name = ""

    def __init__(self, context: PolicyContext) -> None:
        self.cluster = context.cluster

    def scores(self, shape: Shape, feasible: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def place(self, shape: Shape, memory: int) -> Placement | None:
        cluster = self.cluster
        ok = cluster.feasible(shape.cpu, memory, shape.num_gpu, shape.gpu_milli, shape.mask)
        if not ok.any():
            return None
        node = argmax_or_none(np.where(ok, self.scores(shape, ok), -1))
        if node < 0:
            return None
        return Placement(node, best_fit_gpus(cluster.gpu_rows[node], shape))

    def bound(self, placement: Placement, shape: Shape) -> None:
        return None


class RandomPolicy:
    """§5.1: one feasible node uniformly at random; a fractional pod's GPU uniformly among those that fit."""

    name = "random"

    def __init__(self, context: PolicyContext) -> None:
        self.cluster = context.cluster
        self.rng = context.rng

    def place(self, shape: Shape, memory: int) -> Placement | None:
        cluster = self.cluster
        candidates = np.flatnonzero(cluster.feasible(shape.cpu, memory, shape.num_gpu, shape.gpu_milli, shape.mask))
        if len(candidates) == 0:
            return None
        node = int(candidates[int(self.rng.integers(len(candidates)))])
        row = cluster.gpu_rows[node]
        if shape.is_fractional:
            fitting = [i for i, free in enumerate(row) if free >= shape.gpu_milli]
            return Placement(node, (fitting[int(self.rng.integers(len(fitting)))],))
        return Placement(node, lowest_full_gpus(row, shape.num_gpu) if shape.num_gpu else ())

    def bound(self, placement: Placement, shape: Shape) -> None:
        return None


class DotProdPolicy(_BestFitGpuPolicy):
    """§5.2: ⌊100 (1 - <node free, pod request>/2)⌋ on (CPU/128000, total GPU milli/8000): smallest dot wins."""

    name = "dotprod"

    def scores(self, shape: Shape, feasible: np.ndarray) -> np.ndarray:
        cluster = self.cluster
        dot = (cluster.cpu / MAX_SPEC_CPU) * (shape.cpu / MAX_SPEC_CPU) + (cluster.free_total / MAX_SPEC_GPU) * (
            shape.gpu_request / MAX_SPEC_GPU
        )
        return ((1.0 - dot / 2) * MAX_SCORE).astype(np.int64)


class ClusteringPolicy(_BestFitGpuPolicy):
    """§5.3 GpuClustering: keep pods of one class ('share', 'k-gpu') together; fuller nodes slightly first."""

    name = "clustering"

    def __init__(self, context: PolicyContext) -> None:
        super().__init__(context)
        classes = sorted({s.cluster_class for s in context.shapes if s.cluster_class})
        self.class_bit = {name: 1 << i for i, name in enumerate(classes)}
        self.node_classes = np.zeros(self.cluster.n, dtype=np.int64)
        self.hosted: dict[tuple[int, str], int] = {}  # (node, class) -> pods of that class on the node

    def place(self, shape: Shape, memory: int) -> Placement | None:
        if shape.num_gpu == 0:  # every node scores 0: the first feasible node in tie order
            cluster = self.cluster
            node = first_true(cluster.feasible(shape.cpu, memory, 0, 0, shape.mask))
            return None if node < 0 else Placement(node, ())
        return super().place(shape, memory)

    def scores(self, shape: Shape, feasible: np.ndarray) -> np.ndarray:
        bit = self.class_bit[shape.cluster_class]
        hosted = self.node_classes
        fullness = (MAX_SCORE // 4) * (MAX_SPEC_GPU - self.cluster.free_total) // MAX_SPEC_GPU
        same = (hosted & bit) != 0
        other = (hosted & ~bit) != 0
        bonus = np.where(same, np.where(other, 50, 75), np.where(other, 0, 25))
        return np.asarray(fullness + bonus)

    def bound(self, placement: Placement, shape: Shape) -> None:
        if shape.num_gpu:
            self.node_classes[placement.node] |= self.class_bit[shape.cluster_class]
            key = (placement.node, shape.cluster_class)
            self.hosted[key] = self.hosted.get(key, 0) + 1

    def released(self, placement: Placement, shape: Shape) -> None:
        """A pod left (real-time replay): the node stops hosting its class when no pod of the class is left."""
        if shape.num_gpu:
            key = (placement.node, shape.cluster_class)
            self.hosted[key] -= 1
            if not self.hosted[key]:
                del self.hosted[key]
                self.node_classes[placement.node] &= ~self.class_bit[shape.cluster_class]


class PackingPolicy(_BestFitGpuPolicy):
    """§5.4 GpuPacking: partly used GPUs first, then partly used nodes, then idle nodes."""

    name = "packing"

    def place(self, shape: Shape, memory: int) -> Placement | None:
        if shape.num_gpu == 0:
            node = first_true(self.cluster.feasible(shape.cpu, memory, 0, 0, shape.mask))
            return None if node < 0 else Placement(node, ())
        return super().place(shape, memory)

    def scores(self, shape: Shape, feasible: np.ndarray) -> np.ndarray:
        cluster = self.cluster
        full = cluster.full_count
        idle_score = np.maximum(MAX_SCORE // 3 - full, full)
        if shape.gpu_milli == MILLI:
            used_score: np.ndarray | int = max(MAX_SCORE // 2 - shape.num_gpu, MAX_SCORE // 3)
        else:
            gpus = cluster.gpu_sorted
            smallest = np.where(gpus >= shape.gpu_milli, gpus, NO_FIT).min(axis=1)
            shared = np.maximum(MAX_SCORE - (smallest * 100 // MILLI) // 10, MAX_SCORE // 2)
            used_score = np.where(smallest == MILLI, max(MAX_SCORE // 2 - 1, MAX_SCORE // 3), shared)
        return np.where(full == cluster.gpus, idle_score, used_score)


class BestFitPolicy(_BestFitGpuPolicy):
    """§5.5 BestFit: least weighted leftover (CPU/128000, GPU/8000) wins, min-max normalised to 0-100."""

    name = "best-fit"

    def scores(self, shape: Shape, feasible: np.ndarray) -> np.ndarray:
        cluster = self.cluster
        leftover = ((cluster.cpu - shape.cpu) / MAX_SPEC_CPU) * 0.5 + (
            (cluster.free_total - shape.gpu_request) / MAX_SPEC_GPU
        ) * 0.5
        raw = ((1.0 - leftover) * MAX_SCORE).astype(np.int64)
        low, high = int(raw[feasible].min()), int(raw[feasible].max())
        if high == low:
            return np.zeros(cluster.n, dtype=np.int64)
        return (raw - low) * MAX_SCORE // (high - low)
