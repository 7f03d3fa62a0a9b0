"""ListAndWatch: every message replaces the view; healthy = allocatable; a stream end is never re-opened."""

from __future__ import annotations

import pytest

from gpuslice.kubelet import MockKubelet
from tests.kubelet.conftest import MakePlugin, register

RESOURCE = "example.com/fake"


def test_unhealthy_device_leaves_allocatable_not_capacity(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    plugin.set_health("d1", "Unhealthy")
    assert kubelet.wait_for(resource=RESOURCE, capacity=4, allocatable=3)
    view = kubelet.resources()[RESOURCE]
    assert view.unhealthy == {"d1"} and view.healthy == {"d0", "d2", "d3"}
    plugin.set_health("d1", "Healthy")
    assert kubelet.wait_for(resource=RESOURCE, capacity=4, allocatable=4)


@pytest.mark.parametrize("health", ["", "healthy", "HEALTHY", "Unhealthy", "ok"])
def test_only_the_exact_healthy_string_counts(kubelet: MockKubelet, make_plugin: MakePlugin, health: str) -> None:
    plugin = make_plugin(devices={"d0": "Healthy", "d1": health})
    register(kubelet, plugin)
    view = kubelet.resources()[RESOURCE]
    assert (view.capacity, view.allocatable) == (2, 1)
    assert view.devices == {"d0": "Healthy", "d1": "Unhealthy"}


def test_a_device_missing_from_a_message_is_removed(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    plugin.set_devices({"d0": "Healthy", "d9": "Healthy"})
    assert kubelet.wait_for(resource=RESOURCE, capacity=2)
    assert set(kubelet.resources()[RESOURCE].devices) == {"d0", "d9"}
    last = kubelet.last_list_and_watch(RESOURCE)
    assert last is not None and [device.ID for device in last.devices] == ["d0", "d9"]


def test_numa_topology_is_kept(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    register(kubelet, make_plugin(numa={"d0": 0, "d1": 1}))
    assert kubelet.resources()[RESOURCE].numa_nodes == {"d0": (0,), "d1": (1,), "d2": (), "d3": ()}


def test_stream_end_marks_everything_unhealthy_and_is_not_reopened(
    kubelet: MockKubelet, make_plugin: MakePlugin
) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    plugin.end_streams()
    assert kubelet.wait_for(resource=RESOURCE, registered=False)
    view = kubelet.resources()[RESOURCE]
    assert (view.capacity, view.allocatable) == (4, 0)
    assert view.stopped_at is not None
    # The kubelet never re-opens the stream: the plugin's changes are no longer seen.
    plugin.set_health("d0", "Unhealthy")
    assert plugin.wait_streams_active(0)
    assert plugin.streams_opened == 1
    with pytest.raises(LookupError):
        kubelet.plugin_stub(RESOURCE)
    # Only a new Register brings the devices back.
    register(kubelet, plugin)
    assert kubelet.wait_for(resource=RESOURCE, registered=True, allocatable=3)
    assert plugin.streams_opened == 2


def test_plugin_exit_marks_everything_unhealthy(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    plugin.stop()
    assert kubelet.wait_for(resource=RESOURCE, registered=False, capacity=4, allocatable=0)


def test_wait_for_times_out_when_the_condition_never_holds(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    register(kubelet, make_plugin())
    assert not kubelet.wait_for(resource=RESOURCE, allocatable=5, timeout=0.05)
    assert kubelet.wait_for(lambda views: views[RESOURCE].capacity == 4, timeout=1)
    with pytest.raises(ValueError, match="resource="):
        kubelet.wait_for(allocatable=1)
