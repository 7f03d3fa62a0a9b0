"""The pending queue: scheduling units, the queue-ordering hook, and the skip of unit shapes that cannot fit."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpuslice.sim.core.cluster import ClusterState
from gpuslice.sim.core.model import ClusterSpec, JobSpec, PodSpec

Shape = tuple[PodSpec, ...]
SortKey = tuple[Any, ...]


@dataclass(slots=True, eq=False)
class Unit:
    """What the scheduler tries to place in one go: one pod, or all pods of a gang under an all-or-nothing policy."""

    job: JobSpec
    seq: int  # the job's submission sequence number (unique, orders ties)
    pod_indices: tuple[int, ...]
    pods: Shape  # the pods at those indices: the unit's shape
    epoch: int  # the job's epoch when queued; an eviction bumps the job's epoch and so voids old units


class AllocationView(Protocol):
    """What a queue order may read of the running simulation (the engine provides it)."""

    @property
    def cluster(self) -> ClusterSpec: ...

    @property
    def tenant_usage(self) -> Mapping[str, Sequence[int]]:
        """Bound milli-GPU, milli-CPU and memory MiB per tenant, kept current as pods bind and release."""
        ...


class QueueOrder(Protocol):
    """Which pending unit is tried first. Kept apart from placement so orderings and policies combine freely.

    Static orders (`dynamic` False) give every unit a fixed `key` when it is queued. Dynamic orders such as
    DRF also put units in buckets (`bucket`, e.g. the tenant); the engine then calls `rank` on the head of
    every bucket before each pick, so the rank may depend on the current allocation, which `attach` gives
    access to (an AllocationView: the cluster and each tenant's bound usage).
    """

    name: str
    dynamic: bool

    def attach(self, view: AllocationView) -> None: ...

    def key(self, unit: Unit) -> SortKey: ...

    def bucket(self, job: JobSpec) -> Hashable: ...

    def rank(self, unit: Unit) -> SortKey: ...


class PriorityOrder:
    """Higher priority first, then earlier submission, then pod index, then submission sequence.

    The pod index comes before the sequence on purpose: pods of jobs submitted at the same moment
    interleave (job A pod 0, job B pod 0, job A pod 1, ...) as pods created by concurrent controllers do
    in a Kubernetes scheduling queue. That interleaving is what lets two gangs deadlock.
    """

    name = "priority"
    dynamic = False

    def attach(self, view: AllocationView) -> None:
        return None

    def key(self, unit: Unit) -> SortKey:
        return (-unit.job.priority, unit.job.submit, unit.pod_indices[0], unit.seq)

    def bucket(self, job: JobSpec) -> Hashable:
        return None

    def rank(self, unit: Unit) -> SortKey:
        return self.key(unit)


class FifoOrder(PriorityOrder):
    """Submission order only; priorities are ignored."""

    name = "fifo"

    def key(self, unit: Unit) -> SortKey:
        return (unit.job.submit, unit.pod_indices[0], unit.seq)


_Entry = tuple[SortKey, int, Unit]
_BucketKey = tuple[Shape, Hashable]


class PendingQueue:
    """Pending units in buckets of equal shape (and order bucket), each bucket a heap in queue order.

    A pass tries bucket heads in queue order. When a unit fails, its shape is marked dead: no unit of the
    same shape can fit until capacity is released, because placing only consumes capacity. A release on a
    node revives only the dead shapes with a pod that fits that node, since nothing changed elsewhere.
    So a pass costs one try per live shape plus one per placement, however long the queue is.
    """

    def __init__(self, order: QueueOrder, skip_dead_shapes: bool = True) -> None:
        self.order = order
        self.skip_dead_shapes = skip_dead_shapes  # False: try every unit every pass (the reference for tests)
        self._buckets: dict[_BucketKey, list[_Entry]] = {}
        self._buckets_per_shape: Counter[Shape] = Counter()
        self._dead: set[Shape] = set()
        self._revived = False
        self._counter = 0
        self.size = 0
        self.shapes_version = 0  # changes whenever the set of pending shapes changes

    def __len__(self) -> int:
        return self.size

    def push(self, unit: Unit) -> None:
        bucket_key = (unit.pods, self.order.bucket(unit.job))
        heap = self._buckets.get(bucket_key)
        if heap is None:
            heap = self._buckets[bucket_key] = []
            if not self._buckets_per_shape[unit.pods]:
                self.shapes_version += 1
            self._buckets_per_shape[unit.pods] += 1
        self._counter += 1
        heapq.heappush(heap, (self.order.key(unit), self._counter, unit))
        self.size += 1

    def units(self) -> Iterator[Unit]:
        for heap in self._buckets.values():
            for _, _, unit in heap:
                yield unit

    def shapes(self) -> list[Shape]:
        """The distinct shapes of the pending units."""
        return list(self._buckets_per_shape)

    def remove(self, doomed: Callable[[Unit], bool]) -> int:
        """Drop every unit for which `doomed` is true (rare: deadlocks, evictions); returns how many."""
        removed = 0
        for bucket_key in list(self._buckets):
            heap = self._buckets[bucket_key]
            kept = [entry for entry in heap if not doomed(entry[2])]
            removed += len(heap) - len(kept)
            if kept:
                heapq.heapify(kept)
                self._buckets[bucket_key] = kept
            else:
                self._drop_bucket(bucket_key)
        self.size -= removed
        return removed

    # -- the dead-shape memo ------------------------------------------------------------------
    def revive_node(self, state: ClusterState, node: int) -> None:
        """Capacity was released on `node`: shapes with a pod that now fits there may fit again."""
        if not self._dead:
            return
        revived = [shape for shape in self._dead if any(state.fits_node(pod, node) for pod in shape)]
        if revived:
            self._dead.difference_update(revived)
            self._revived = True

    def revive_all(self) -> None:
        if self._dead:
            self._dead.clear()
            self._revived = True

    # -- a scheduling pass --------------------------------------------------------------------
    def run_pass(self, try_place: Callable[[Unit], bool]) -> int:
        """Try pending units in queue order; `try_place` binds a unit or returns False. Returns placements."""
        if not self.skip_dead_shapes:
            return self._exhaustive_pass(try_place)
        if self.order.dynamic:
            return self._dynamic_pass(try_place)
        placed = 0
        self._revived = True
        heads: list[tuple[SortKey, int, _BucketKey]] = []
        while True:
            if self._revived:  # (re)build the heads from every live bucket
                self._revived = False
                heads = [
                    (heap[0][0], heap[0][1], key) for key, heap in self._buckets.items() if key[0] not in self._dead
                ]
                heapq.heapify(heads)
            if not heads:
                return placed
            _, _, bucket_key = heapq.heappop(heads)
            if bucket_key[0] in self._dead or bucket_key not in self._buckets:
                continue
            heap = self._buckets[bucket_key]
            unit = heap[0][2]
            if try_place(unit):
                placed += 1
                self._pop(bucket_key, heap)
                if bucket_key in self._buckets and not self._revived:
                    heapq.heappush(heads, (heap[0][0], heap[0][1], bucket_key))
            else:
                self._dead.add(bucket_key[0])

    def _dynamic_pass(self, try_place: Callable[[Unit], bool]) -> int:
        placed = 0
        while True:
            live = [(self.order.rank(heap[0][2]), heap[0][1], key) for key, heap in self._buckets.items()]
            live = [entry for entry in live if entry[2][0] not in self._dead]
            if not live:
                return placed
            _, _, bucket_key = min(live)
            heap = self._buckets[bucket_key]
            if try_place(heap[0][2]):
                placed += 1
                self._pop(bucket_key, heap)
            else:
                self._dead.add(bucket_key[0])

    def _exhaustive_pass(self, try_place: Callable[[Unit], bool]) -> int:
        """Every unit in queue order, no shape skipped: slow, and the yardstick the fast pass must equal."""
        placed = 0
        entries = sorted((entry[0], entry[1], key) for key, heap in self._buckets.items() for entry in heap)
        for _key, counter, bucket_key in entries:
            heap = self._buckets[bucket_key]
            position = next(i for i, entry in enumerate(heap) if entry[1] == counter)
            if try_place(heap[position][2]):
                placed += 1
                heap[position] = heap[-1]
                heap.pop()
                heapq.heapify(heap)
                self.size -= 1
                if not heap:
                    self._drop_bucket(bucket_key)
        return placed

    def _pop(self, bucket_key: _BucketKey, heap: list[_Entry]) -> None:
        heapq.heappop(heap)
        self.size -= 1
        if not heap:
            self._drop_bucket(bucket_key)

    def _drop_bucket(self, bucket_key: _BucketKey) -> None:
        del self._buckets[bucket_key]
        shape = bucket_key[0]
        self._buckets_per_shape[shape] -= 1
        if self._buckets_per_shape[shape] <= 0:
            del self._buckets_per_shape[shape]
            self._dead.discard(shape)
            self.shapes_version += 1
