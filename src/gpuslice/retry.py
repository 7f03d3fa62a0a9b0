"""Retry delays for every loop that retries: doubling from a first delay to a cap; only a success resets."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random


class Backoff:
    """`failure()` gives the next delay (never below `first_s`, doubling up to `max_s`, plus up to `jitter`
    of it, so nodes that failed together do not retry together); `success()` starts over. Only a success
    resets: an event or a quick answer between faults does not."""

    def __init__(self, first_s: float, max_s: float, jitter: float = 0.0, rng: random.Random | None = None) -> None:
        if not 0 < first_s <= max_s:
            raise ValueError(f"backoff needs 0 < first ({first_s}) <= max ({max_s})")
        if not 0 <= jitter <= 1:
            raise ValueError(f"backoff jitter {jitter} is not within [0, 1]")
        self.first_s = first_s
        self.max_s = max_s
        self.jitter = jitter
        self._rng = rng  # made on the first failure: `random` brings OpenSSL's hashlib, ~1.5 ms of a start
        self._next = first_s
        self.failures = 0  # in a row

    def failure(self) -> float:
        """The delay before the next try, and the one after it doubles."""
        base = self._next
        self._next = min(base * 2, self.max_s)
        self.failures += 1
        if self._rng is None:
            import random

            self._rng = random.Random()
        # Jitter only lengthens: the promise is "never sooner than the base delay".
        return base * (1 + self.jitter * self._rng.random())

    def success(self) -> None:
        self._next = self.first_s
        self.failures = 0

    def wait(self, stop: threading.Event) -> bool:
        """Sleep the next failure delay; True when `stop` was set meanwhile (the loop should end)."""
        return stop.wait(self.failure())
