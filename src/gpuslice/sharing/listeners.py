"""Change listeners for thread-safe state (health, dynamic MIG geometry): add, remove, notify outside locks."""

from __future__ import annotations

import threading
from collections.abc import Callable

Listener = Callable[[], None]


class Listeners:
    """A thread-safe list of callbacks; `notify` runs them outside any lock, so a callback may call back in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []

    def add(self, listener: Listener) -> Callable[[], None]:
        """Call `listener()` on every notify; returns a function that removes it (safe to call twice)."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()
