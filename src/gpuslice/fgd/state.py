"""Cluster state for the openb simulator: per-node arrays in tie order plus interned node states.

A node's *state* is (GPU model, free CPU, free GPU milli sorted high to low). Fragmentation and FGD's
score depend only on the state, and the 1,213 nodes share states massively (all idle T4 nodes are one
state), so everything derived from a state is computed once and cached by state id.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.frag import TaskArrays
from gpuslice.fgd.trace import NodeTable
from gpuslice.units import MILLI

IntArray = npt.NDArray[np.int64]


class StateTable:
    """Interned node states. Row `sid` of `packed` holds [model, cpu, Σ_m w_m F_n(m), Σ_m w_m (milli task m
    can use), total free, the one-GPU tasks' fitting sum at each CPU rank, per multi-GPU task its fitting
    milli, then its fitting GPU count, free milli per GPU slot (high to low)]; the columns from FRAG up to
    the GPU slots are derived, filled in batches when first needed. A state's own columns (model, CPU,
    GPUs) reach `packed` in a batch too, before anything reads it (`rows`, `ensure`): read `packed` only
    through them.

    The one-GPU tasks' fitting sum is kept for every CPU rank (not only the node's own) because a pod that
    takes CPU moves the node to a lower rank: the sum there is one lookup, and a pod that changes one GPU
    changes every rank's sum by one row of `TaskArrays.contribution`.
    """

    MODEL, CPU, FRAG, FIT, TOTAL = 0, 1, 2, 3, 4

    def __init__(self, tasks: TaskArrays, slots: int, capacity: int = 8192) -> None:
        self.tasks = tasks
        self.slots = slots
        self.ranks = len(tasks.cpu_levels) + 1
        self.rank_cols = slice(self.TOTAL + 1, self.TOTAL + 1 + self.ranks)
        multi = tasks.multi
        self.multi_size = len(multi)
        self.multi_cols = slice(self.rank_cols.stop, self.rank_cols.stop + 2 * self.multi_size)  # big, count
        self.gpu_cols = slice(self.multi_cols.stop, self.multi_cols.stop + slots)
        free_table = tasks.free_table  # [v, per task fitting milli, per task fit] for one GPU with v free
        self.multi_table = np.concatenate([free_table[:, 1 + multi], free_table[:, 1 + tasks.size + multi]], axis=1)
        self.multi_runs = tasks.runs_by_rank[:, :, multi]  # [model, rank, multi task]
        self.multi_need = tasks.num_gpu[multi]
        self.multi_weight = tasks.weight[multi]
        self.size = 0
        self._index: dict[tuple[int, int, tuple[int, ...]], int] = {}
        self.packed = np.zeros((capacity, self.gpu_cols.stop), dtype=np.int64)
        self.ready = np.zeros(capacity, dtype=bool)
        self.underived = 0  # interned states without derived columns: none lets `rows` skip its check
        self._cpu_levels: list[int] = tasks.cpu_levels.tolist()
        self._lists: list[list[int]] = []  # derived rows as Python lists for the scalar paths ([]: not made)
        self._keys: list[tuple[int, int, tuple[int, ...]]] = []  # (model, cpu, GPUs) of every state
        self._written = 0  # states below this id have their model, CPU and GPUs in `packed`
        self.contribution_by_free = np.ascontiguousarray(tasks.contribution.transpose(0, 2, 1))  # [model, v, rank]

    @property
    def capacity(self) -> int:
        return len(self.ready)

    def intern(self, model: int, cpu: int, gpus_desc: tuple[int, ...]) -> int:
        """The id of this state (gpus_desc: free milli per GPU slot, high to low, padded with 0)."""
        key = (model, cpu, gpus_desc)
        sid = self._index.get(key)
        if sid is not None:
            return sid
        sid = self.size
        if sid == self.capacity:
            self._write()
            self.packed = np.concatenate([self.packed, np.zeros_like(self.packed)])
            self.ready = np.concatenate([self.ready, np.zeros_like(self.ready)])
        self._index[key] = sid
        self._keys.append(key)
        self._lists.append([])
        self.size += 1
        self.underived += 1
        return sid

    def _write(self) -> None:
        """Put the model, CPU and GPUs of the states interned since the last call into `packed`, in one
        vectorised step (a row written per bind would cost more than the rest of the bind)."""
        start, stop = self._written, self.size
        if start == stop:
            return
        keys = self._keys[start:stop]
        rows = self.packed[start:stop]  # a view
        rows[:, self.MODEL] = [key[0] for key in keys]
        rows[:, self.CPU] = [key[1] for key in keys]
        rows[:, self.gpu_cols] = [key[2] for key in keys]
        self._written = stop

    def ensure(self, sids: IntArray) -> None:
        """Compute the derived columns of the states among `sids` that lack them (vectorised)."""
        self._write()
        todo = sids[~self.ready[sids]]
        if len(todo):
            self.packed[todo] = self._derive(self.packed[todo])
            self._mark_ready(todo)

    def _mark_ready(self, sids: IntArray) -> None:
        self.ready[sids] = True
        self.underived = self.size - int(np.count_nonzero(self.ready[: self.size]))

    def rows(self, sids: IntArray) -> IntArray:
        """The packed rows of `sids`, derived columns included (one gather when they are already known)."""
        self._write()
        rows = self.packed[sids]
        if not self.underived:
            return rows
        ready = self.ready[sids]
        if ready.all():
            return rows
        if not ready.any():  # the common case: the one state the last pod created
            self._derive(rows)
            self.packed[sids] = rows
            self._mark_ready(sids)
            return rows
        missing = ~ready
        todo = sids[missing]
        rows[missing] = self._derive(rows[missing])
        self.packed[todo] = rows[missing]
        self._mark_ready(todo)
        return rows

    def row_lists(self, sids: list[int]) -> list[list[int]]:
        """`rows(sids)` as Python lists (kept once made: a state never changes)."""
        lists = self._lists
        found = [lists[sid] for sid in sids]
        if not all(found):
            todo = [sid for sid, values in zip(sids, found, strict=True) if not values]
            for sid, values in zip(todo, self.rows(np.array(todo, dtype=np.int64)).tolist(), strict=True):
                lists[sid] = values
            found = [lists[sid] for sid in sids]
        return found

    def multi_fit(self, model: IntArray | int, rank: IntArray | int, columns: IntArray) -> IntArray:
        """Σ w_t (fitting milli) over the multi-GPU tasks that run: model allowed, CPU rank enough, and at
        least as many fitting GPUs as the task needs. `columns` (..., big | count) broadcasts with model/rank."""
        size = self.multi_size
        runs = self.multi_runs[model, rank] & (columns[..., size:] >= self.multi_need)
        return np.asarray((columns[..., :size] * runs) @ self.multi_weight, dtype=np.int64)

    def _derive(self, rows: IntArray) -> IntArray:
        """Fill the derived columns of `rows` in place (and return it)."""
        tasks = self.tasks
        gpus = rows[:, self.gpu_cols]
        model = rows[:, self.MODEL]
        by_rank = tasks.contribution[model[:, None], :, gpus].sum(axis=1)  # (states, ranks)
        rows[:, self.rank_cols] = by_rank
        rank = np.searchsorted(tasks.cpu_levels, rows[:, self.CPU], side="right")
        fit = by_rank[np.arange(len(rows)), rank]
        if self.multi_size:
            columns = self.multi_table[gpus].sum(axis=1)
            rows[:, self.multi_cols] = columns
            fit = fit + self.multi_fit(model, rank, columns)
        total = gpus.sum(axis=1)
        rows[:, self.TOTAL] = total
        rows[:, self.FIT] = fit
        rows[:, self.FRAG] = total * tasks.total_weight - fit
        return rows

    def derive_child(self, child: int, parent: int, gpus: int, before: int, after: int) -> None:
        """Derive state `child` from the derived state `parent` that one pod turned into it: `gpus` of its
        GPUs went from `before` to `after` free milli (0 GPUs: the pod took CPU only). Exactly what `_derive`
        computes, for the cost of a few small steps."""
        if self.ready[child] or not self.ready[parent]:
            return
        packed = self.packed
        model, cpu, gpus_desc = self._keys[child]
        by_rank = packed[parent, self.rank_cols]
        if gpus:
            contribution = self.contribution_by_free[model]
            by_rank = by_rank + gpus * (contribution[after] - contribution[before])
        row = packed[child]
        row[self.rank_cols] = by_rank
        rank = bisect.bisect_right(self._cpu_levels, cpu)
        fit = int(by_rank[rank])
        multi: list[int] = []
        if self.multi_size:
            columns = packed[parent, self.multi_cols]
            if gpus:
                columns = columns + gpus * (self.multi_table[after] - self.multi_table[before])
            row[self.multi_cols] = columns
            fit += int(self.multi_fit(model, rank, columns))
            multi = columns.tolist()
        total = int(packed[parent, self.TOTAL]) - gpus * (before - after)
        frag = total * self.tasks.total_weight - fit
        row[self.TOTAL] = total
        row[self.FIT] = fit
        row[self.FRAG] = frag
        self.ready[child] = True
        self.underived -= 1
        self._lists[child] = [model, cpu, frag, fit, total, *by_rank.tolist(), *multi, *gpus_desc]

    def frag(self, sids: IntArray) -> IntArray:
        """Σ_m w_m F_n(m) of each state."""
        self.ensure(sids)
        return np.asarray(self.packed[sids, self.FRAG], dtype=np.int64)


class OpenbCluster:
    """Free resources of every node, indexed by tie rank (index 0 = smallest random prefix = wins ties).

    numpy arrays serve the vectorised policies; Python lists mirror the per-node values that the
    placement loop reads and writes one at a time (cheaper than numpy scalar access).
    """

    def __init__(self, nodes: NodeTable, tie_order: Sequence[int] | IntArray, tasks: TaskArrays) -> None:
        order = np.asarray(tie_order, dtype=np.int64)
        self.n = len(order)
        self.slots = max(1, int(nodes.gpus.max()))
        self.names = [nodes.names[i] for i in order.tolist()]
        self.model = nodes.model[order].copy()
        self.model_bit = np.where(self.model >= 0, np.left_shift(1, np.maximum(self.model, 0)), 0).astype(np.int64)
        self.all_models = (1 << len(nodes.models)) - 1
        self.gpus = nodes.gpus[order].copy()
        self.cpu = nodes.cpu[order].copy()
        self.memory = nodes.memory[order].copy()
        self.capacity_milli = int(self.gpus.sum()) * MILLI
        slot = np.arange(self.slots)
        self.gpu_free = np.where(slot[None, :] < self.gpus[:, None], MILLI, 0).astype(np.int64)
        self.gpu_sorted = self.gpu_free.copy()  # free milli per GPU, high to low
        self.free_total = self.gpus * MILLI
        self.full_count = self.gpus.copy()
        self.gpu_rows: list[list[int]] = self.gpu_free.tolist()
        self.cpu_list: list[int] = self.cpu.tolist()
        self.memory_list: list[int] = self.memory.tolist()
        self.model_list: list[int] = self.model.tolist()
        self.states = StateTable(tasks, self.slots)
        self.state = np.array(
            [
                self.states.intern(m, c, tuple(r))
                for m, c, r in zip(self.model_list, self.cpu_list, self.gpu_rows, strict=True)
            ],
            dtype=np.int64,
        )
        self.state_list: list[int] = self.state.tolist()
        self.sorted_keys: list[tuple[int, ...]] = [tuple(r) for r in self.gpu_rows]
        self.allocated_milli = 0

    def feasible(self, cpu: int, memory: int, num_gpu: int, gpu_milli: int, mask: int) -> npt.NDArray[np.bool_]:
        """Filter (reference §4): CPU and memory fit; a GPU pod needs an allowed model and num_gpu GPUs
        each with free >= gpu_milli."""
        ok = (self.cpu >= cpu) & (self.memory >= memory)
        if num_gpu:
            if num_gpu > self.slots:
                return np.zeros(self.n, dtype=bool)
            ok &= self.gpu_sorted[:, num_gpu - 1] >= gpu_milli
            if mask != self.all_models:
                ok &= (self.model_bit & mask) != 0
        return ok

    def bind(self, node: int, gpu_ids: Sequence[int], cpu: int, memory: int, gpu_milli: int) -> None:
        row = self.gpu_rows[node]
        for gpu in gpu_ids:
            if row[gpu] < gpu_milli:
                raise ValueError(f"node {self.names[node]} GPU {gpu} has {row[gpu]} milli free, pod needs {gpu_milli}")
            row[gpu] -= gpu_milli
        cpu_left = self.cpu_list[node] - cpu
        memory_left = self.memory_list[node] - memory
        if cpu_left < 0 or memory_left < 0:
            raise ValueError(f"node {self.names[node]} cannot hold {cpu} milli-CPU and {memory} MiB")
        self.cpu_list[node] = cpu_left
        self.memory_list[node] = memory_left
        self.cpu[node] = cpu_left
        self.memory[node] = memory_left
        if gpu_ids:
            ordered = sorted(row, reverse=True)
            self.gpu_free[node] = row
            self.gpu_sorted[node] = ordered
            self.free_total[node] = sum(row)
            self.full_count[node] = row.count(MILLI)
            key = tuple(ordered)
            self.sorted_keys[node] = key
        else:
            key = self.sorted_keys[node]
        sid = self.states.intern(self.model_list[node], cpu_left, key)
        self.state_list[node] = sid
        self.state[node] = sid
        self.allocated_milli += gpu_milli * len(gpu_ids)

    def release(self, node: int, gpu_ids: Sequence[int], cpu: int, memory: int, gpu_milli: int) -> None:
        """Give back what `bind` took (a departing pod, in the real-time replay)."""
        row = self.gpu_rows[node]
        for gpu in gpu_ids:
            if row[gpu] + gpu_milli > MILLI:
                raise ValueError(f"node {self.names[node]} GPU {gpu}: releasing {gpu_milli} milli would exceed {MILLI}")
            row[gpu] += gpu_milli
        self.cpu_list[node] += cpu
        self.memory_list[node] += memory
        self.cpu[node] = self.cpu_list[node]
        self.memory[node] = self.memory_list[node]
        if gpu_ids:
            ordered = sorted(row, reverse=True)
            self.gpu_free[node] = row
            self.gpu_sorted[node] = ordered
            self.free_total[node] = sum(row)
            self.full_count[node] = row.count(MILLI)
            self.sorted_keys[node] = tuple(ordered)
        sid = self.states.intern(self.model_list[node], self.cpu_list[node], self.sorted_keys[node])
        self.state_list[node] = sid
        self.state[node] = sid
        self.allocated_milli -= gpu_milli * len(gpu_ids)

    def fragment_weighted(self) -> int:
        """Σ_n Σ_m w_m F_n(m) over all nodes now."""
        return int(self.states.frag(self.state).sum())

    def fragment_milli(self) -> float:
        """Cluster fragmentation F_N(M) in milli-GPU."""
        return self.fragment_weighted() / self.states.tasks.total_weight
