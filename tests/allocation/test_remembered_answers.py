"""Remembered Allocate answers: built once per request, forgotten on every health change and reload, and never
kept for the cdi-annotations strategy, whose annotation carries a fresh UUID per call."""

from __future__ import annotations

import pytest

from gpuslice.allocation import AllocateOptions, StaticAllocator, UnhealthyDevice
from gpuslice.allocation.strategies import nvidia_answer
from gpuslice.sharing import HealthStore
from tests.support.resources import TIME_SLICED, resource_for


def test_the_same_request_gets_the_remembered_answer_until_health_changes() -> None:
    node, resource = resource_for("h100x4", TIME_SLICED)
    health = HealthStore(node)
    allocator = StaticAllocator(resource, health)
    device = resource.devices[5]
    first = allocator.allocate([[device.id]])
    assert allocator.allocate([[device.id]]) is first
    assert allocator.allocate([[resource.devices[0].id]]) is not first
    health.mark_unhealthy(device.physical_id)
    with pytest.raises(UnhealthyDevice):
        allocator.allocate([[device.id]])
    health.mark_healthy(device.physical_id)
    again = allocator.allocate([[device.id]])
    assert again is not first and again == first


def test_a_reload_forgets_the_answers() -> None:
    node, resource = resource_for("h100x4")
    allocator = StaticAllocator(resource, HealthStore(node))
    request = [[resource.devices[0].id]]
    with_nodes = allocator.allocate(request)
    assert with_nodes.containers[0].edits.device_nodes
    allocator.set_options(AllocateOptions(pass_device_specs=False))
    assert allocator.allocate(request).containers[0].edits.device_nodes == ()


def test_cdi_annotations_answers_are_built_per_call() -> None:
    node, resource = resource_for("h100x4")
    names = iter(f"uuid-{n}" for n in range(10))
    options = AllocateOptions(strategies=("cdi-annotations",), new_uuid=lambda: next(names), pipeline=(nvidia_answer,))
    allocator = StaticAllocator(resource, HealthStore(node), options)
    request = [[resource.devices[0].id]]
    keys = [set(allocator.allocate(request).containers[0].edits.annotations) for _ in range(2)]
    assert keys[0] != keys[1] and all(len(k) == 1 for k in keys)
