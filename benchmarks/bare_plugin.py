"""The start-up floor: a bare grpcio device plugin that serves four healthy GPUs and calls Register, nothing else.

`python -m benchmarks.bare_plugin KUBELET_SOCKET` runs until SIGTERM. It imports only grpcio and the generated
device-plugin messages, so its start -> Register time is what Python, gRPC and protobuf cost on this machine.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from gpuslice.wire.generated.deviceplugin.v1beta1 import api_pb2 as pb2
from gpuslice.wire.generated.deviceplugin.v1beta1 import api_pb2_grpc as pb2_grpc

RESOURCE = "nvidia.com/gpu"
DEVICES = 4


class _Plugin(pb2_grpc.DevicePluginServicer):  # type: ignore[misc]
    def __init__(self, stopped: threading.Event) -> None:
        self._stopped = stopped

    def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        return pb2.DevicePluginOptions()

    def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802 (gRPC method name)
        yield pb2.ListAndWatchResponse(devices=[pb2.Device(ID=f"gpu{n}", health="Healthy") for n in range(DEVICES)])
        self._stopped.wait()


def main(kubelet_socket: str) -> None:
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    path = Path(kubelet_socket).with_name("bare.sock")
    path.unlink(missing_ok=True)
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    pb2_grpc.add_DevicePluginServicer_to_server(_Plugin(stopped), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"unix:{path}")
    server.start()
    with grpc.insecure_channel(f"unix:{kubelet_socket}") as channel:
        request = pb2.RegisterRequest(version="v1beta1", endpoint=path.name, resource_name=RESOURCE)
        pb2_grpc.RegistrationStub(channel).Register(request, timeout=15)  # type: ignore[no-untyped-call]
    stopped.wait()
    server.stop(1).wait()
    path.unlink(missing_ok=True)


if __name__ == "__main__":
    main(sys.argv[1])
