"""FGD (reference §5.6): place where the node fragmentation F_n(M) grows least, scored ⌊100·σ(Δ/1000)⌋.

Scores depend only on the node state and the pod shape, so they are cached per (shape, state id) and
computed in vectorised batches for the states not scored yet: a default-trace run scores ~150 k
(state, shape) pairs instead of 13 M (node, pod) pairs, about one small numpy batch per pod.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.policies.base import MAX_SCORE, Placement, PolicyContext, argmax_or_none, lowest_full_gpus
from gpuslice.fgd.shapes import Shape
from gpuslice.fgd.state import OpenbCluster, StateTable
from gpuslice.gpu.units import MILLI

UNKNOWN = -2
INFEASIBLE = -1
IntArray = npt.NDArray[np.int64]


def sigmoid_score(delta_weighted: int, total_weight: int) -> int:
    """⌊100 · σ(Δ/1000)⌋ for Δ = delta_weighted / total_weight milli-GPU, as the reference code computes it."""
    x = delta_weighted / (total_weight * 1000.0)
    return int((1.0 / (1.0 + math.exp(-x))) * MAX_SCORE)


def score_thresholds(total_weight: int) -> IntArray:
    """θ[s-1] = the least integer Δw with sigmoid_score(Δw) >= s, for s = 1..100.

    The score is a non-decreasing step function of the (integer, weighted) Δ, so
    `searchsorted(θ, Δw, 'right')` equals it exactly and costs one vectorised call instead of five.
    """
    limit = 50 * MILLI * total_weight  # σ(50) is 1.0 in floating point: every score is reached below this
    thresholds = []
    for score in range(1, MAX_SCORE + 1):
        low, high = -limit, limit + 1
        while low < high:  # least d in [-limit, limit + 1] with sigmoid_score(d) >= score
            mid = (low + high) // 2
            if sigmoid_score(mid, total_weight) >= score:
                high = mid
            else:
                low = mid + 1
        thresholds.append(low)
    return np.array(thresholds, dtype=np.int64)


class FgdScorer:
    """FGD scores of node states for pod shapes.

    `node_scores(shape)` gives every node's score (-1 = the node cannot host the pod, memory aside);
    for fractional shapes it also remembers which sorted GPU slots reach the best score, so that
    `choose_gpu` binds the lowest-indexed physical GPU among them without rescoring.
    """

    def __init__(self, cluster: OpenbCluster, num_shapes: int) -> None:
        self.cluster = cluster
        self.states: StateTable = cluster.states
        tasks = cluster.states.tasks
        self.task_cpu, self.task_milli, self.task_count = tasks.cpu, tasks.gpu_milli, tasks.num_gpu
        self.task_weight, self.usable, self.total_weight = tasks.weight, tasks.usable, tasks.total_weight
        self.thresholds = score_thresholds(tasks.total_weight)
        self.slot_bits = np.left_shift(1, np.arange(cluster.slots, dtype=np.int64))
        self.cache = np.full((num_shapes, self.states.capacity), UNKNOWN, dtype=np.int16)
        self.best_slots = np.zeros((num_shapes, self.states.capacity), dtype=np.int64)

    def _grow(self) -> None:
        shapes, old = self.cache.shape
        cache = np.full((shapes, self.states.capacity), UNKNOWN, dtype=np.int16)
        cache[:, :old] = self.cache
        best = np.zeros((shapes, self.states.capacity), dtype=np.int64)
        best[:, :old] = self.best_slots
        self.cache, self.best_slots = cache, best

    def node_scores(self, shape: Shape) -> npt.NDArray[np.int16]:
        if self.cache.shape[1] < self.states.capacity:
            self._grow()
        row = self.cache[shape.index]
        ids = self.cluster.state
        scores: npt.NDArray[np.int16] = row[ids]
        missing = ids[scores == UNKNOWN]
        if len(missing):
            fresh = np.unique(missing) if len(missing) > 8 else missing
            matrix = self.slot_matrix(fresh, shape)
            best = matrix.max(axis=1)
            row[fresh] = best
            if shape.is_fractional:
                self.best_slots[shape.index, fresh] = (matrix == best[:, None]) @ self.slot_bits[: matrix.shape[1]]
            scores = row[ids]
        return scores

    def slot_matrix(self, sids: IntArray, shape: Shape) -> IntArray:
        """Scores (states x GPU slots) of placing `shape` on each sorted GPU slot of each state; a CPU-only
        or whole-GPU pod has a single column. INFEASIBLE where the state cannot host the pod."""
        delta, valid = self.slot_deltas(sids, shape)
        return np.where(valid, np.searchsorted(self.thresholds, delta, side="right"), INFEASIBLE)

    def slot_deltas(self, sids: IntArray, shape: Shape) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        """Δ = Σ_m w_m (F_n(m) before - after) per (state, slot) and whether that placement is possible."""
        st = self.states
        rows = st.rows(sids)
        model, cpu, total, frag = rows[:, st.MODEL], rows[:, st.CPU], rows[:, st.TOTAL], rows[:, st.FRAG]
        gpus, big, count = rows[:, st.gpu_cols], rows[:, st.big_cols], rows[:, st.count_cols]
        k, milli = shape.num_gpu, shape.gpu_milli
        cpu_after = cpu - shape.cpu
        ok = cpu_after >= 0
        if shape.mask != self.cluster.all_models and k:
            ok &= ((shape.mask >> np.maximum(model, 0)) & 1).astype(bool)
        cpu_runs = self.usable[np.maximum(model, 0)] & (cpu_after[:, None] >= self.task_cpu)
        if not shape.is_fractional:
            if k > st.slots:
                return np.zeros((len(sids), 1), dtype=np.int64), np.zeros((len(sids), 1), dtype=bool)
            if k:
                ok &= gpus[:, k - 1] >= milli
            taken = k * milli  # k fully free GPUs: every GPU task loses k fitting GPUs of 1000 milli
            runs = cpu_runs & (count - k >= self.task_count)
            after = (total - taken) * self.total_weight - ((big - taken) * runs) @ self.task_weight
            return (frag - after)[:, None], ok[:, None]
        fits_before = gpus[:, :, None] >= self.task_milli
        left = gpus - milli
        fits_after = left[:, :, None] >= self.task_milli
        big_after = big[:, None, :] - gpus[:, :, None] * fits_before + left[:, :, None] * fits_after
        runs = cpu_runs[:, None, :] & (count[:, None, :] - fits_before + fits_after >= self.task_count)
        after = (total - milli)[:, None] * self.total_weight - (big_after * runs) @ self.task_weight
        return frag[:, None] - after, ok[:, None] & (left >= 0)

    def choose_gpu(self, node: int, shape: Shape) -> int:
        """The physical GPU whose placement scores best; the lowest index among equal integer scores."""
        sid = self.cluster.state_list[node]
        bits = int(self.best_slots[shape.index, sid])
        ordered = self.states.packed[sid, self.states.gpu_cols].tolist()
        best_values = {value for i, value in enumerate(ordered) if (bits >> i) & 1}
        for gpu, free in enumerate(self.cluster.gpu_rows[node]):
            if free in best_values:
                return gpu
        raise ValueError(f"node {self.cluster.names[node]}: no GPU reaches the best FGD score")


class FgdPolicy:
    name = "fgd"

    def __init__(self, context: PolicyContext) -> None:
        self.cluster = context.cluster
        self.scorer = FgdScorer(context.cluster, len(context.shapes))

    def place(self, shape: Shape, memory: int) -> Placement | None:
        cluster = self.cluster
        if shape.cpu == 0 and shape.num_gpu == 0 and memory == 0:
            return Placement(0, ())  # no request at all: 100 on every node, the first in tie order wins
        scores = self.scorer.node_scores(shape)
        node = argmax_or_none(np.where(cluster.memory >= memory, scores, INFEASIBLE))
        if node < 0:
            return None
        return Placement(node, self.gpus_for(node, shape))

    def gpus_for(self, node: int, shape: Shape) -> tuple[int, ...]:
        if shape.num_gpu == 0:
            return ()
        if shape.is_fractional:
            return (self.scorer.choose_gpu(node, shape),)
        return lowest_full_gpus(self.cluster.gpu_rows[node], shape.num_gpu)

    def bound(self, placement: Placement, shape: Shape) -> None:
        return None
