"""Bad requests get INVALID_ARGUMENT naming the device, and the server keeps serving."""

from __future__ import annotations

import grpc
import pytest

from gpuslice.kubelet import MockKubelet
from gpuslice.wire import deviceplugin_pb2
from tests.plugin.conftest import StartPlugin
from tests.plugin.rpc import TIMEOUT_S, allocate_request, preferred_request, rpc_error

TIME_SLICED = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}"
LONG = "GPU-" + "f" * 20_000

# (container requests with {g0} for GPU 0's UUID, text the error details must contain)
BAD_ALLOCATES = [
    ([], "empty request: no container requests"),
    ([["{g0}::0"], ["{g0}::2", "GPU-unknown"]], "unknown device: GPU-unknown"),
    ([["{g0}"]], "unknown device: {g0}"),
    ([["{g0}::9"]], "unknown device: {g0}::9 ({g0} has 4 replicas"),
    ([[LONG]], "device ID longer than 128 characters: GPU-ffff"),
]


@pytest.mark.parametrize(("containers", "text"), BAD_ALLOCATES)
def test_bad_allocate_is_invalid_argument_and_the_server_survives(
    kubelet: MockKubelet, start_plugin: StartPlugin, containers: list[list[str]], text: str
) -> None:
    plugin = start_plugin(config=TIME_SLICED)
    g0 = plugin.node.gpus[0].uuid
    stub = kubelet.plugin_stub("nvidia.com/gpu")
    error = rpc_error(stub.Allocate, allocate_request(*[[i.format(g0=g0) for i in ids] for ids in containers]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = error.details() or ""
    assert details.startswith('invalid allocation request for "nvidia.com/gpu": invalid request: ')
    assert text.format(g0=g0) in details
    assert len(details) < 500
    good = stub.Allocate(allocate_request([f"{g0}::1"]), timeout=TIMEOUT_S)
    assert good.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == g0
    assert kubelet.admit_one("after", "nvidia.com/gpu").device_ids


def test_repeated_ids_and_an_empty_list_are_answered(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin(config=TIME_SLICED)
    g0 = plugin.node.gpus[0].uuid
    stub = kubelet.plugin_stub("nvidia.com/gpu")
    answer = stub.Allocate(allocate_request([f"{g0}::1", f"{g0}::1"], []), timeout=TIMEOUT_S)
    repeated, empty = answer.container_responses
    assert repeated.envs["NVIDIA_VISIBLE_DEVICES"] == g0
    assert [d.container_path for d in repeated.devices].count("/dev/nvidia0") == 1
    assert empty.envs["NVIDIA_VISIBLE_DEVICES"] == ""


def test_request_size_rule_when_fail_requests_greater_than_one(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin(
        config="sharing: {timeSlicing: {failRequestsGreaterThanOne: true, resources: [{name: gpu, replicas: 4}]}}"
    )
    g0, g1 = plugin.node.gpus[0].uuid, plugin.node.gpus[1].uuid
    error = rpc_error(kubelet.plugin_stub("nvidia.com/gpu").Allocate, allocate_request([f"{g0}::0", f"{g1}::0"]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "maximum request size for shared resources is 1; found 2" in (error.details() or "")
    assert kubelet.admit_one("one", "nvidia.com/gpu").device_ids


def test_preferred_allocation_for_more_than_available(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin(config=TIME_SLICED)
    g0 = plugin.node.gpus[0].uuid
    stub = kubelet.plugin_stub("nvidia.com/gpu")
    error = rpc_error(stub.GetPreferredAllocation, preferred_request([f"{g0}::0"], [], 2))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not enough available devices to satisfy allocation" in (error.details() or "")
    answer = stub.GetPreferredAllocation(preferred_request([f"{g0}::0", f"{g0}::1"], [], 1), timeout=TIMEOUT_S)
    assert list(answer.container_responses[0].deviceIDs) == [f"{g0}::0"]


def test_whole_gpu_preferred_allocation_never_errors(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin()
    uuids = [g.uuid for g in plugin.node.gpus]
    stub = kubelet.plugin_stub("nvidia.com/gpu")
    answer = stub.GetPreferredAllocation(preferred_request(uuids[:1], [], 3), timeout=TIMEOUT_S)
    assert list(answer.container_responses[0].deviceIDs) == []


def test_options_and_pre_start(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin()
    stub = kubelet.plugin_stub("nvidia.com/gpu")
    options = stub.GetDevicePluginOptions(deviceplugin_pb2.Empty(), timeout=TIMEOUT_S)
    assert options.get_preferred_allocation_available and not options.pre_start_required
    request = deviceplugin_pb2.PreStartContainerRequest(devices_ids=[plugin.node.gpus[0].uuid])
    assert stub.PreStartContainer(request, timeout=TIMEOUT_S) == deviceplugin_pb2.PreStartContainerResponse()
