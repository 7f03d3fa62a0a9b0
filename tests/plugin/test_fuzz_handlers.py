"""Fuzzing Allocate and GetPreferredAllocation through a real server on a real socket: an answer or a clean error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
from hypothesis import given
from hypothesis import strategies as st

from gpuslice.allocation import StaticAllocator
from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.plugin.server import ResourceServer
from gpuslice.plugin.service import ResourceService
from gpuslice.sharing import HealthStore, build_resources
from tests.plugin.rpc import PluginClient, allocate_request, preferred_request
from tests.support.dirs import short_temp_dir

CONFIG = "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}\n"
NODE = load_node_spec("preset:dgx-h100").node
(RESOURCE,) = build_resources(NODE, parse_config_text(CONFIG).config).resources
REAL_IDS = [device.id for device in RESOURCE.devices]
# The kubelet's errors are typed: a refused request is INVALID_ARGUMENT (or RESOURCE_EXHAUSTED for a
# limit). UNKNOWN would mean a handler raised something untyped; DEADLINE_EXCEEDED, a hang.
CLEAN_ERRORS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
CALL_TIMEOUT_S = 10.0

device_ids = st.one_of(
    st.sampled_from(REAL_IDS),
    st.sampled_from(REAL_IDS).map(lambda i: i.split("::")[0]),  # the physical GPU behind replicas
    st.sampled_from(REAL_IDS).map(lambda i: i + "::7"),
    st.sampled_from(["", "::", "GPU-", "../../etc", "\x00", "GPU-\n", "é" * 50, "0", "MIG-x/1/2"]),
    st.text(max_size=40),
)
id_lists = st.lists(device_ids, max_size=12)


@contextmanager
def serving() -> Iterator[PluginClient]:
    """A real server on a real socket for the whole of one fuzzer (its examples share it)."""
    with short_temp_dir() as folder:
        server = ResourceServer(ResourceService(StaticAllocator(RESOURCE, HealthStore(NODE))), Path(folder))
        server.start()
        try:
            with PluginClient(server.socket_path) as plugin:
                yield plugin
                # After every hostile request, the server still answers a good one.
                assert plugin.stub.Allocate(allocate_request([REAL_IDS[0]]), timeout=CALL_TIMEOUT_S)
        finally:
            server.stop()


def call(rpc: object, request: object) -> None:
    try:
        rpc(request, timeout=CALL_TIMEOUT_S)  # type: ignore[operator]
    except grpc.RpcError as exc:
        assert exc.code() in CLEAN_ERRORS, f"{exc.code()}: {exc.details()}"


def test_fuzz_allocate() -> None:
    with serving() as client:

        @given(st.lists(id_lists, min_size=0, max_size=4))
        def allocate(containers: list[list[str]]) -> None:
            call(client.stub.Allocate, allocate_request(*containers))

        allocate()


def test_fuzz_get_preferred_allocation() -> None:
    with serving() as client:

        @given(id_lists, id_lists, st.integers(min_value=-3, max_value=70))
        def preferred(available: list[str], must: list[str], size: int) -> None:
            call(client.stub.GetPreferredAllocation, preferred_request(available, must, size))

        preferred()
