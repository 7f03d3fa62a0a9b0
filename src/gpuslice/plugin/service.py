"""The v1beta1 DevicePlugin service for one resource: five RPCs over its Allocator, limits and answer memory."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

import grpc
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from gpuslice.allocation import AllocateOptions, AllocationError, AllocationFailed, Allocator
from gpuslice.plugin.convert import allocate_response, device_list, requested_ids
from gpuslice.plugin.rpc_limits import MAX_STREAMS_PER_RESOURCE, StreamSlots, request_problem
from gpuslice.sharing import Resource
from gpuslice.wire import deviceplugin_pb2

log = logging.getLogger("gpuslice.plugin")

SERVICE_NAME = deviceplugin_pb2.DESCRIPTOR.services_by_name["DevicePlugin"].full_name  # v1beta1.DevicePlugin
# Remembered Allocate answers per resource, bounded in count and in bytes (a request may be megabytes
# long within the limits); past either bound the memory starts over, and an entry larger than
# ANSWER_MEMORY_MAX_ENTRY_BYTES is answered but never remembered.
ANSWER_MEMORY_ENTRIES = 1024
ANSWER_MEMORY_BYTES = 8 << 20
ANSWER_MEMORY_MAX_ENTRY_BYTES = 64 << 10
_OPTIONS = deviceplugin_pb2.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)
_PRE_START = deviceplugin_pb2.PreStartContainerResponse()


class PluginObserver(Protocol):
    """Hooks for metrics and logs (plugin.metrics plugs Prometheus in here); every method must be cheap.

    Open streams are not reported here: the service's StreamSlots is their one count (`open_streams`).
    """

    def allocated(self, resource: str, containers: int, seconds: float) -> None: ...

    def allocation_failed(self, resource: str, error: AllocationError) -> None: ...


class NullObserver:
    """Observes nothing."""

    def allocated(self, resource: str, containers: int, seconds: float) -> None:
        pass

    def allocation_failed(self, resource: str, error: AllocationError) -> None:
        pass


class ResourceService:
    """Serves one resource through its Allocator. Refused requests become INVALID_ARGUMENT (a limit, a
    malformed message, a bad device ID, named), device failures INTERNAL; either way the server keeps
    serving. At most `max_streams` ListAndWatch streams are open at once (twice that in the window around a
    registration, so the kubelet always gets its stream: rpc_limits.StreamSlots); more get RESOURCE_EXHAUSTED.

    Allocate works on the wire bytes (see `method_handlers`). When the allocator's answers are
    repeatable, the serialized response of each request is remembered under the request's bytes, so a
    repeated Allocate is a lookup: every check already passed for those bytes (limits, parsing, device
    IDs against the same health and options), and the memory is forgotten at every change the allocator
    reports and at every `set_options`, so a remembered answer never outlives what it was built from.
    Errors are never remembered. The observer hears of every call, remembered or not.

    ListAndWatch waits on a condition bumped by the allocator's listing changes (and by stream cancel /
    close), so an idle stream costs a parked thread and no CPU.
    """

    def __init__(
        self, allocator: Allocator, observer: PluginObserver | None = None, max_streams: int = MAX_STREAMS_PER_RESOURCE
    ) -> None:
        self.allocator = allocator
        self._name = allocator.resource.name
        self._observer: PluginObserver = observer or NullObserver()
        self.streams = StreamSlots(max_streams)
        self._changed = threading.Condition()
        self._generation = 0
        self._closed = False
        self._memory_lock = threading.Lock()
        self._answers: dict[bytes, tuple[bytes, int]] = {}  # request bytes -> (response bytes, containers)
        self._answers_bytes = 0
        self._remove_listener = allocator.add_listener(self.notify_changed)

    @property
    def resource(self) -> Resource:
        return self.allocator.resource

    @property
    def open_streams(self) -> int:
        return self.streams.open

    @property
    def remembered_answers(self) -> int:
        """How many Allocate answers are remembered now."""
        return len(self._answers)

    def set_options(self, options: AllocateOptions) -> None:
        """Answer later Allocate calls with new options (a config reload); in-flight calls keep the old ones."""
        self.allocator.set_options(options)
        self._forget_answers()  # after the new options are in: an answer built from the old ones is not kept

    def notify_changed(self) -> None:
        """Something in the device list changed: every open ListAndWatch sends the full list again."""
        self._forget_answers()
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def close(self) -> None:
        """End every open ListAndWatch stream and stop listening to the allocator."""
        self._remove_listener()
        self.allocator.close()
        self._forget_answers()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def current_list(self) -> deviceplugin_pb2.ListAndWatchResponse:
        return device_list(self.resource, self.allocator.unhealthy_now())

    def method_handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        """The DevicePlugin service's handlers (SERVICE_NAME): Allocate takes and gives bytes, parsing and
        serializing itself only when it builds an answer; the others go through the generated messages."""
        pb = deviceplugin_pb2
        return {
            "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(
                self.GetDevicePluginOptions, pb.Empty.FromString, pb.DevicePluginOptions.SerializeToString
            ),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                self.ListAndWatch, pb.Empty.FromString, pb.ListAndWatchResponse.SerializeToString
            ),
            "GetPreferredAllocation": grpc.unary_unary_rpc_method_handler(
                self.GetPreferredAllocation,
                pb.PreferredAllocationRequest.FromString,
                pb.PreferredAllocationResponse.SerializeToString,
            ),
            "Allocate": grpc.unary_unary_rpc_method_handler(self.allocate_wire),
            "PreStartContainer": grpc.unary_unary_rpc_method_handler(
                self.PreStartContainer,
                pb.PreStartContainerRequest.FromString,
                pb.PreStartContainerResponse.SerializeToString,
            ),
        }

    def GetDevicePluginOptions(self, request: deviceplugin_pb2.Empty, context: Any) -> Any:  # noqa: N802
        return _OPTIONS

    def ListAndWatch(  # noqa: N802
        self, request: deviceplugin_pb2.Empty, context: Any
    ) -> Iterator[deviceplugin_pb2.ListAndWatchResponse]:
        release = self.streams.take()
        if release is None:
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self._name}: {self.streams.limit} ListAndWatch streams are already open, the limit per "
                "resource (MAX_STREAMS_PER_RESOURCE); close one first",
            )
            return
        cancelled = False

        def on_rpc_done() -> None:
            nonlocal cancelled
            release()  # the RPC's end, however it ends (this generator may never be resumed after it)
            with self._changed:
                cancelled = True
                self._changed.notify_all()

        try:
            if not context.add_callback(on_rpc_done):
                return
            with self._changed:
                if self._closed:
                    return
                seen = self._generation
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
            release()

    def GetPreferredAllocation(self, request: deviceplugin_pb2.PreferredAllocationRequest, context: Any) -> Any:  # noqa: N802
        problem = request_problem("GetPreferredAllocation", request)
        if problem is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self._name}: {problem}")
        responses = []
        for container in request.container_requests:
            try:
                ids = self.allocator.preferred(
                    list(container.available_deviceIDs),
                    list(container.must_include_deviceIDs),
                    container.allocation_size,
                )
            except AllocationError as exc:
                log.warning("GetPreferredAllocation for %s refused: %s", self._name, exc)
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"error getting list of preferred allocation devices: {exc}"
                )
            responses.append(deviceplugin_pb2.ContainerPreferredAllocationResponse(deviceIDs=list(ids)))
        return deviceplugin_pb2.PreferredAllocationResponse(container_responses=responses)

    def allocate_wire(self, request: bytes, context: Any) -> bytes:
        """Allocate from the serialized AllocateRequest to the serialized AllocateResponse."""
        started = time.perf_counter()
        answers = self._answers  # taken before the answer is built: a change meanwhile replaces it
        remembered = answers.get(request)
        if remembered is None:
            remembered = self._answer(request, context)
            if self.allocator.repeatable_answers:
                self._remember(answers, request, remembered)
        self._observer.allocated(self._name, remembered[1], time.perf_counter() - started)
        return remembered[0]

    def _answer(self, raw: bytes, context: Any) -> tuple[bytes, int]:
        """Parse, check and answer one Allocate: (the serialized response, the number of containers)."""
        name = self._name
        try:
            request = deviceplugin_pb2.AllocateRequest.FromString(raw)
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{name}: Allocate: not an AllocateRequest message: {exc}")
        problem = request_problem("Allocate", request)
        if problem is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{name}: {problem}")
        requests = requested_ids(request)
        try:
            answer = self.allocator.allocate(requests)
        except AllocationError as exc:
            log.warning("Allocate for %s refused: %s", name, exc)
            self._observer.allocation_failed(name, exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except AllocationFailed as exc:
            log.error("Allocate for %s failed: %s", name, exc)
            context.abort(grpc.StatusCode.INTERNAL, str(exc))
        return allocate_response(answer).SerializeToString(), len(requests)

    def _remember(self, answers: dict[bytes, tuple[bytes, int]], request: bytes, remembered: tuple[bytes, int]) -> None:
        size = len(request) + len(remembered[0])
        if size > ANSWER_MEMORY_MAX_ENTRY_BYTES:
            return
        with self._memory_lock:
            if answers is not self._answers:  # forgotten while this answer was built: it may be stale
                return
            if len(answers) >= ANSWER_MEMORY_ENTRIES or self._answers_bytes + size > ANSWER_MEMORY_BYTES:
                self._answers = answers = {}
                self._answers_bytes = 0
            answers[request] = remembered
            self._answers_bytes += size

    def _forget_answers(self) -> None:
        with self._memory_lock:
            self._answers = {}
            self._answers_bytes = 0

    def PreStartContainer(self, request: deviceplugin_pb2.PreStartContainerRequest, context: Any) -> Any:  # noqa: N802
        return _PRE_START
