"""Registration -> ListAndWatch -> admission with Allocate, for whole GPUs, time-slicing and MIG, over real gRPC."""

from __future__ import annotations

import pytest

from gpuslice.kubelet import MockKubelet
from gpuslice.plugin import socket_name
from tests.plugin.conftest import StartPlugin

TIME_SLICED = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}"
CONTROL = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]

MODES = [
    # (preset, config, resource, advertised, units per pod)
    ("h100x4", "", "nvidia.com/gpu", 4, 2),
    ("h100x4", TIME_SLICED, "nvidia.com/gpu", 16, 1),
    ("h100x4-mig", "flags: {migStrategy: mixed}", "nvidia.com/mig-1g.10gb", 28, 3),
]


@pytest.mark.parametrize(("preset", "config", "name", "count", "units"), MODES)
def test_register_list_allocate(
    kubelet: MockKubelet, start_plugin: StartPlugin, preset: str, config: str, name: str, count: int, units: int
) -> None:
    plugin = start_plugin(preset, config)
    resource = plugin.resource
    view = kubelet.resource(name)
    assert view is not None and view.registered
    assert view.endpoint == socket_name(name)
    assert view.options is not None and view.options.get_preferred_allocation_available
    assert (view.capacity, view.allocatable) == (count, count)
    assert set(view.devices) == {d.id for d in resource.devices}
    assert view.numa_nodes.get(resource.devices[0].id, ()) == (
        (resource.devices[0].numa_node,) if resource.devices[0].numa_node is not None else ()
    )

    allocation = kubelet.admit_one("pod-a", name, units)
    assert allocation.preferred is not None and list(allocation.preferred) == list(allocation.device_ids)
    devices = [resource.by_id[i] for i in allocation.device_ids]
    physical = list(dict.fromkeys(d.physical_id for d in devices))
    assert allocation.envs == {"NVIDIA_VISIBLE_DEVICES": ",".join(physical)}
    paths = [path for path, _, _ in allocation.device_nodes]
    assert paths[:3] == CONTROL
    for device in devices:
        assert device.gpu.device_path in paths
        if device.mig is not None:
            assert f"/dev/nvidia-caps/nvidia-cap{device.mig.gi_cap_minor}" in paths
            assert f"/dev/nvidia-caps/nvidia-cap{device.mig.ci_cap_minor}" in paths
    after = kubelet.resource(name)
    assert after is not None and len(after.free) == count - units


def test_whole_gpus_prefer_the_same_numa_node(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin()
    first = kubelet.admit_one("pod-a", "nvidia.com/gpu", 1)
    second = kubelet.admit_one("pod-b", "nvidia.com/gpu", 2)
    numa = {d.id: d.numa_node for d in plugin.resource.devices}
    assert len({numa[i] for i in second.device_ids}) == 1, "a pair on one NUMA node"
    assert not set(first.device_ids) & set(second.device_ids)


def test_time_slicing_spreads_pods_over_gpus(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin(config=TIME_SLICED)
    gpus = [plugin.resource.by_id[kubelet.admit_one(f"pod-{n}", "nvidia.com/gpu").device_ids[0]].gpu for n in range(4)]
    assert sorted(g.index for g in gpus) == [0, 1, 2, 3]


def test_deleting_a_pod_frees_its_devices(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    start_plugin()
    kubelet.admit_one("pod-a", "nvidia.com/gpu", 4)
    assert kubelet.delete_pod("pod-a")
    again = kubelet.admit_one("pod-b", "nvidia.com/gpu", 4)
    assert len(again.device_ids) == 4


def test_renamed_shared_resource_registers_under_its_new_name(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    start_plugin(config="sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 2}]}}")
    assert kubelet.resource("nvidia.com/gpu") is None
    view = kubelet.resource("nvidia.com/gpu.shared")
    assert view is not None and view.allocatable == 8 and view.endpoint == "gpuslice-nvidia.com-gpu.shared.sock"
