"""FGD (reference §5.6): place where the node fragmentation F_n(M) grows least, scored ⌊100·σ(Δ/1000)⌋.

Scores depend only on the node state and the pod shape, so they are cached per (shape, state id) and
computed in vectorised batches for the states not scored yet: a default-trace run scores ~150 k
(state, shape) pairs instead of 13 M (node, pod) pairs, about one small numpy batch per pod.
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.policies.base import MAX_SCORE, Placement, PolicyContext, argmax_or_none, lowest_full_gpus
from gpuslice.fgd.shapes import Shape
from gpuslice.fgd.state import OpenbCluster, StateTable
from gpuslice.units import MILLI

UNKNOWN = -2
INFEASIBLE = -1
MEMORY_RETRIES = 4  # best nodes short of memory passed over one by one before masking all such nodes
SCALAR_UP_TO = 40  # states per batch up to which plain Python scores them faster than numpy
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

    A pod changes `gpus` GPUs from `before` to `after` free milli (a share: one GPU, v to v - milli; whole
    GPUs: 1000 to 0; CPU only: none) and moves the node to the CPU rank of its CPU left. The one-GPU tasks'
    fitting sum there is the state's column for that rank plus `gpus` differences of one contribution
    row (see `TaskArrays.contribution`), so a (state, placement) costs a few lookups; only tasks that need
    several GPUs (none in most openb workloads) are summed task by task.
    """

    adjusts = False  # whether `adjustment` adds anything (the Python path skips the call when not)

    def __init__(self, cluster: OpenbCluster, num_shapes: int) -> None:
        self.cluster = cluster
        self.states: StateTable = cluster.states
        tasks = cluster.states.tasks
        self.total_weight = tasks.total_weight
        self.thresholds = score_thresholds(tasks.total_weight)
        self.slot_bits = np.left_shift(1, np.arange(cluster.slots, dtype=np.int64))
        self.cache = np.full((num_shapes, self.states.capacity), UNKNOWN, dtype=np.int16)
        self.best_slots = np.zeros((num_shapes, self.states.capacity), dtype=np.int64)
        self.num_models = len(tasks.usable)
        self.levels = tasks.cpu_levels
        self.ranks = self.states.ranks
        self.contribution = tasks.contribution
        self.flat_contribution = tasks.contribution.reshape(-1)
        self._allowed: dict[int, npt.NDArray[np.bool_]] = {}
        self._threshold_list: list[int] = self.thresholds.tolist()
        self._cpu_levels: list[int] = tasks.cpu_levels.tolist()
        self._columns: list[list[list[int]]] = [[[] for _ in range(self.ranks)] for _ in tasks.contribution]
        st = self.states
        size = st.multi_size
        # per model (index -1: no GPUs, as model 0) and CPU rank: the multi-GPU tasks that may run there, as
        # (fitting-milli column, count column, index into a change of the multi columns, weight, GPUs needed)
        self._multi_runnable: list[list[list[tuple[int, int, int, int, int, int]]]] = [
            [
                [
                    (
                        st.multi_cols.start + j,
                        st.multi_cols.start + size + j,
                        j,
                        size + j,
                        int(st.multi_weight[j]),
                        int(st.multi_need[j]),
                    )
                    for j in np.flatnonzero(by_rank).tolist()
                ]
                for by_rank in by_model
            ]
            for by_model in st.multi_runs
        ]
        self._multi_table_lists: list[list[int]] = st.multi_table.tolist() if size else []

    def _grow(self) -> None:
        shapes, old = self.cache.shape
        cache = np.full((shapes, self.states.capacity), UNKNOWN, dtype=np.int16)
        cache[:, :old] = self.cache
        best = np.zeros((shapes, self.states.capacity), dtype=np.int64)
        best[:, :old] = self.best_slots
        self.cache, self.best_slots = cache, best

    def node_scores(self, shape: Shape) -> npt.NDArray[np.int16]:
        """Every node's score for `shape` (a fresh array the caller may change)."""
        if self.cache.shape[1] < self.states.capacity:
            self._grow()
        row = self.cache[shape.index]
        ids = self.cluster.state
        scores: npt.NDArray[np.int16] = row.take(ids)
        missing = ids[scores == UNKNOWN]
        if len(missing) > SCALAR_UP_TO:
            fresh = np.array(sorted(set(missing.tolist())), dtype=np.int64)  # np.unique would import numpy.ma
            matrix = self.slot_matrix(self.states.rows(fresh), shape)
            if not shape.is_fractional:  # one column; only a share chooses among GPUs (even on 1-GPU nodes)
                row[fresh] = matrix[:, 0]
            else:
                best = matrix.max(axis=1)
                row[fresh] = best
                self.best_slots[shape.index, fresh] = (matrix == best[:, None]) @ self.slot_bits[: matrix.shape[1]]
            scores = row.take(ids)
        elif len(missing):  # a few states: plain Python beats numpy's per-call cost
            self.score_few(missing, shape)
            scores = row.take(ids)
        return scores

    def slot_matrix(self, rows: IntArray, shape: Shape) -> IntArray:
        """Scores (states x GPU slots) of placing `shape` on each sorted GPU slot of each state (packed
        `rows`); a CPU-only or whole-GPU pod has a single column. INFEASIBLE where the state cannot host it."""
        delta, valid = self.slot_deltas(rows, shape)
        adjustment = self.adjustments(rows, shape)
        if adjustment is not None:
            delta = delta + adjustment[:, None]
        return np.where(valid, np.searchsorted(self.thresholds, delta, side="right"), INFEASIBLE)

    def adjustments(self, rows: IntArray, shape: Shape) -> IntArray | None:
        """What a variant adds to each state's weighted Δ (None: nothing); `adjustment` is the same per state."""
        return None

    def adjustment(self, total: int, cpu: int, shape: Shape) -> int:
        return 0

    def column(self, model: int, rank: int) -> list[int]:
        """contribution[model, rank] as a Python list (converted once, when first used)."""
        column = self._columns[model][rank]
        if not column:
            column = self._columns[model][rank] = self.contribution[model, rank].tolist()
        return column

    def score_few(self, sids: IntArray, shape: Shape) -> None:
        """Score and cache the given states one by one: the same integers as `slot_matrix`, in Python."""
        st = self.states
        cache, best_slots = self.cache[shape.index], self.best_slots[shape.index]
        thresholds, levels, columns = self._threshold_list, self._cpu_levels, self._columns
        k, milli, cpu, mask, weight = shape.num_gpu, shape.gpu_milli, shape.cpu, shape.mask, self.total_weight
        checks_model = mask != self.cluster.all_models and k > 0
        fractional, multi, adjusts = shape.is_fractional, st.multi_size > 0, self.adjusts
        if not fractional and k > st.slots:
            cache[sids] = INFEASIBLE
            return
        model_col, cpu_col, fit_col, total_col = st.MODEL, st.CPU, st.FIT, st.TOTAL
        gpu_start, gpu_stop, rank_start = st.gpu_cols.start, st.gpu_cols.stop, st.rank_cols.start
        whole_gpu = gpu_start + k - 1  # the k-th largest free GPU, which a whole-GPU pod needs full
        taken = k * milli * weight
        sid_list = sids.tolist()
        for sid, values in zip(sid_list, st.row_lists(sid_list), strict=True):
            model, cpu_after = values[model_col], values[cpu_col] - cpu
            if cpu_after < 0 or (checks_model and not (mask >> max(model, 0)) & 1):
                cache[sid] = INFEASIBLE
                continue
            rank = bisect.bisect_right(levels, cpu_after)
            # Δ = taken·W - FIT before + FIT after (+ a variant's adjustment); FIT after starts from the
            # one-GPU tasks' sum at the new CPU rank with the GPUs unchanged
            base = taken + values[rank_start + rank] - values[fit_col]
            if adjusts:
                base += self.adjustment(values[total_col], values[cpu_col], shape)
            column = columns[model][rank] or self.column(model, rank)
            if not fractional:
                if k:
                    if values[whole_gpu] < milli:
                        cache[sid] = INFEASIBLE
                        continue
                    base += k * (column[MILLI - milli] - column[MILLI])
                if multi:
                    base += self.multi_after(values, model, rank, k, MILLI, MILLI - milli)
                cache[sid] = bisect.bisect_right(thresholds, base)
                continue
            best, bits, last, score = INFEASIBLE, 0, -1, INFEASIBLE
            for slot, free in enumerate(values[gpu_start:gpu_stop]):
                if free < milli:
                    break  # sorted high to low: no later GPU fits either
                if free != last:  # equal free values are neighbours (sorted) and score the same
                    delta = base + column[free - milli] - column[free]
                    if multi:
                        delta += self.multi_after(values, model, rank, 1, free, free - milli)
                    score, last = bisect.bisect_right(thresholds, delta), free
                if score > best:
                    best, bits = score, 1 << slot
                elif score == best:
                    bits |= 1 << slot
            cache[sid] = best
            best_slots[sid] = bits

    def multi_after(self, values: list[int], model: int, rank: int, gpus: int, before: int, after: int) -> int:
        """The multi-GPU tasks' fitting sum after `gpus` GPUs of the state (`values`, a packed row) went from
        `before` to `after` free milli, at CPU rank `rank`."""
        table = self._multi_table_lists
        change_after, change_before = table[after], table[before]
        fitting = 0
        for big, count, big_change, count_change, w, need in self._multi_runnable[model][rank]:
            if values[count] + gpus * (change_after[count_change] - change_before[count_change]) >= need:
                fitting += w * (values[big] + gpus * (change_after[big_change] - change_before[big_change]))
        return fitting

    def allowed_models(self, mask: int) -> npt.NDArray[np.bool_]:
        """allowed[model]: the shape's model constraint admits it (index -1, no GPUs, reads model 0's bit)."""
        allowed = self._allowed.get(mask)
        if allowed is None:
            bits = [bool((mask >> m) & 1) for m in range(self.num_models)]
            allowed = self._allowed[mask] = np.array([*bits, bits[0]], dtype=bool)
        return allowed

    def slot_deltas(self, rows: IntArray, shape: Shape) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        """Δ = Σ_m w_m (F_n(m) before - after) per (state, slot) and whether that placement is possible.

        With FIT = Σ_m w_m (milli task m can use) and F = total·W - FIT, a pod taking `taken` milli gives
        Δ = taken·W - FIT_before + FIT_after (exact integers)."""
        st = self.states
        model = rows[:, st.MODEL]
        k, milli = shape.num_gpu, shape.gpu_milli
        cpu_after = rows[:, st.CPU] - shape.cpu
        ok = cpu_after >= 0
        if shape.mask != self.cluster.all_models and k:
            ok &= self.allowed_models(shape.mask)[model]
        rank = np.searchsorted(self.levels, cpu_after, side="right")
        count = len(rows)
        base = rows[np.arange(count), st.rank_cols.start + rank] - rows[:, st.FIT]
        line = (model * self.ranks + rank) * (MILLI + 1)  # where this state's contribution row starts
        flat = self.flat_contribution
        if not shape.is_fractional:
            if k > st.slots:
                return np.zeros((count, 1), dtype=np.int64), np.zeros((count, 1), dtype=bool)
            if k:
                ok &= rows[:, st.gpu_cols.start + k - 1] >= milli
                base = base + k * milli * self.total_weight + k * (flat[line + MILLI - milli] - flat[line + MILLI])
            if st.multi_size:
                base = base + self.multi_after_batch(rows, model, rank, k, MILLI, MILLI - milli)
            return base[:, None], ok[:, None]
        gpus = rows[:, st.gpu_cols]
        left = gpus - milli
        valid = ok[:, None] & (left >= 0)
        left = np.maximum(left, 0)
        line = line[:, None]
        delta = (base + milli * self.total_weight)[:, None] + flat[line + left] - flat[line + gpus]
        if st.multi_size:
            delta = delta + self.multi_after_batch(rows, model, rank, 1, gpus, left)
        return delta, valid

    def multi_after_batch(
        self, rows: IntArray, model: IntArray, rank: IntArray, gpus: int, before: IntArray | int, after: IntArray | int
    ) -> IntArray:
        """`multi_after` for many states at once; `before`/`after` are per state or per (state, slot)."""
        st = self.states
        table = st.multi_table
        change = gpus * (table[after] - table[before])
        columns = rows[:, st.multi_cols]
        if np.ndim(before) == 2:  # per (state, slot)
            return st.multi_fit(model[:, None], rank[:, None], columns[:, None, :] + change)
        return st.multi_fit(model, rank, columns + change)

    def choose_gpu(self, node: int, shape: Shape) -> int:
        """The physical GPU whose placement scores best; the lowest index among equal integer scores."""
        sid = self.cluster.state_list[node]
        bits = int(self.best_slots[shape.index, sid])
        best_values = {value for i, value in enumerate(self.cluster.sorted_keys[node]) if (bits >> i) & 1}
        for gpu, free in enumerate(self.cluster.gpu_rows[node]):
            if free in best_values:
                return gpu
        raise ValueError(f"node {self.cluster.names[node]}: no GPU reaches the best FGD score")


