"""Liveness of the serving path: each resource's gRPC server must answer a cheap call within a short deadline."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import grpc

from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2

# The kubelet gives Allocate no more than a few seconds; a server that cannot answer GetDevicePluginOptions
# (no work at all, the same worker pool as Allocate) within one second is starved or wedged, and a
# liveness probe failing on it gets the container restarted. The probe's own timeout must exceed this.
SERVING_PROBE_TIMEOUT_S = 1.0


def probe_serving(sockets: Iterable[Path], timeout_s: float = SERVING_PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """(ok, why): GetDevicePluginOptions over each socket, as the kubelet would dial it."""
    for path in sockets:
        try:
            with grpc.insecure_channel(f"unix:{path}") as channel:
                stub = deviceplugin_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
                stub.GetDevicePluginOptions(deviceplugin_pb2.Empty(), timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code().name if exc.code() is not None else "UNKNOWN"
            return False, f"gRPC server on {path.name} did not answer a call within {timeout_s:g} s ({code})"
    return True, "ok"
