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
from gpuslice.gpu.units import MILLI

UNKNOWN = -2
INFEASIBLE = -1
SCALAR_UP_TO = 6  # states per batch up to which plain Python scores them faster than numpy
DEDUPLICATE_FROM = 32  # states per batch from which scoring each distinct GPU value once pays for its extra steps
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

    Per-call numpy overhead, not arithmetic, bounds the speed (a call scores ~15 states), so every rule
    that depends on a small integer is a table lookup built once: whether each task still runs after the
    pod takes CPU (by model and CPU rank), whether the pod's model constraint admits a state, and how one
    GPU of v free milli changes each task's fitting sum and count when a fractional pod takes its share.
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
        self.num_models = len(self.usable)
        self._allowed: dict[int, npt.NDArray[np.bool_]] = {}
        self._share_tables: dict[int, IntArray] = {}
        self._whole_changes: dict[int, IntArray] = {}
        self._threshold_list: list[int] = self.thresholds.tolist()
        self._share_lists: dict[int, list[int]] = {}
        # per model (index -1: no GPUs, as model 0) and CPU rank: the tasks that may run there, as
        # (fitting-milli column, count column, share-table offsets, weight, GPUs needed) for the scalar path
        st, ntasks = self.states, tasks.size
        self._cpu_levels: list[int] = tasks.cpu_levels.tolist()
        self._runnable: list[list[list[tuple[int, int, int, int, int, int]]]] = [
            [
                [
                    (
                        st.big_cols.start + t,
                        st.count_cols.start + t,
                        t,
                        ntasks + t,
                        int(tasks.weight[t]),
                        int(tasks.num_gpu[t]),
                    )
                    for t in np.flatnonzero(by_rank).tolist()
                ]
                for by_rank in by_model
            ]
            for by_model in tasks.runs_by_rank
        ]

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
        if len(missing) > SCALAR_UP_TO:
            fresh = np.unique(missing) if len(missing) > 64 else missing  # a few repeats cost less than unique
            matrix = self.slot_matrix(self.states.rows(fresh), shape)
            if matrix.shape[1] == 1:
                row[fresh] = matrix[:, 0]
            else:
                best = matrix.max(axis=1)
                row[fresh] = best
                self.best_slots[shape.index, fresh] = (matrix == best[:, None]) @ self.slot_bits[: matrix.shape[1]]
            scores = row[ids]
        elif len(missing):  # a few states: plain Python beats numpy's per-call cost
            self.score_few(missing.tolist(), shape)
            scores = row[ids]
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

    def score_few(self, sids: list[int], shape: Shape) -> None:
        """Score and cache the given states one by one: the same integers as `slot_matrix`, in Python."""
        st = self.states
        cache, best_slots = self.cache[shape.index], self.best_slots[shape.index]
        thresholds, levels, runnable = self._threshold_list, self._cpu_levels, self._runnable
        k, milli, weight = shape.num_gpu, shape.gpu_milli, self.total_weight
        checks_model = shape.mask != self.cluster.all_models and k > 0
        gpu_start, gpu_stop = st.gpu_cols.start, st.gpu_cols.stop
        rows = st.rows(np.array(sids, dtype=np.int64)).tolist()
        for sid, values in zip(sids, rows, strict=True):
            model, cpu_after = values[st.MODEL], values[st.CPU] - shape.cpu
            if cpu_after < 0 or (checks_model and not (shape.mask >> max(model, 0)) & 1):
                cache[sid] = INFEASIBLE
                continue
            tasks = runnable[model][bisect.bisect_right(levels, cpu_after)]
            base = self.adjustment(values[st.TOTAL], values[st.CPU], shape) - values[st.FIT]
            if not shape.is_fractional:
                if k > st.slots or (k and values[gpu_start + k - 1] < milli):
                    cache[sid] = INFEASIBLE
                    continue
                taken = k * milli
                fitting = 0
                for big, count, _, _, w, need in tasks:
                    if values[count] >= need + k:
                        fitting += w * (values[big] - taken)
                cache[sid] = bisect.bisect_right(thresholds, fitting + taken * weight + base)
                continue
            best, bits = INFEASIBLE, 0
            seen: dict[int, int] = {}
            for slot, free in enumerate(values[gpu_start:gpu_stop]):
                if free < milli:
                    break  # sorted high to low: no later GPU fits either
                score = seen.get(free)
                if score is None:
                    change = self.share_change(milli, free)
                    fitting = 0
                    for big, count, big_change, count_change, w, need in tasks:
                        if values[count] + change[count_change] >= need:
                            fitting += w * (values[big] + change[big_change])
                    score = seen[free] = bisect.bisect_right(thresholds, fitting + milli * weight + base)
                if score > best:
                    best, bits = score, 1 << slot
                elif score == best:
                    bits |= 1 << slot
            cache[sid] = best
            best_slots[sid] = bits

    def share_change(self, milli: int, free: int) -> list[int]:
        """Row `free` of `share_table(milli)` as a Python list (converted once, when first used)."""
        key = milli * (MILLI + 1) + free
        change = self._share_lists.get(key)
        if change is None:
            change = self._share_lists[key] = self.share_table(milli)[free].tolist()
        return change

    def allowed_models(self, mask: int) -> npt.NDArray[np.bool_]:
        """allowed[model]: the shape's model constraint admits it (index -1, no GPUs, reads model 0's bit)."""
        allowed = self._allowed.get(mask)
        if allowed is None:
            bits = [bool((mask >> m) & 1) for m in range(self.num_models)]
            allowed = self._allowed[mask] = np.array([*bits, bits[0]], dtype=bool)
        return allowed

    def share_table(self, milli: int) -> IntArray:
        """For a share of `milli` taken from one GPU with v free (v = 0..1000, the row index): per task the
        change of its fitting milli, then per task the change of its count of fitting GPUs (the layout of
        the state's task columns). Rows v < milli are never valid placements."""
        table = self._share_tables.get(milli)
        if table is None:
            free = np.arange(MILLI + 1, dtype=np.int64)[:, None]
            left = free - milli
            fits_before, fits_after = free >= self.task_milli, left >= self.task_milli
            big_change = left * fits_after - free * fits_before
            count_change = fits_after.astype(np.int64) - fits_before
            table = self._share_tables[milli] = np.concatenate([big_change, count_change], axis=1)
        return table

    def whole_change(self, count: int) -> IntArray:
        """Task-column change when `count` fully free GPUs are taken: every task loses 1000 milli per GPU
        and, unless it needs no GPU share (an empty GPU still "fits" it), one fitting GPU per GPU."""
        change = self._whole_changes.get(count)
        if change is None:
            needs_share = (self.task_milli > 0).astype(np.int64)
            change = np.concatenate([np.full(len(self.task_weight), -count * MILLI), -count * needs_share])
            change = self._whole_changes[count] = change.astype(np.int64)
        return change

    def slot_deltas(self, rows: IntArray, shape: Shape) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        """Δ = Σ_m w_m (F_n(m) before - after) per (state, slot) and whether that placement is possible.

        With FIT = Σ_m w_m (milli task m can use) and F = total·W - FIT, a pod taking `taken` milli gives
        Δ = taken·W - FIT_before + FIT_after (exact integers)."""
        st = self.states
        model, fit = rows[:, st.MODEL], rows[:, st.FIT]
        k, milli = shape.num_gpu, shape.gpu_milli
        cpu_after = rows[:, st.CPU] - shape.cpu
        ok = cpu_after >= 0
        if shape.mask != self.cluster.all_models and k:
            ok &= self.allowed_models(shape.mask)[model]
        cpu_runs = st.tasks.cpu_runs(model, cpu_after)
        if not shape.is_fractional:
            if k > st.slots:
                return np.zeros((len(rows), 1), dtype=np.int64), np.zeros((len(rows), 1), dtype=bool)
            if k:
                ok &= rows[:, st.gpu_cols.start + k - 1] >= milli
            taken = k * milli  # k fully free GPUs: every GPU task loses k fitting GPUs of 1000 milli
            runs = cpu_runs & (rows[:, st.count_cols] >= self.task_count + k)
            delta = ((rows[:, st.big_cols] - taken) * runs) @ self.task_weight + (taken * self.total_weight - fit)
            return delta[:, None], ok[:, None]
        gpus = rows[:, st.gpu_cols]
        valid = ok[:, None] & (gpus >= milli)
        table, ntasks, base = self.share_table(milli), len(self.task_weight), milli * self.total_weight - fit
        if len(rows) < DEDUPLICATE_FROM:
            after = rows[:, None, st.task_cols] + table[gpus]  # (states, slots, big | count)
            runs = cpu_runs[:, None, :] & (after[:, :, ntasks:] >= self.task_count)
            return (after[:, :, :ntasks] * runs) @ self.task_weight + base[:, None], valid
        # many states: score each distinct free value of a state once (GPUs are sorted, so equal values are
        # runs) and copy the score along its run; idle 8-GPU nodes have one value, not eight
        starts = np.ones(gpus.shape, dtype=bool)
        starts[:, 1:] = gpus[:, 1:] != gpus[:, :-1]
        state_of, slot_of = np.nonzero(starts & valid)
        after = rows[state_of, st.task_cols] + table[gpus[state_of, slot_of]]
        runs = cpu_runs[state_of] & (after[:, ntasks:] >= self.task_count)
        delta = np.zeros(gpus.shape, dtype=np.int64)
        delta[state_of, slot_of] = (after[:, :ntasks] * runs) @ self.task_weight + base[state_of]
        run_start = np.maximum.accumulate(np.where(starts, np.arange(gpus.shape[1]), 0), axis=1)
        return np.take_along_axis(delta, run_start, axis=1), valid

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
        if not gpus:
            change = None
        elif shape.is_fractional:
            change = self.scorer.share_table(shape.gpu_milli)[self.cluster.gpu_rows[node][gpus[0]] + shape.gpu_milli]
        else:
            change = self.scorer.whole_change(len(gpus))
        self.cluster.states.derive_child(self.cluster.state_list[node], parent, shape.gpu_milli * len(gpus), change)