class FgdPolicy:
    name = "fgd"

    def __init__(self, context: PolicyContext) -> None:
        self.cluster = context.cluster
        self.scorer = self.make_scorer(context)
        self.chosen_state = -1  # the state of the node `place` chose, until `bound` derives its successor

    def make_scorer(self, context: PolicyContext) -> FgdScorer:
        return FgdScorer(context.cluster, len(context.shapes))

    def place(self, shape: Shape, memory: int) -> Placement | None:
        cluster = self.cluster
        if shape.cpu == 0 and shape.num_gpu == 0 and memory == 0:
            return Placement(0, ())  # no request at all: 100 on every node, the first in tie order wins
        scores = self.scorer.node_scores(shape)
        # masking nodes short of memory only lowers scores, so when the first best node has the memory it
        # is also the first best of the masked scores: one comparison instead of two array passes
        node = int(scores.argmax())
        if scores[node] < 0:
            return None
        if cluster.memory_list[node] < memory:
            # the first best node with the memory: usually the next best, so mask a few one by one before
            # masking every node short of memory at once
            for _ in range(MEMORY_RETRIES):
                scores[node] = INFEASIBLE
                node = int(scores.argmax())
                if scores[node] < 0:
                    return None
                if cluster.memory_list[node] >= memory:
                    break
            else:
                node = argmax_or_none(np.where(cluster.memory >= memory, scores, INFEASIBLE))
                if node < 0:
                    return None
        self.chosen_state = cluster.state_list[node]
        return Placement(node, self.gpus_for(node, shape))

    def gpus_for(self, node: int, shape: Shape) -> tuple[int, ...]:
        if shape.num_gpu == 0:
            return ()
        if shape.is_fractional:
            return (self.scorer.choose_gpu(node, shape),)
        return lowest_full_gpus(self.cluster.gpu_rows[node], shape.num_gpu)

    def bound(self, placement: Placement, shape: Shape) -> None:
        """Derive the node's new state from its old one now: the next pod scores it, and one small update
        costs less than deriving it from scratch there."""
        parent, self.chosen_state = self.chosen_state, -1
        if parent < 0:
            return
        node, gpus = placement
        after = self.cluster.gpu_rows[node][gpus[0]] if gpus else 0
        states = self.cluster.states
        states.derive_child(self.cluster.state_list[node], parent, len(gpus), after + shape.gpu_milli, after)
