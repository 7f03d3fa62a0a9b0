"""The v1beta1 DevicePlugin service for one resource: five RPCs over the pure allocation functions."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

import grpc

from gpuslice.allocation import AllocateOptions, AllocationError, WholeGpuRule, allocate, preferred_allocation
from gpuslice.plugin.convert import allocate_response, device_list, requested_ids
from gpuslice.sharing import HealthStore, Resource
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2

log = logging.getLogger("gpuslice.plugin")


class PluginObserver(Protocol):
    """Hooks for metrics and logs (issue 4 plugs Prometheus in here); every method must be cheap."""

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
    """Serves one resource. Typed allocation errors become INVALID_ARGUMENT; the server keeps serving.

    ListAndWatch waits on a condition bumped by health changes (and by stream cancel / close), so an
    idle stream costs a parked thread and no CPU.
    """

    def __init__(
        self,
        resource: Resource,
        health: HealthStore,
        options: AllocateOptions | None = None,
        whole_gpu_rule: WholeGpuRule | None = None,
        observer: PluginObserver | None = None,
    ) -> None:
        self.resource = resource
        self._health = health
        self._options = options or AllocateOptions()
        self._whole_gpu_rule = whole_gpu_rule
        self._observer: PluginObserver = observer or NullObserver()
        self._changed = threading.Condition()
        self._generation = 0
        self._closed = False
        self._open_streams = 0
        self._remove_listener = health.add_listener(self.notify_changed)

    def set_options(self, options: AllocateOptions) -> None:
        """Answer later Allocate calls with new options (a config reload); in-flight calls keep the old ones."""
        self._options = options

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
        """End every open ListAndWatch stream and stop listening to health changes."""
        self._remove_listener()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def current_list(self) -> deviceplugin_pb2.ListAndWatchResponse:
        return device_list(self.resource, self._health.unhealthy_ids(self.resource))

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
                ids = preferred_allocation(
                    self.resource,
                    list(container.available_deviceIDs),
                    list(container.must_include_deviceIDs),
                    container.allocation_size,
                    whole_gpu_rule=self._whole_gpu_rule,
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
        try:
            answer = allocate(self.resource, requests, self._health.unhealthy_ids(self.resource), self._options)
        except AllocationError as exc:
            log.warning("Allocate for %s refused: %s", self.resource.name, exc)
            self._observer.allocation_failed(self.resource.name, exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        response = allocate_response(answer)
        self._observer.allocated(self.resource.name, requests, time.perf_counter() - started)
        return response

    def PreStartContainer(self, request: deviceplugin_pb2.PreStartContainerRequest, context: Any) -> Any:  # noqa: N802
        return deviceplugin_pb2.PreStartContainerResponse()
