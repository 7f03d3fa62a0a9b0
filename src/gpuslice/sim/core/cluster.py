"""Free capacity of every node and GPU as numpy arrays: what every placement decision reads."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from gpuslice.sim.core.model import ClusterSpec, PodSpec
from gpuslice.units import MILLI

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


class Binding(NamedTuple):
    """Where one pod runs: a node index and the indices of the GPUs it uses there."""

    node: int
    gpus: tuple[int, ...]


class _Static:
    """What never changes during a run; shared by every copy of a ClusterState."""

    def __init__(self, spec: ClusterSpec) -> None:
        nodes = spec.nodes
        width = max(1, max(len(node.gpus) for node in nodes))
        self.spec = spec
        self.gpu_count: IntArray = np.array([len(node.gpus) for node in nodes], dtype=np.int64)
        self.gpu_capacity: IntArray = np.zeros((len(nodes), width), dtype=np.int64)
        for position, node in enumerate(nodes):
            self.gpu_capacity[position, : len(node.gpus)] = MILLI
        self.cpu_capacity: IntArray = np.array([node.cpu_milli for node in nodes], dtype=np.int64)
        self.memory_capacity: IntArray = np.array([node.memory_mib for node in nodes], dtype=np.int64)
        island_index = {name: position for position, name in enumerate(spec.islands)}
        self.island_of: IntArray = np.array([island_index[node.island] for node in nodes], dtype=np.int64)
        self.island_count = len(spec.islands)
        self.products = [node.product_name.upper() for node in nodes]
        self.model_masks: dict[str, BoolArray] = {}

    def model_mask(self, model: str) -> BoolArray:
        mask = self.model_masks.get(model)
        if mask is None:
            wanted = model.upper()
            mask = np.array([wanted in product for product in self.products], dtype=np.bool_)
            self.model_masks[model] = mask
        return mask


class ClusterState:
    """Per-node and per-GPU free capacity, kept consistent by `bind` and `release`.

    gpu_free[n, g] is the free milli-GPU of GPU g on node n (padding columns stay 0). Three per-node
    summaries make a feasibility test one vectorized comparison: full_free (fully free GPUs),
    max_free (the largest free share on one GPU) and free_milli (the node's total free milli-GPU).
    """

    def __init__(self, spec: ClusterSpec, _static: _Static | None = None) -> None:
        self._static = _static or _Static(spec)
        static = self._static
        self.spec = spec
        self.gpu_free: IntArray = static.gpu_capacity.copy()
        self.full_free: IntArray = static.gpu_count.copy()
        self.max_free: IntArray = np.where(static.gpu_count > 0, MILLI, 0).astype(np.int64)
        self.free_milli: IntArray = static.gpu_count * MILLI
        self.cpu_free: IntArray = static.cpu_capacity.copy()
        self.memory_free: IntArray = static.memory_capacity.copy()

    # -- static facts -------------------------------------------------------------------------
    @property
    def node_count(self) -> int:
        return len(self.full_free)

    @property
    def gpu_count(self) -> IntArray:
        return self._static.gpu_count

    @property
    def gpu_capacity(self) -> IntArray:
        return self._static.gpu_capacity

    @property
    def cpu_capacity(self) -> IntArray:
        return self._static.cpu_capacity

    @property
    def memory_capacity(self) -> IntArray:
        return self._static.memory_capacity

    @property
    def island_of(self) -> IntArray:
        return self._static.island_of

    @property
    def island_count(self) -> int:
        return self._static.island_count

    @property
    def total_gpus(self) -> int:
        return int(self._static.gpu_count.sum())

    def fresh(self) -> ClusterState:
        """The same cluster with nothing bound."""
        return ClusterState(self.spec, self._static)

    def copy(self) -> ClusterState:
        twin = ClusterState(self.spec, self._static)
        twin.gpu_free[:] = self.gpu_free
        twin.full_free[:] = self.full_free
        twin.max_free[:] = self.max_free
        twin.free_milli[:] = self.free_milli
        twin.cpu_free[:] = self.cpu_free
        twin.memory_free[:] = self.memory_free
        return twin

    # -- feasibility --------------------------------------------------------------------------
    def fit_mask(self, pod: PodSpec) -> BoolArray:
        """Nodes on which `pod` fits now (GPU count or share, CPU, memory, GPU model)."""
        mask = (self.cpu_free >= pod.cpu_milli) & (self.memory_free >= pod.memory_mib)
        if pod.gpu_count:
            if pod.gpu_milli < MILLI:
                mask &= self.max_free >= pod.gpu_milli
            else:
                mask &= self.full_free >= pod.gpu_count
            if pod.gpu_model is not None:
                mask &= self._static.model_mask(pod.gpu_model)
        return mask

    def fits_node(self, pod: PodSpec, node: int) -> bool:
        """The scalar form of fit_mask for one node."""
        if self.cpu_free[node] < pod.cpu_milli or self.memory_free[node] < pod.memory_mib:
            return False
        if not pod.gpu_count:
            return True
        if pod.gpu_model is not None and not self._static.model_mask(pod.gpu_model)[node]:
            return False
        if pod.gpu_milli < MILLI:
            return bool(self.max_free[node] >= pod.gpu_milli)
        return bool(self.full_free[node] >= pod.gpu_count)

    def fits_empty(self, pod: PodSpec) -> bool:
        """Whether `pod` fits on some node of the empty cluster."""
        static = self._static
        mask = (static.cpu_capacity >= pod.cpu_milli) & (static.memory_capacity >= pod.memory_mib)
        if pod.gpu_count:
            mask &= static.gpu_count >= pod.gpu_count
            if pod.gpu_model is not None:
                mask &= static.model_mask(pod.gpu_model)
        return bool(mask.any())

    # -- binding ------------------------------------------------------------------------------
    def choose_gpus(self, pod: PodSpec, node: int) -> tuple[int, ...]:
        """GPU indices for `pod` on `node`: the lowest-indexed fully free GPUs for whole GPUs; for a
        fraction, the GPU with the least free share that still fits (lowest index on ties)."""
        if not pod.gpu_count:
            return ()
        row = self.gpu_free[node]
        if pod.gpu_milli == MILLI:
            return tuple(int(g) for g in np.flatnonzero(row == MILLI)[: pod.gpu_count])
        candidates = np.where(row >= pod.gpu_milli, row, MILLI + 1)
        return (int(candidates.argmin()),)

    def bind(self, pod: PodSpec, node: int) -> Binding:
        """Place `pod` on `node` (which must fit) and return where it went."""
        binding = Binding(node, self.choose_gpus(pod, node))
        self.apply(binding, pod)
        return binding

    def apply(self, binding: Binding, pod: PodSpec) -> None:
        self._change(binding, pod, -1)

    def release(self, binding: Binding, pod: PodSpec) -> None:
        self._change(binding, pod, +1)

    def _change(self, binding: Binding, pod: PodSpec, sign: int) -> None:
        node = binding.node
        self.cpu_free[node] += sign * pod.cpu_milli
        self.memory_free[node] += sign * pod.memory_mib
        if binding.gpus:
            row = self.gpu_free[node]
            for gpu in binding.gpus:
                row[gpu] += sign * pod.gpu_milli
            values = row.tolist()  # a handful of GPUs: plain Python beats numpy's per-call overhead here
            self.full_free[node] = values.count(MILLI)
            self.max_free[node] = max(values)
            self.free_milli[node] += sign * pod.gpu_milli * len(binding.gpus)
