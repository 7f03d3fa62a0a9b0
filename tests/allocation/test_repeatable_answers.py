"""Which Allocate answers a front end may remember: static ones (a pure function of the request, health and
options, every change of those reaching the listeners), never cdi-annotations (a fresh UUID per call)."""

from __future__ import annotations

import pytest

from gpuslice.allocation import AllocateOptions, StaticAllocator, UnhealthyDevice
from gpuslice.allocation.strategies import nvidia_answer
from gpuslice.sharing import HealthStore
from tests.support.resources import TIME_SLICED, resource_for


def test_static_answers_are_repeatable_and_follow_health_at_once() -> None:
    node, resource = resource_for("h100x4", TIME_SLICED)
    health = HealthStore(node)
    allocator = StaticAllocator(resource, health)
    heard: list[None] = []
    allocator.add_listener(lambda: heard.append(None))
    device = resource.devices[5]
    first = allocator.allocate([[device.id]])
    assert allocator.repeatable_answers
    assert allocator.allocate([[device.id]]) == first
    health.mark_unhealthy(device.physical_id)
    assert heard, "a health change reaches the listeners, so a front end forgets what it remembered"
    with pytest.raises(UnhealthyDevice):
        allocator.allocate([[device.id]])
    health.mark_healthy(device.physical_id)
    assert allocator.allocate([[device.id]]) == first


def test_new_options_apply_to_the_next_answer() -> None:
    node, resource = resource_for("h100x4")
    allocator = StaticAllocator(resource, HealthStore(node))
    request = [[resource.devices[0].id]]
    assert allocator.allocate(request).containers[0].edits.device_nodes
    allocator.set_options(AllocateOptions(pass_device_specs=False))
    assert allocator.allocate(request).containers[0].edits.device_nodes == ()


def test_cdi_annotations_answers_are_not_repeatable() -> None:
    node, resource = resource_for("h100x4")
    names = iter(f"uuid-{n}" for n in range(10))
    options = AllocateOptions(strategies=("cdi-annotations",), new_uuid=lambda: next(names), pipeline=(nvidia_answer,))
    allocator = StaticAllocator(resource, HealthStore(node), options)
    assert not allocator.repeatable_answers
    request = [[resource.devices[0].id]]
    keys = [set(allocator.allocate(request).containers[0].edits.annotations) for _ in range(2)]
    assert keys[0] != keys[1] and all(len(k) == 1 for k in keys)
    allocator.set_options(AllocateOptions())
    assert allocator.repeatable_answers
