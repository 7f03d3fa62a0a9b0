"""FGD's fragmentation measures (reference §2): task fragment F_n(m), node fragment F_n(M), in milli-GPU."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.shapes import Shape, TypicalTasks

IntArray = npt.NDArray[np.int64]


def task_fragment(cpu_free: int, gpu_free: Sequence[int], model: int, task: Shape) -> int:
    """F_n(m): the node's free GPU milli that task m cannot use.

    All of it when m is CPU-only, cannot use the node's model, lacks CPU or lacks GPUs (Q1, Q2, Q4, no
    access); otherwise (Q3) only the GPUs too small for m.
    """
    free_total = sum(gpu_free)
    if task.num_gpu == 0 or model < 0 or not (task.mask >> model) & 1:
        return free_total
    fitting = sum(1 for g in gpu_free if g >= task.gpu_milli)
    if fitting < task.num_gpu or cpu_free < task.cpu:
        return free_total
    return sum(g for g in gpu_free if g < task.gpu_milli)


def node_fragment_weighted(cpu_free: int, gpu_free: Sequence[int], model: int, typical: TypicalTasks) -> int:
    """Σ_m weight_m · F_n(m): F_n(M) scaled by the typical tasks' total weight (exact integer)."""
    return sum(
        w * task_fragment(cpu_free, gpu_free, model, t) for t, w in zip(typical.shapes, typical.weights, strict=True)
    )


def node_fragment(cpu_free: int, gpu_free: Sequence[int], model: int, typical: TypicalTasks) -> float:
    """F_n(M) = Σ_m p_m · F_n(m)."""
    return node_fragment_weighted(cpu_free, gpu_free, model, typical) / typical.total_weight


@dataclass(frozen=True)
class TaskArrays:
    """The typical tasks as arrays for vectorised fragment sums.

    `usable[model, t]` is False for CPU-only tasks and for models task t may not use, so such tasks always
    count the whole free capacity as fragment.
    """

    cpu: IntArray
    gpu_milli: IntArray
    num_gpu: IntArray
    weight: IntArray
    usable: npt.NDArray[np.bool_]
    total_weight: int

    @classmethod
    def build(cls, typical: TypicalTasks, num_models: int) -> TaskArrays:
        shapes = typical.shapes
        usable = np.array(
            [[t.num_gpu > 0 and bool((t.mask >> m) & 1) for t in shapes] for m in range(max(num_models, 1))],
            dtype=bool,
        ).reshape(max(num_models, 1), len(shapes))
        return cls(
            cpu=np.array([t.cpu for t in shapes], dtype=np.int64),
            gpu_milli=np.array([t.gpu_milli for t in shapes], dtype=np.int64),
            num_gpu=np.array([t.num_gpu for t in shapes], dtype=np.int64),
            weight=np.array(typical.weights, dtype=np.int64),
            usable=usable,
            total_weight=typical.total_weight,
        )

    def fitting(self, gpu_free: IntArray) -> tuple[IntArray, IntArray]:
        """For GPU rows (..., G): per task, the free milli on GPUs big enough for it and how many there are."""
        fits = gpu_free[..., :, None] >= self.gpu_milli
        big = np.where(fits, gpu_free[..., :, None], 0).sum(axis=-2)
        return big, fits.sum(axis=-2)

    def weighted_fragment(
        self, model: IntArray, cpu: IntArray, total: IntArray, big: IntArray, count: IntArray
    ) -> IntArray:
        """Σ_t w_t F(t) for rows of (model, cpu free, total free, big[t], count[t]) — integer exact.

        F(t) = total - big[t] when task t can run (model usable, CPU enough, enough fitting GPUs), else total.
        """
        runs = self.usable[model] & (cpu[..., None] >= self.cpu) & (count >= self.num_gpu)
        fitting_sum = np.asarray(np.where(runs, big, 0) @ self.weight, dtype=np.int64)
        return np.asarray(total * self.total_weight - fitting_sum, dtype=np.int64)
