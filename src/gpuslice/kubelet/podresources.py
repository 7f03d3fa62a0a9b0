"""The pod-resources v1 `PodResourcesLister` service, answered from the mock kubelet's admission record."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc

from gpuslice.kubelet.state import KubeletState
from gpuslice.kubelet.views import Admission, GrantedDevices
from gpuslice.wire import podresources_grpc, podresources_pb2

NO_NUMA = -1  # the kubelet's key for devices without topology


def _topology(numa: int) -> podresources_pb2.TopologyInfo | None:
    return None if numa == NO_NUMA else podresources_pb2.TopologyInfo(nodes=[podresources_pb2.NUMANode(ID=numa)])


def container_devices(allocation: GrantedDevices) -> list[podresources_pb2.ContainerDevices]:
    """One entry per NUMA node, as the kubelet groups them; a device on two nodes shows under both."""
    by_numa: dict[int, list[str]] = {}
    for device in allocation.device_ids:
        for numa in allocation.numa_nodes.get(device) or (NO_NUMA,):
            by_numa.setdefault(numa, []).append(device)
    return [
        podresources_pb2.ContainerDevices(resource_name=allocation.resource, device_ids=ids, topology=_topology(numa))
        for numa, ids in sorted(by_numa.items())
    ]


def pod_resources(pod: str, namespace: str, admissions: Iterable[Admission]) -> podresources_pb2.PodResources:
    containers = [
        podresources_pb2.ContainerResources(
            name=admission.container,
            devices=[entry for allocation in admission.allocations.values() for entry in container_devices(allocation)],
        )
        for admission in admissions
    ]
    return podresources_pb2.PodResources(name=pod, namespace=namespace, containers=containers)


class PodResourcesServicer(podresources_grpc.PodResourcesListerServicer):  # type: ignore[misc]
    """List, GetAllocatableResources and Get over the admission record (no CPUs, memory or DRA)."""

    def __init__(self, state: KubeletState) -> None:
        self._state = state

    def _by_pod(self) -> dict[tuple[str, str], list[Admission]]:
        grouped: dict[tuple[str, str], list[Admission]] = {}
        for admission in self._state.admissions():
            grouped.setdefault((admission.namespace, admission.pod), []).append(admission)
        return grouped

    def List(self, request: podresources_pb2.ListPodResourcesRequest, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        pods = [pod_resources(pod, namespace, group) for (namespace, pod), group in self._by_pod().items()]
        return podresources_pb2.ListPodResourcesResponse(pod_resources=pods)

    def GetAllocatableResources(self, request: podresources_pb2.AllocatableResourcesRequest, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        # Every known device, healthy or not, one entry per device and NUMA node (as the kubelet does).
        devices = []
        for name, view in self._state.views().items():
            for device in sorted(view.devices):
                for numa in view.numa_nodes.get(device) or (NO_NUMA,):
                    devices.append(
                        podresources_pb2.ContainerDevices(
                            resource_name=name, device_ids=[device], topology=_topology(numa)
                        )
                    )
        return podresources_pb2.AllocatableResourcesResponse(devices=devices)

    def Get(self, request: podresources_pb2.GetPodResourcesRequest, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        group = self._by_pod().get((request.pod_namespace, request.pod_name))
        if group is None:
            context.abort(
                grpc.StatusCode.UNKNOWN, f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
            )
        return podresources_pb2.GetPodResourcesResponse(
            pod_resources=pod_resources(request.pod_name, request.pod_namespace, group or [])
        )
