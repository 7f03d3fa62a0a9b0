"""The v1beta1 DevicePlugin service for one resource: five RPCs over its Allocator."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

import grpc

from gpuslice.allocation import AllocateOptions, AllocationAnswer, AllocationError, AllocationFailed, Allocator
from gpuslice.plugin.convert import allocate_response, device_list, requested_ids
from gpuslice.sharing import Resource
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2

log = logging.getLogger("gpuslice.plugin")
RESPONSE_CACHE_LIMIT = 256  # converted answers remembered per resource; past it the memory starts over


class PluginObserver(Protocol):
    """Hooks for metrics and logs (plugin.metrics plugs Prometheus in here); every method must be cheap."""

    def allocated(self, resource: str, device_ids: list[list[str]], seconds: float) -> None: ...

    def allocation_failed(self, resource: str, error: AllocationError) -> None: ...

    def stream_opened(self, resource: str) -> None: ...

    def stream_closed(self, resource: str) -> None: ...


class NullObserver:
    """Observes nothing."""

    def allocated(self, resource: str, device_ids: list[list[str]], seconds: float) -> None:
        pass

    def allocation_failed(self, resource: str, error: AllocationError) -> None:
        pass

    def stream_opened(self, resource: str) -> None:
        pass

    def stream_closed(self, resource: str) -> None:
        pass


class ResourceService(deviceplugin_grpc.DevicePluginServicer):  # type: ignore[misc]
    """Serves one resource through its Allocator. Refused requests become INVALID_ARGUMENT, device
    failures INTERNAL; either way the server keeps serving.

    ListAndWatch waits on a condition bumped by the allocator's listing changes (and by stream cancel /
    close), so an idle stream costs a parked thread and no CPU.
    """

    def __init__(self, allocator: Allocator, observer: PluginObserver | None = None) -> None:
        self.allocator = allocator
        self._observer: PluginObserver = observer or NullObserver()
        self._changed = threading.Condition()
        self._generation = 0
        self._closed = False
        self._open_streams = 0
        self._remove_listener = allocator.add_listener(self.notify_changed)
        # answer object id -> (answer, its response): an allocator that hands out the same answer object
        # again (a remembered one) gets the same message back, without converting it again
        self._responses: dict[int, tuple[AllocationAnswer, deviceplugin_pb2.AllocateResponse]] = {}

    @property
    def resource(self) -> Resource:
        return self.allocator.resource

    def set_options(self, options: AllocateOptions) -> None:
        """Answer later Allocate calls with new options (a config reload); in-flight calls keep the old ones."""
        self.allocator.set_options(options)

    @property
    def open_streams(self) -> int:
        with self._changed:
            return self._open_streams

    def notify_changed(self) -> None:
        """Something in the device list changed: every open ListAndWatch sends the full list again."""
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def close(self) -> None:
        """End every open ListAndWatch stream and stop listening to the allocator."""
        self._remove_listener()
        self.allocator.close()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def current_list(self) -> deviceplugin_pb2.ListAndWatchResponse:
        return device_list(self.resource, self.allocator.unhealthy_now())

    def GetDevicePluginOptions(self, request: deviceplugin_pb2.Empty, context: Any) -> Any:  # noqa: N802
        return deviceplugin_pb2.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    def ListAndWatch(  # noqa: N802
        self, request: deviceplugin_pb2.Empty, context: Any
    ) -> Iterator[deviceplugin_pb2.ListAndWatchResponse]:
        cancelled = False

        def on_rpc_done() -> None:
            nonlocal cancelled
            with self._changed:
                cancelled = True
                self._changed.notify_all()

        if not context.add_callback(on_rpc_done):
            return
        with self._changed:
            if self._closed:
                return
            seen = self._generation
            self._open_streams += 1
        self._observer.stream_opened(self.resource.name)
        try:
            yield self.current_list()
            while True:
                with self._changed:
                    while not (self._closed or cancelled) and self._generation == seen:
                        self._changed.wait()
                    if self._closed or cancelled:
                        return
                    seen = self._generation
                yield self.current_list()
        finally:
            with self._changed:
                self._open_streams -= 1
            self._observer.stream_closed(self.resource.name)

    def GetPreferredAllocation(self, request: deviceplugin_pb2.PreferredAllocationRequest, context: Any) -> Any:  # noqa: N802
        responses = []
        for container in request.container_requests:
            try:
                ids = self.allocator.preferred(
                    list(container.available_deviceIDs),
                    list(container.must_include_deviceIDs),
                    container.allocation_size,
                )
            except AllocationError as exc:
                log.warning("GetPreferredAllocation for %s refused: %s", self.resource.name, exc)
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"error getting list of preferred allocation devices: {exc}"
                )
            responses.append(deviceplugin_pb2.ContainerPreferredAllocationResponse(deviceIDs=list(ids)))
        return deviceplugin_pb2.PreferredAllocationResponse(container_responses=responses)

    def Allocate(self, request: deviceplugin_pb2.AllocateRequest, context: Any) -> Any:  # noqa: N802
        started = time.perf_counter()
        requests = requested_ids(request)
        name = self.resource.name
        try:
            answer = self.allocator.allocate(requests)
        except AllocationError as exc:
            log.warning("Allocate for %s refused: %s", name, exc)
            self._observer.allocation_failed(name, exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except AllocationFailed as exc:
            log.error("Allocate for %s failed: %s", name, exc)
            context.abort(grpc.StatusCode.INTERNAL, str(exc))
        cached = self._responses.get(id(answer))
        if cached is not None and cached[0] is answer:
            response = cached[1]
        else:
            response = allocate_response(answer)
            if len(self._responses) >= RESPONSE_CACHE_LIMIT:
                self._responses.clear()
            self._responses[id(answer)] = (answer, response)  # holding the answer keeps its id unique
        self._observer.allocated(name, requests, time.perf_counter() - started)
        return response

    def PreStartContainer(self, request: deviceplugin_pb2.PreStartContainerRequest, context: Any) -> Any:  # noqa: N802
        return deviceplugin_pb2.PreStartContainerResponse()
