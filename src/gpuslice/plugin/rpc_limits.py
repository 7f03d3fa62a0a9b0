"""Limits on what one gRPC client may ask of a resource server: open streams, request size, IDs per request.

The service checks them inside its handlers (plugin.service) and gRPC enforces the size (wire.server_options,
the cap every server of ours has): no server interceptor, whose pipeline gRPC runs on every call."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from gpuslice.config.limits import MAX_DEVICES_PER_RESOURCE

# The kubelet holds one ListAndWatch per resource (two for a moment while it re-registers). A few more
# leave room for a debugging client; beyond that a stream is refused, because each open one pins a
# worker thread of the synchronous gRPC server.
MAX_STREAMS_PER_RESOURCE = 8
# No request can sensibly name more devices than a resource advertises.
MAX_IDS_PER_REQUEST = MAX_DEVICES_PER_RESOURCE
# A pod with more containers than this cannot be stored by the API server (1.5 MiB objects) anyway.
MAX_CONTAINERS_PER_REQUEST = 1024


class StreamSlots:
    """Counts open ListAndWatch streams of one server; `take` fails at the cap instead of waiting."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open = 0
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        with self._lock:
            return self._open

    def take(self) -> Callable[[], None] | None:
        """A release function (idempotent) for a new stream, or None when `limit` streams are open."""
        with self._lock:
            if self._open >= self.limit:
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
