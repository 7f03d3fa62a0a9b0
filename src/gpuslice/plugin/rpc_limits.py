"""Limits on what one gRPC client may ask of a resource server: open streams, request size, IDs per request."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from gpuslice.config.limits import MAX_DEVICES_PER_RESOURCE

# The kubelet holds one ListAndWatch per resource (two for a moment while it re-registers). A few more
# leave room for a debugging client; beyond that a stream is refused, because each open one pins a
# worker thread of the synchronous gRPC server.
MAX_STREAMS_PER_RESOURCE = 8
# The kubelet's own gRPC limit; a request for every device we may advertise is far smaller (see config.limits).
MAX_REQUEST_BYTES = 4 << 20
# No request can sensibly name more devices than a resource advertises.
MAX_IDS_PER_REQUEST = MAX_DEVICES_PER_RESOURCE
# A pod with more containers than this cannot be stored by the API server (1.5 MiB objects) anyway.
MAX_CONTAINERS_PER_REQUEST = 1024

_Behavior = Callable[[Any, Any], Any]


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


class RequestLimits(grpc.ServerInterceptor):  # type: ignore[misc]
    """Wraps the DevicePlugin handlers of one server: ListAndWatch beyond the cap gets RESOURCE_EXHAUSTED,
    an Allocate or GetPreferredAllocation naming too many devices or containers gets INVALID_ARGUMENT
    naming the limit (the size cap itself is gRPC's max_receive_message_length, see server_options)."""

    def __init__(self, resource: str, max_streams: int = MAX_STREAMS_PER_RESOURCE) -> None:
        self.resource = resource
        self.streams = StreamSlots(max_streams)
        # gRPC asks the interceptor on every call; the wrapped handler of each served method is built once
        # (only methods the servicer serves get one, so the map holds at most its five RPCs)
        self._handlers: dict[str, Any] = {}

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = self._handlers.get(details.method)
        if handler is None:
            handler = self._wrap(continuation(details), str(details.method))
            if handler is not None:
                self._handlers[details.method] = handler
        return handler

    def _wrap(self, handler: Any, path: str) -> Any:
        if handler is None:
            return None
        method = path.rsplit("/", 1)[-1]
        if method == "ListAndWatch" and handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._capped_stream(handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if method in ("Allocate", "GetPreferredAllocation") and handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._counted(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _capped_stream(self, inner: _Behavior) -> _Behavior:
        def list_and_watch(request: Any, context: Any) -> Iterator[Any]:
            release = self.streams.take()
            if release is None:
                context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{self.resource}: {self.streams.limit} ListAndWatch streams are already open, the limit per "
                    "resource (MAX_STREAMS_PER_RESOURCE); close one first",
                )
                return iter(())  # not reached: abort raises
            context.add_callback(release)  # the RPC's end, however it ends
            return _released_after(inner(request, context), release)

        return list_and_watch

    def _counted(self, method: str, inner: _Behavior) -> _Behavior:
        def checked(request: Any, context: Any) -> Any:
            problem = request_problem(method, request)
            if problem is not None:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self.resource}: {problem}")
            return inner(request, context)

        return checked


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


def server_options() -> list[tuple[str, int]]:
    """gRPC server options: the request size cap (gRPC refuses a larger message with RESOURCE_EXHAUSTED)."""
    return [("grpc.max_receive_message_length", MAX_REQUEST_BYTES)]


def _released_after(responses: Iterator[Any], release: Callable[[], None]) -> Iterator[Any]:
    try:
        yield from responses
    finally:
        release()
