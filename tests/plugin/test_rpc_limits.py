"""gRPC under load and hostile requests: streams cannot starve Allocate, a stream cap, size and count limits."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpuslice.allocation import StaticAllocator
from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.plugin.rpc_limits import (
    MAX_CONTAINERS_PER_REQUEST,
    MAX_IDS_PER_REQUEST,
    MAX_STREAMS_PER_RESOURCE,
)
from gpuslice.plugin.server import DEFAULT_WORKERS, ResourceServer
from gpuslice.plugin.service import ResourceService
from gpuslice.sharing import HealthStore, build_resources
from gpuslice.wire import MAX_REQUEST_BYTES, deviceplugin_pb2
from tests.plugin.rpc import PluginClient, allocate_request, preferred_request

ALLOCATE_DEADLINE_S = 5.0


@pytest.fixture
def server(workdir: Path) -> Iterator[ResourceServer]:
    node = load_node_spec("preset:h100x4").node
    (resource,) = build_resources(node, parse_config_text("").config).resources
    running = ResourceServer(ResourceService(StaticAllocator(resource, HealthStore(node))), workdir)
    running.start()
    yield running
    running.stop()


def open_streams(client: PluginClient, count: int) -> tuple[list[Any], list[grpc.RpcError]]:
    """`count` ListAndWatch calls, each read up to its first message: (open calls, refusals)."""
    opened, refused = [], []
    for _ in range(count):
        call = client.stub.ListAndWatch(deviceplugin_pb2.Empty())
        try:
            next(call)
        except grpc.RpcError as exc:
            refused.append(exc)
        else:
            opened.append(call)
    return opened, refused


def test_open_streams_never_starve_allocate(server: ResourceServer) -> None:
    with PluginClient(server.socket_path) as client:
        opened, refused = open_streams(client, DEFAULT_WORKERS + MAX_STREAMS_PER_RESOURCE)  # more than the pool
        assert len(opened) == MAX_STREAMS_PER_RESOURCE and len(refused) == DEFAULT_WORKERS
        assert {exc.code() for exc in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert f"{MAX_STREAMS_PER_RESOURCE} ListAndWatch streams are already open" in str(refused[0].details())
        device = server.service.resource.devices[0].id
        for _ in range(DEFAULT_WORKERS * 2):
            client.stub.Allocate(allocate_request([device]), timeout=ALLOCATE_DEADLINE_S)
        for call in opened:
            call.cancel()


def test_a_closed_stream_frees_its_slot(server: ResourceServer) -> None:
    with PluginClient(server.socket_path) as client:
        opened, refused = open_streams(client, MAX_STREAMS_PER_RESOURCE + 1)
        assert len(opened) == MAX_STREAMS_PER_RESOURCE and len(refused) == 1
        opened[0].cancel()
        deadline = time.monotonic() + 5
        while server.service.open_streams >= MAX_STREAMS_PER_RESOURCE and time.monotonic() < deadline:
            time.sleep(0.02)
        again, refused = open_streams(client, 1)
        assert len(again) == 1 and refused == [], "a slot freed by a cancelled stream is reused"
        for call in opened[1:] + again:
            call.cancel()


def _ids(count: int) -> list[str]:
    return [f"GPU-{n}" for n in range(count)]


LIMITED = [
    # (id, rpc, request, status, fragment of the error)
    (
        "allocate-ids",
        "Allocate",
        allocate_request(_ids(MAX_IDS_PER_REQUEST + 1)),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"{MAX_IDS_PER_REQUEST + 1} device IDs, over the limit of {MAX_IDS_PER_REQUEST} per request",
    ),
    (
        "allocate-containers",
        "Allocate",
        allocate_request(*[["GPU-x"]] * (MAX_CONTAINERS_PER_REQUEST + 1)),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"container requests, over the limit of {MAX_CONTAINERS_PER_REQUEST}",
    ),
    (
        "preferred-ids",
        "GetPreferredAllocation",
        preferred_request(_ids(MAX_IDS_PER_REQUEST + 1), [], 1),
        grpc.StatusCode.INVALID_ARGUMENT,
        f"available device IDs, over the limit of {MAX_IDS_PER_REQUEST}",
    ),
    (
        "preferred-size",
        "GetPreferredAllocation",
        preferred_request(["GPU-x"], [], 2**31 - 1),
        grpc.StatusCode.INVALID_ARGUMENT,
        "as allocation size, over the limit",
    ),
    (
        "oversize",
        "Allocate",
        allocate_request(["x" * (MAX_REQUEST_BYTES + 1)]),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        str(MAX_REQUEST_BYTES),
    ),
]


@pytest.mark.parametrize(("rpc", "request_", "status", "text"), [c[1:] for c in LIMITED], ids=[c[0] for c in LIMITED])
def test_requests_over_a_limit_are_refused_naming_it(
    server: ResourceServer, rpc: str, request_: Any, status: grpc.StatusCode, text: str
) -> None:
    with PluginClient(server.socket_path) as client:
        with pytest.raises(grpc.RpcError) as caught:
            getattr(client.stub, rpc)(request_, timeout=10)
        assert caught.value.code() == status
        assert text in caught.value.details()
        device = server.service.resource.devices[0].id
        assert client.stub.Allocate(allocate_request([device]), timeout=10).container_responses, "still serving"
