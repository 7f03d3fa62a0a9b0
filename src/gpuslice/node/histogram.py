"""A latency histogram as plain counts, put in Prometheus' shape only when scraped (device plugin and DRA)."""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence

from gpuslice.records import record


class Histogram:
    """Bucket counts (not cumulative; the last is +Inf), sum and creation time of one label set; the caller
    holds its own lock around `observe` and `snapshot` (the metrics objects keep one lock for everything)."""

    __slots__ = ("bounds", "buckets", "created", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.buckets = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self.created = time.time()

    def observe(self, seconds: float) -> None:
        self.buckets[bisect.bisect_left(self.bounds, seconds)] += 1
        self.total += seconds

    def snapshot(self) -> HistogramSnapshot:
        return HistogramSnapshot(self.bounds, tuple(self.buckets), self.total, self.created)


@record
class HistogramSnapshot:
    """A histogram's counts at one moment, read outside the lock when a scrape builds the exposition."""

    bounds: tuple[float, ...]
    buckets: tuple[int, ...]
    total: float
    created: float

    def cumulative(self) -> list[tuple[str, int]]:
        """(upper bound as Prometheus writes it, observations at or below it), +Inf last."""
        rows, seen = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.buckets, strict=True):
            seen += count
            rows.append(("+Inf" if bound == float("inf") else repr(bound), seen))
        return rows
