"""Limits on what one gRPC client may ask of a resource server: open streams, request size, IDs per request.

The service checks them inside its handlers (plugin.service) and gRPC enforces the size (wire.server_options,
the cap every server of ours has): no server interceptor, whose pipeline gRPC runs on every call."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from gpuslice.config.limits import MAX_DEVICES_PER_RESOURCE

# The kubelet holds one ListAndWatch per resource (two for a moment while it re-registers). A few more
# leave room for a debugging client; beyond that a stream is refused, because each open one pins a
# worker thread of the synchronous gRPC server.
MAX_STREAMS_PER_RESOURCE = 8
# How long after a Register returned the registration window stays open (StreamSlots): the kubelet opens
# its stream as soon as its Register call has dialled us back.
KUBELET_STREAM_WINDOW_S = 5.0
# No request can sensibly name more devices than a resource advertises.
MAX_IDS_PER_REQUEST = MAX_DEVICES_PER_RESOURCE
# A pod with more containers than this cannot be stored by the API server (1.5 MiB objects) anyway.
MAX_CONTAINERS_PER_REQUEST = 1024


class StreamSlots:
    """The open ListAndWatch streams of one server: the one count of them (the cap, the metrics gauge).

    Outside a registration window `take` admits a stream while fewer than `limit` are open. In the
    window, from the start of a Register until KUBELET_STREAM_WINDOW_S after it returned, `limit` more
    are admitted: the kubelet opens its stream then, v1.32 never reopens a refused one, and we cannot
    tell its stream from a local client's. So local clients that already hold every slot, or that race
    the kubelet for a fresh server's slots (a kubelet restart gives us fresh servers), cannot lock it
    out unless there are 2 x `limit` of them. Streams admitted in the window stay until they end; a
    server registers once, so at most 2 x `limit` streams (`max_threads`) are ever open on it.
    """

    def __init__(
        self,
        limit: int,
        window_s: float = KUBELET_STREAM_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._open = 0
        self._window_end = -math.inf
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        with self._lock:
            return self._open

    @property
    def max_threads(self) -> int:
        """Handler threads the streams can pin at once: the cap and the window's extra room."""
        return 2 * self.limit

    @contextlib.contextmanager
    def registration(self) -> Iterator[None]:
        """Around a Register call: the window opens now and closes `window_s` after it returned (at once
        if it failed)."""
        with self._lock:
            self._window_end = math.inf
        try:
            yield
        except BaseException:
            with self._lock:
                self._window_end = self._clock()
            raise
        with self._lock:
            self._window_end = self._clock() + self.window_s

    def take(self) -> Callable[[], None] | None:
        """A release function (idempotent) for a new stream, or None when the streams are at the cap."""
        with self._lock:
            cap = 2 * self.limit if self._clock() <= self._window_end else self.limit
            if self._open >= cap:
                return None
            self._open += 1
        released = False
        lock = self._lock

        def release() -> None:
            nonlocal released
            with lock:
                if not released:
                    released = True
                    self._open -= 1

        return release


def request_problem(method: str, request: Any) -> str | None:
    """Why an Allocate or GetPreferredAllocation request is over a limit, or None."""
    containers = request.container_requests
    if len(containers) > MAX_CONTAINERS_PER_REQUEST:
        return (
            f"{method}: {len(containers)} container requests, over the limit of "
            f"{MAX_CONTAINERS_PER_REQUEST} (MAX_CONTAINERS_PER_REQUEST)"
        )
    if method == "Allocate":
        counts = {"device IDs": sum(len(c.devices_ids) for c in containers)}
    else:
        counts = {
            "available device IDs": sum(len(c.available_deviceIDs) for c in containers),
            "must-include device IDs": sum(len(c.must_include_deviceIDs) for c in containers),
            "as allocation size": max((c.allocation_size for c in containers), default=0),
        }
    for what, count in counts.items():
        if count > MAX_IDS_PER_REQUEST:
            return (
                f"{method}: {count} {what}, over the limit of {MAX_IDS_PER_REQUEST} per request (MAX_IDS_PER_REQUEST)"
            )
    return None
