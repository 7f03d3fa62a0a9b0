"""The three classic device-plugin mistakes, each checked through the mock kubelet over real gRPC."""

from __future__ import annotations

import grpc
import pytest

from gpuslice.kubelet import AdmissionError, MockKubelet
from tests.plugin.conftest import WAIT_S, StartPlugin
from tests.plugin.rpc import TIMEOUT_S, allocate_request, rpc_error

TIME_SLICED = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}"
PACKED = TIME_SLICED + "\nflags: {plugin: {sharedDevicesAllocationPolicy: packed}}"
GPU = "nvidia.com/gpu"


def test_replicas_of_one_gpu_resolve_to_the_same_physical_id(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin(config=PACKED)
    first = kubelet.admit_one("pod-a", GPU)
    second = kubelet.admit_one("pod-b", GPU)
    both = kubelet.admit_one("pod-c", GPU, 2)
    gpu0 = plugin.node.gpus[0].uuid
    assert first.device_ids != second.device_ids
    assert [plugin.resource.by_id[i].physical_id for i in (*first.device_ids, *second.device_ids)] == [gpu0, gpu0]
    assert first.envs == second.envs == {"NVIDIA_VISIBLE_DEVICES": gpu0}
    assert len(set(both.device_ids)) == 2 and all(i.startswith(gpu0) for i in both.device_ids)
    assert both.envs == {"NVIDIA_VISIBLE_DEVICES": gpu0}, "two replicas of one GPU: its ID once"


@pytest.mark.parametrize(
    ("preset", "config", "name"),
    [
        ("h100x4", "", GPU),
        ("h100x4", TIME_SLICED, GPU),
        ("h100x4-mig", "flags: {migStrategy: mixed}", "nvidia.com/mig-1g.10gb"),
        ("h100x4-mig", "flags: {migStrategy: single}", GPU),
    ],
)
def test_every_allocation_injects_env_and_device_nodes(
    kubelet: MockKubelet, start_plugin: StartPlugin, preset: str, config: str, name: str
) -> None:
    plugin = start_plugin(preset, config)
    total = len(plugin.resource.devices)
    for n in range(min(total, 8)):
        allocation = kubelet.admit_one(f"pod-{n}", name)
        device = plugin.resource.by_id[allocation.device_ids[0]]
        assert allocation.envs["NVIDIA_VISIBLE_DEVICES"] == device.physical_id
        nodes = {path: (host, perms) for path, host, perms in allocation.device_nodes}
        for path in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", device.gpu.device_path):
            assert nodes[path] == (path, "rw")
        assert any("nvidia-caps" in path for path in nodes) is (device.mig is not None)


def test_never_more_replicas_than_exist(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin(config=TIME_SLICED)
    held = [kubelet.admit_one(f"pod-{n}", GPU).device_ids[0] for n in range(16)]
    assert sorted(held) == sorted(d.id for d in plugin.resource.devices)
    with pytest.raises(AdmissionError, match="requested number of devices unavailable"):
        kubelet.admit_one("pod-17", GPU)
    beyond = f"{plugin.node.gpus[0].uuid}::4"
    error = rpc_error(kubelet.plugin_stub(GPU).Allocate, allocate_request([beyond]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"unknown device: {beyond} ({plugin.node.gpus[0].uuid} has 4 replicas" in (error.details() or "")


def test_never_a_replica_of_an_unhealthy_gpu(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin(config=TIME_SLICED)
    sick = plugin.node.gpus[1].uuid
    plugin.manager.set_health(sick, healthy=False, reason="Xid 79")
    assert kubelet.wait_for(resource=GPU, capacity=16, allocatable=12, timeout=WAIT_S)
    view = kubelet.resource(GPU)
    assert view is not None and view.unhealthy == {f"{sick}::{n}" for n in range(4)}
    held = [kubelet.admit_one(f"pod-{n}", GPU).device_ids[0] for n in range(12)]
    assert not any(device_id.startswith(sick) for device_id in held)
    with pytest.raises(AdmissionError):
        kubelet.admit_one("pod-13", GPU)
    error = rpc_error(kubelet.plugin_stub(GPU).Allocate, allocate_request([f"{sick}::2"]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"unhealthy device: {sick}::2" in (error.details() or "")


def test_recovered_gpu_comes_back(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin(config=TIME_SLICED)
    sick = plugin.node.gpus[3].uuid
    plugin.manager.set_health(sick, healthy=False)
    assert kubelet.wait_for(resource=GPU, allocatable=12, timeout=WAIT_S)
    plugin.manager.set_health(sick, healthy=True)
    assert kubelet.wait_for(resource=GPU, allocatable=16, timeout=WAIT_S)
    answer = kubelet.plugin_stub(GPU).Allocate(allocate_request([f"{sick}::0"]), timeout=TIMEOUT_S)
    assert answer.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == sick


def test_an_unhealthy_gpu_takes_its_mig_instances_along(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin("h100x4-mig", "flags: {migStrategy: mixed}")
    plugin.manager.set_health(plugin.node.gpus[2].uuid, healthy=False)
    assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", capacity=28, allocatable=21, timeout=WAIT_S)
