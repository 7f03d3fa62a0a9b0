"""Retry delays for every loop that talks to the API server: from 1 s doubling to 30 s, with jitter."""

from __future__ import annotations

import random

from gpuslice.kube.counters import API_COUNTERS, ApiCounters
from gpuslice.retry import Backoff

FIRST_S = 1.0
MAX_S = 30.0
JITTER = 0.25  # up to +25 %: nodes that failed together do not retry together


class RetryBackoff(Backoff):
    """The project's Backoff with the API server's delays, counting each retry in the API counters."""

    def __init__(
        self,
        first_s: float = FIRST_S,
        max_s: float = MAX_S,
        jitter: float = JITTER,
        rng: random.Random | None = None,
        counters: ApiCounters | None = None,
    ) -> None:
        super().__init__(first_s, max_s, jitter, rng)
        self._counters = counters if counters is not None else API_COUNTERS

    def failure(self) -> float:
        self._counters.retry()
        return super().failure()
