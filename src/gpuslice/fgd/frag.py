"""FGD's fragmentation measures (reference §2): task fragment F_n(m), node fragment F_n(M), in milli-GPU."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.shapes import Shape, TypicalTasks
from gpuslice.units import MILLI

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
    """The typical tasks as arrays and tables for vectorised fragment sums (fgd.state uses them).

    `usable[model, t]` is False for CPU-only tasks and for models task t may not use, so such tasks always
    count the whole free capacity as fragment. `free_table[v]` holds, for one GPU with v free milli
    (0..1000), [v, per task: v if the task fits on it else 0, per task: 1 if it fits else 0];
    `runs_by_rank[model, r, t]` says whether task t may use the model and needs at most the r-th smallest
    task CPU; `contribution` is what one GPU adds to the one-GPU tasks' fitting sum.
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

    @property
    def size(self) -> int:
        return len(self.weight)

    @cached_property
    def free_table(self) -> IntArray:
        free = np.arange(MILLI + 1, dtype=np.int64)[:, None]
        fits = free >= self.gpu_milli
        return np.concatenate([free, free * fits, fits.astype(np.int64)], axis=1)

    @cached_property
    def cpu_levels(self) -> IntArray:
        """The distinct task CPU requests, ascending: a CPU amount's rank is how many of them it covers."""
        return np.array(sorted(set(self.cpu.tolist())), dtype=np.int64)  # np.unique would import numpy.ma (~15 ms)

    @cached_property
    def runs_by_rank(self) -> npt.NDArray[np.bool_]:
        """[model, rank, task]; the extra last model row answers for model -1 (a node without GPUs) as
        model 0 does: such a node has no free GPU, so no task fits there whatever the row says."""
        rank_of_task = np.searchsorted(self.cpu_levels, self.cpu)
        ranks = np.arange(len(self.cpu_levels) + 1)
        usable = np.concatenate([self.usable, self.usable[:1]])
        return usable[:, None, :] & (rank_of_task[None, None, :] < ranks[None, :, None])

    @cached_property
    def multi(self) -> IntArray:
        """The tasks that need two GPUs or more, ascending. Only they need per-task columns in a node state."""
        return np.flatnonzero(self.num_gpu >= 2)

    @cached_property
    def contribution(self) -> IntArray:
        """[model, rank, v]: what one GPU with v free milli (0..1000) adds to Σ_t w_t (milli task t can use),
        summed over the one-GPU tasks t allowed on that model that fit in CPU of that rank.

        A one-GPU task runs exactly when some GPU fits it, so over those tasks the fitting sum is a sum over
        the node's GPUs, and a pod that changes one GPU from v to v' changes it by
        `contribution[model, rank, v'] - contribution[model, rank, v]` at every rank. Tasks that need several
        GPUs also need enough fitting GPUs, which is not additive: they keep per-task columns (`multi`)."""
        single = self.num_gpu == 1
        levels = np.array(sorted(set(self.gpu_milli[single].tolist())), dtype=np.int64)  # distinct, ascending
        level_of = np.searchsorted(levels, self.gpu_milli)
        one_hot = (single[:, None] & (level_of[:, None] == np.arange(len(levels)))).astype(np.int64)
        weighted_runs = self.runs_by_rank.astype(np.int64) * self.weight  # [model, rank, task]
        per_level = weighted_runs @ one_hot  # [model, rank, level]: the weight of the tasks asking that milli
        cumulative = np.concatenate([np.zeros((*per_level.shape[:2], 1), np.int64), per_level.cumsum(axis=2)], 2)
        free = np.arange(MILLI + 1, dtype=np.int64)
        covered = np.searchsorted(levels, free, side="right")  # how many levels a GPU with v free fits
        return np.asarray(cumulative[:, :, covered] * free, dtype=np.int64)
