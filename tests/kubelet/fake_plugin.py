"""A minimal honest device plugin for the mock kubelet's tests: fixed devices, flippable health."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from gpuslice.wire import API_VERSION, HEALTHY, deviceplugin_grpc, deviceplugin_pb2

PreferFn = Callable[[Sequence[str], Sequence[str], int], Sequence[str]]


def prefer_last(available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
    """Prefers the highest IDs, so a test can tell the answer was used (the kubelet's top-up takes the lowest)."""
    return [*must_include, *[d for d in sorted(available, reverse=True) if d not in must_include]][:size]


class FakeDevicePlugin(deviceplugin_grpc.DevicePluginServicer):
    """Serves v1beta1.DevicePlugin on `<directory>/<socket_name>`; records what the kubelet asked."""

    def __init__(
        self,
        directory: Path,
        socket_name: str,
        devices: Mapping[str, str] | Sequence[str],
        *,
        numa: Mapping[str, int] | None = None,
        prefer: PreferFn | None = prefer_last,
        pre_start_required: bool = False,
        options_error: grpc.StatusCode | None = None,
    ) -> None:
        self.socket_path = directory / socket_name
        self.socket_name = socket_name
        self.devices: dict[str, str] = (
            dict(devices) if isinstance(devices, Mapping) else dict.fromkeys(devices, HEALTHY)
        )
        self.numa = dict(numa or {})
        self.prefer = prefer
        self.pre_start_required = pre_start_required
        self.options_error = options_error
        self.allocate_error: tuple[grpc.StatusCode, str] | None = None
        self.preferred_requests: list[deviceplugin_pb2.PreferredAllocationRequest] = []
        self.allocate_requests: list[list[str]] = []
        self.pre_start_requests: list[list[str]] = []
        self.streams_opened = 0
        self.streams_active = 0
        self._cond = threading.Condition()
        self._version = 0
        self._end_generation = 0
        self._stopped = False
        self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fake-plugin")
        self._server = grpc.server(self._executor)
        deviceplugin_grpc.add_DevicePluginServicer_to_server(self, self._server)  # type: ignore[no-untyped-call]
        assert self._server.add_insecure_port(f"unix:{self.socket_path}") != 0

    # Control from the test ------------------------------------------------------------------

    def start(self) -> FakeDevicePlugin:
        self._server.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._server.stop(0).wait()
        self._executor.shutdown(wait=True)

    def set_health(self, device: str, health: str) -> None:
        with self._cond:
            self.devices[device] = health
            self._version += 1
            self._cond.notify_all()

    def set_devices(self, devices: Mapping[str, str]) -> None:
        with self._cond:
            self.devices = dict(devices)
            self._version += 1
            self._cond.notify_all()

    def end_streams(self) -> None:
        """Return from every open ListAndWatch, as a plugin that gives up on its stream would."""
        with self._cond:
            self._end_generation += 1
            self._cond.notify_all()

    def wait_streams_active(self, count: int, timeout: float = 5.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.streams_active == count, timeout)

    def register(self, kubelet_socket: Path, resource_name: str, *, version: str = API_VERSION) -> None:
        """Call the kubelet's Register; raises grpc.RpcError when refused."""
        with grpc.insecure_channel(f"unix:{kubelet_socket}") as channel:
            stub = deviceplugin_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
            options = deviceplugin_pb2.DevicePluginOptions(
                pre_start_required=self.pre_start_required, get_preferred_allocation_available=self.prefer is not None
            )
            request = deviceplugin_pb2.RegisterRequest(
                version=version, endpoint=self.socket_name, resource_name=resource_name, options=options
            )
            stub.Register(request, timeout=15)

    # DevicePlugin service ------------------------------------------------------------------

    def GetDevicePluginOptions(self, request: Any, context: Any) -> deviceplugin_pb2.DevicePluginOptions:
        if self.options_error is not None:
            context.abort(self.options_error, "options are broken")
        return deviceplugin_pb2.DevicePluginOptions(
            pre_start_required=self.pre_start_required, get_preferred_allocation_available=self.prefer is not None
        )

    def _message(self) -> deviceplugin_pb2.ListAndWatchResponse:
        return deviceplugin_pb2.ListAndWatchResponse(
            devices=[
                deviceplugin_pb2.Device(
                    ID=device,
                    health=health,
                    topology=(
                        deviceplugin_pb2.TopologyInfo(nodes=[deviceplugin_pb2.NUMANode(ID=self.numa[device])])
                        if device in self.numa
                        else None
                    ),
                )
                for device, health in self.devices.items()
            ]
        )

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _has_news(self, last_sent: int, generation: int, context: Any) -> bool:
        ended = self._stopped or self._end_generation != generation or not context.is_active()
        return ended or last_sent != self._version

    def ListAndWatch(self, request: Any, context: Any) -> Any:
        with self._cond:
            self.streams_opened += 1
            self.streams_active += 1
            generation = self._end_generation
            self._cond.notify_all()
        context.add_callback(self._wake)
        sent = -1
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(functools.partial(self._has_news, sent, generation, context))
                    if self._stopped or self._end_generation != generation or not context.is_active():
                        return
                    sent = self._version
                    message = self._message()
                yield message
        finally:
            with self._cond:
                self.streams_active -= 1
                self._cond.notify_all()

    def GetPreferredAllocation(self, request: Any, context: Any) -> deviceplugin_pb2.PreferredAllocationResponse:
        self.preferred_requests.append(request)
        assert self.prefer is not None
        responses = [
            deviceplugin_pb2.ContainerPreferredAllocationResponse(
                deviceIDs=self.prefer(list(r.available_deviceIDs), list(r.must_include_deviceIDs), r.allocation_size)
            )
            for r in request.container_requests
        ]
        return deviceplugin_pb2.PreferredAllocationResponse(container_responses=responses)

    def Allocate(self, request: Any, context: Any) -> deviceplugin_pb2.AllocateResponse:
        if self.allocate_error is not None:
            context.abort(*self.allocate_error)
        if not request.container_requests:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no container requests")
        responses = []
        for container in request.container_requests:
            ids = list(container.devices_ids)
            self.allocate_requests.append(ids)
            if not ids:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "empty device list")
            for device in ids:
                if ids.count(device) > 1:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"device {device} requested twice")
                if device not in self.devices:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown device {device}")
                if self.devices[device] != HEALTHY:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"device {device} is unhealthy")
            responses.append(
                deviceplugin_pb2.ContainerAllocateResponse(
                    envs={"FAKE_DEVICES": ",".join(ids)},
                    devices=[
                        deviceplugin_pb2.DeviceSpec(
                            container_path=f"/dev/fake-{d}", host_path=f"/dev/fake-{d}", permissions="rw"
                        )
                        for d in ids
                    ],
                )
            )
        return deviceplugin_pb2.AllocateResponse(container_responses=responses)

    def PreStartContainer(self, request: Any, context: Any) -> deviceplugin_pb2.PreStartContainerResponse:
        self.pre_start_requests.append(list(request.devices_ids))
        return deviceplugin_pb2.PreStartContainerResponse()
