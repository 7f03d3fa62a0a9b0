"""The DRA prepare's floor: a bare grpcio DRA server that reads each claim and saves one durable checkpoint."""

from __future__ import annotations

import http.client
import json
import os
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc

from gpuslice.dra.kubelet_plugin import NODE_WORKERS
from gpuslice.dra.sockets import serve
from gpuslice.wire import dra_v1_grpc, dra_v1_pb2

FLOOR_AGENT = "bench-dra-floor"  # the User-Agent of the floor's reads, so the API server child tells them apart
_FSYNC = os.fsync  # the real one: the benchmark counts the plugin's fsyncs by replacing os.fsync


class BareDraFloor(dra_v1_grpc.DRAPluginServicer):  # type: ignore[misc]
    """The least any DRA driver does to prepare a claim, in plain Python: GET the claim from the API server
    (http.client on one kept-alive connection per thread, no client library), take its first allocated
    device, save the prepared claims as one JSON file the way the kubelet's own checkpoints are saved (a
    temporary file, fsync, rename; no directory fsync), and answer with the device and a CDI ID of a spec
    written beforehand (no spec per claim). No checks, limits, deadlines or retries: a floor, not a driver."""

    def __init__(self, api_url: str, checkpoint: Path) -> None:
        parts = urllib.parse.urlsplit(api_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.checkpoint = checkpoint
        self.prepared: dict[str, str] = {}
        self.lock = threading.Lock()
        self.local = threading.local()

    def _get(self, path: str) -> dict[str, Any]:
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
        connection.request("GET", path, headers={"User-Agent": FLOOR_AGENT, "Accept": "application/json"})
        answer = connection.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {answer.status}")
        found: dict[str, Any] = json.loads(body)
        return found

    def _save(self) -> None:
        data = json.dumps(self.prepared).encode()
        temporary = self.checkpoint.with_name(f".{self.checkpoint.name}.tmp")  # saves hold the lock: one name
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(descriptor, data)
            _FSYNC(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, self.checkpoint)

    def NodePrepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = dra_v1_pb2.NodePrepareResourcesResponse()
        for claim in request.claims:
            path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
            found = self._get(path)
            result = found["status"]["allocation"]["devices"]["results"][0]
            with self.lock:
                self.prepared[claim.uid] = result["device"]
                self._save()
            answer.claims[claim.uid].devices.add(
                request_names=[result["request"]],
                pool_name=result["pool"],
                device_name=result["device"],
                cdi_device_ids=[f"k8s.{result['driver']}/gpu={result['device']}"],
            )
        return answer

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802
        answer = dra_v1_pb2.NodeUnprepareResourcesResponse()
        with self.lock:
            for claim in request.claims:
                self.prepared.pop(claim.uid, None)
                answer.claims[claim.uid].error = ""
            self._save()
        return answer


@contextmanager
def served_floor(socket: Path, api_url: str, checkpoint: Path) -> Iterator[Any]:
    """The floor served on `socket` by the DRA plugin's own server (`dra.sockets.serve`, its node service's
    pool size), so that only the handler differs; yields a DRAPlugin stub for it."""
    floor = BareDraFloor(api_url, checkpoint)
    server = serve(
        socket, lambda s: dra_v1_grpc.add_DRAPluginServicer_to_server(floor, s), NODE_WORKERS, "bench-dra-floor"
    )
    channel = grpc.insecure_channel(f"unix:{socket}")
    try:
        yield dra_v1_grpc.DRAPluginStub(channel)  # type: ignore[no-untyped-call]
    finally:
        channel.close()
        server.stop()
