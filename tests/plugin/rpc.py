"""Raw v1beta1 calls for tests: straight to a plugin socket, or over the kubelet's live connection."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2

TIMEOUT_S = 10.0


def allocate_request(*containers: Sequence[str]) -> deviceplugin_pb2.AllocateRequest:
    return deviceplugin_pb2.AllocateRequest(
        container_requests=[deviceplugin_pb2.ContainerAllocateRequest(devices_ids=list(ids)) for ids in containers]
    )


def preferred_request(available: Sequence[str], must: Sequence[str], size: int) -> Any:
    return deviceplugin_pb2.PreferredAllocationRequest(
        container_requests=[
            deviceplugin_pb2.ContainerPreferredAllocationRequest(
                available_deviceIDs=list(available), must_include_deviceIDs=list(must), allocation_size=size
            )
        ]
    )


def rpc_error(call: Any, request: Any) -> grpc.RpcError:
    """The error a call ends with; fails the test if it succeeds."""
    try:
        call(request, timeout=TIMEOUT_S)
    except grpc.RpcError as exc:
        return exc
    raise AssertionError(f"expected an error from {request}")


class PluginClient:
    """A channel of our own to a plugin socket (as a second kubelet would hold one)."""

    def __init__(self, socket_path: Path) -> None:
        self.channel = grpc.insecure_channel(f"unix:{socket_path}")
        self.stub = deviceplugin_grpc.DevicePluginStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> PluginClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
