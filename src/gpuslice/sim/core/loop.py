"""One clock and one heap: events in time order, equal times in insertion order, applied in batches."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

# (kind, payload) -> None: applies one event; the owner decides what kinds mean.
Apply = Callable[[int, Any], None]


class EventLoop:
    """The discrete-event clock shared by the event engine and the sharing-tier simulator.

    Events pushed for the same time run in the order they were pushed. `run` pops every event of the
    earliest time as one batch (`now` is that time while they apply), then calls `after_batch` once: that
    is where a simulator runs its scheduling pass and samples its metrics. An event may push more events,
    also for the current time; they join the current batch.
    """

    __slots__ = ("_heap", "_seq", "now")

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, at: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, payload))

    def run(self, apply: Apply, after_batch: Callable[[], None]) -> None:
        """Until no event is left: apply one batch of equal-time events, then `after_batch()`."""
        heap = self._heap
        pop = heapq.heappop
        while heap:
            now = self.now = heap[0][0]
            while heap and heap[0][0] == now:
                _, _, kind, payload = pop(heap)
                apply(kind, payload)
            after_batch()
