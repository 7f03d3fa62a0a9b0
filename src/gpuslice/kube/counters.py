"""Counts of API requests, errors, retries and skipped objects, for the metrics endpoints to read."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gpuslice.records import record


class ApiStats(Protocol):
    """What a metrics endpoint reads: counts since the process started."""

    def snapshot(self) -> ApiSnapshot: ...


@record
class ApiSnapshot:
    requests: int
    retries: int
    malformed: int
    errors: Mapping[str, int]  # by KubeError.kind


@dataclass
class ApiCounters:
    """Thread-safe counters; one per process (API_COUNTERS) unless a test brings its own."""

    requests: int = 0
    retries: int = 0
    malformed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def request(self) -> None:
        with self._lock:
            self.requests += 1

    def error(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] += 1

    def retry(self) -> None:
        with self._lock:
            self.retries += 1

    def skipped(self) -> None:
        """A malformed object was skipped (the rest of the answer was used)."""
        with self._lock:
            self.malformed += 1

    def snapshot(self) -> ApiSnapshot:
        with self._lock:
            return ApiSnapshot(self.requests, self.retries, self.malformed, dict(self.errors))


API_COUNTERS = ApiCounters()
