"""Remembered Allocate answers through a real server: a repeated request is answered from memory, counted every
time, and never after a health change or a reload; refusals, malformed and cdi-annotations requests never are."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from gpuslice.allocation import AllocateOptions, AllocationAnswer, AllocationError, StaticAllocator, nvidia_answer
from gpuslice.plugin.server import ResourceServer
from gpuslice.plugin.service import ANSWER_MEMORY_MAX_ENTRY_BYTES, SERVICE_NAME, NullObserver, ResourceService
from gpuslice.sharing import HealthStore
from gpuslice.wire import deviceplugin_pb2
from tests.plugin.rpc import TIMEOUT_S, PluginClient, allocate_request, rpc_error
from tests.support.resources import TIME_SLICED, resource_for

NODE, RESOURCE = resource_for("h100x4", TIME_SLICED)
DEVICE = RESOURCE.devices[5]


class CountingObserver(NullObserver):
    def __init__(self) -> None:
        self.containers: list[int] = []
        self.refusals: list[str] = []

    def allocated(self, resource: str, containers: int, seconds: float) -> None:
        self.containers.append(containers)

    def allocation_failed(self, resource: str, error: AllocationError) -> None:
        self.refusals.append(type(error).__name__)


class HookedAllocator(StaticAllocator):
    """The static allocator, running `during_allocate` after each answer is built and before it is returned."""

    during_allocate: Callable[[], None] = staticmethod(lambda: None)

    def allocate(self, requests: Sequence[Sequence[str]]) -> AllocationAnswer:
        answer = super().allocate(requests)
        self.during_allocate()
        return answer


@dataclass
class Served:
    health: HealthStore
    allocator: HookedAllocator
    service: ResourceService
    observer: CountingObserver
    client: PluginClient

    def allocate(self, *containers: Sequence[str]) -> deviceplugin_pb2.AllocateResponse:
        return self.client.stub.Allocate(allocate_request(*containers), timeout=TIMEOUT_S)


@pytest.fixture
def served(workdir: Path) -> Iterator[Served]:
    health = HealthStore(NODE)
    allocator = HookedAllocator(RESOURCE, health)
    observer = CountingObserver()
    service = ResourceService(allocator, observer)
    server = ResourceServer(service, workdir)
    server.start()
    try:
        with PluginClient(server.socket_path) as client:
            yield Served(health, allocator, service, observer, client)
    finally:
        server.stop()


def test_a_repeated_request_is_answered_from_memory_and_counted_every_time(served: Served) -> None:
    first = served.allocate([DEVICE.id])
    assert served.service.remembered_answers == 1
    assert [served.allocate([DEVICE.id]) for _ in range(3)] == [first] * 3
    assert served.service.remembered_answers == 1
    assert served.allocate([DEVICE.id], [RESOURCE.devices[0].id]).container_responses[1] != first
    assert served.observer.containers == [1, 1, 1, 1, 2]


def test_a_health_change_forgets_the_answers(served: Served) -> None:
    healthy = served.allocate([DEVICE.id])
    served.health.mark_unhealthy(DEVICE.physical_id)
    assert served.service.remembered_answers == 0
    for _ in range(2):  # a refusal is never remembered either
        error = rpc_error(served.client.stub.Allocate, allocate_request([DEVICE.id]))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert DEVICE.id in (error.details() or "")
    assert served.observer.refusals == ["UnhealthyDevice"] * 2
    served.health.mark_healthy(DEVICE.physical_id)
    assert served.allocate([DEVICE.id]) == healthy


def test_an_answer_built_across_a_health_change_is_not_remembered(served: Served) -> None:
    served.allocator.during_allocate = lambda: served.health.mark_unhealthy(DEVICE.physical_id)
    assert served.allocate([DEVICE.id]).container_responses  # built before the change reached us
    served.allocator.during_allocate = lambda: None
    assert served.service.remembered_answers == 0
    assert rpc_error(served.client.stub.Allocate, allocate_request([DEVICE.id])).code() == (
        grpc.StatusCode.INVALID_ARGUMENT
    )


def test_a_reload_forgets_the_answers(served: Served) -> None:
    assert served.allocate([DEVICE.id]).container_responses[0].devices
    served.service.set_options(AllocateOptions(pass_device_specs=False))
    assert served.service.remembered_answers == 0
    assert not served.allocate([DEVICE.id]).container_responses[0].devices


def test_cdi_annotations_answers_are_built_every_call(served: Served) -> None:
    served.service.set_options(AllocateOptions(strategies=("cdi-annotations",), pipeline=(nvidia_answer,)))
    keys = [tuple(served.allocate([DEVICE.id]).container_responses[0].annotations) for _ in range(2)]
    assert keys[0] != keys[1] and served.service.remembered_answers == 0


def test_a_malformed_request_is_invalid_argument_and_the_server_survives(served: Served) -> None:
    raw = served.client.channel.unary_unary(f"/{SERVICE_NAME}/Allocate")  # bytes in, bytes out
    with pytest.raises(grpc.RpcError) as caught:
        raw(b"\x0a\xff\xff\xff", timeout=TIMEOUT_S)  # a length prefix running past the end of the message
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not an AllocateRequest message" in (caught.value.details() or "")
    assert served.allocate([DEVICE.id]).container_responses


def test_an_oversized_answer_is_given_but_not_remembered(served: Served) -> None:
    ids = [DEVICE.id] * (ANSWER_MEMORY_MAX_ENTRY_BYTES // len(DEVICE.id) + 1)  # one device, named many times
    assert served.allocate(ids).container_responses
    assert served.service.remembered_answers == 0


def test_the_handlers_are_the_device_plugin_service() -> None:
    service = deviceplugin_pb2.DESCRIPTOR.services_by_name["DevicePlugin"]
    handlers = ResourceService(StaticAllocator(RESOURCE, HealthStore(NODE))).method_handlers()
    assert sorted(handlers) == sorted(method.name for method in service.methods)
    for method in service.methods:
        assert handlers[method.name].response_streaming == method.server_streaming, method.name
