"""pod-resources v1 over its own socket: List, Get and GetAllocatableResources from the admission record."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from gpuslice.kubelet import MockKubelet, default_pod_resources_socket
from gpuslice.wire import podresources_grpc, podresources_pb2
from tests.kubelet.conftest import MakePlugin, register

RESOURCE = "example.com/fake"


@pytest.fixture
def lister(kubelet: MockKubelet) -> Iterator[Any]:
    with grpc.insecure_channel(f"unix:{kubelet.pod_resources_socket}") as channel:
        yield podresources_grpc.PodResourcesListerStub(channel)  # type: ignore[no-untyped-call]


def devices_of(pod: podresources_pb2.PodResources) -> dict[str, list[tuple[str, list[str], list[int]]]]:
    return {
        container.name: [
            (entry.resource_name, list(entry.device_ids), [node.ID for node in entry.topology.nodes])
            for entry in container.devices
        ]
        for container in pod.containers
    }


def test_socket_sits_beside_the_device_plugin_dir(kubelet: MockKubelet) -> None:
    assert kubelet.pod_resources_socket == kubelet.device_plugin_dir.parent / "pod-resources" / "kubelet.sock"
    assert kubelet.pod_resources_socket.is_socket()


def test_default_socket_for_a_dir_not_named_device_plugins_is_inside_it() -> None:
    assert str(default_pod_resources_socket("/x/y")) == "/x/y/pod-resources/kubelet.sock"
    assert str(default_pod_resources_socket("/x/device-plugins")) == "/x/pod-resources/kubelet.sock"


def test_list_returns_what_was_admitted(kubelet: MockKubelet, make_plugin: MakePlugin, lister: Any) -> None:
    register(kubelet, make_plugin(numa={"d0": 0, "d1": 0, "d2": 1}))
    kubelet.admit("train", {RESOURCE: 3}, namespace="ml", container="worker")
    kubelet.admit("train", {RESOURCE: 1}, namespace="ml", container="sidecar")
    answer = lister.List(podresources_pb2.ListPodResourcesRequest(), timeout=5)
    [pod] = answer.pod_resources
    assert (pod.name, pod.namespace) == ("train", "ml")
    assert devices_of(pod) == {
        "sidecar": [(RESOURCE, ["d0"], [0])],
        # One entry per NUMA node, devices without topology first.
        "worker": [(RESOURCE, ["d3"], []), (RESOURCE, ["d1"], [0]), (RESOURCE, ["d2"], [1])],
    }
    kubelet.delete_pod("train", namespace="ml")
    assert list(lister.List(podresources_pb2.ListPodResourcesRequest(), timeout=5).pod_resources) == []


def test_get_finds_one_pod_or_says_not_found(kubelet: MockKubelet, make_plugin: MakePlugin, lister: Any) -> None:
    register(kubelet, make_plugin())
    kubelet.admit_one("a", RESOURCE, 1)
    answer = lister.Get(podresources_pb2.GetPodResourcesRequest(pod_name="a", pod_namespace="default"), timeout=5)
    assert devices_of(answer.pod_resources) == {"main": [(RESOURCE, ["d3"], [])]}
    with pytest.raises(grpc.RpcError) as caught:
        lister.Get(podresources_pb2.GetPodResourcesRequest(pod_name="b", pod_namespace="default"), timeout=5)
    assert caught.value.details() == "pod b in namespace default not found"


def test_allocatable_lists_every_known_device(kubelet: MockKubelet, make_plugin: MakePlugin, lister: Any) -> None:
    plugin = make_plugin(devices=["d0", "d1"], numa={"d1": 1})
    register(kubelet, plugin)
    plugin.set_health("d0", "Unhealthy")
    assert kubelet.wait_for(resource=RESOURCE, allocatable=1)
    answer = lister.GetAllocatableResources(podresources_pb2.AllocatableResourcesRequest(), timeout=5)
    assert [(d.resource_name, list(d.device_ids), [n.ID for n in d.topology.nodes]) for d in answer.devices] == [
        (RESOURCE, ["d0"], []),
        (RESOURCE, ["d1"], [1]),
    ]
