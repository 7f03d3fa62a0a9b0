"""Domain answers to v1beta1 messages (and back): the only place that knows both shapes."""

from __future__ import annotations

from collections.abc import Collection

from gpuslice.allocation import AllocationAnswer, ContainerAllocation
from gpuslice.sharing import Resource
from gpuslice.wire import HEALTHY, UNHEALTHY, deviceplugin_pb2


def device_list(resource: Resource, unhealthy: Collection[str]) -> deviceplugin_pb2.ListAndWatchResponse:
    """The complete device list of a resource, with health and NUMA affinity."""
    devices = []
    for device in resource.devices:
        topology = None
        if device.numa_node is not None:
            topology = deviceplugin_pb2.TopologyInfo(nodes=[deviceplugin_pb2.NUMANode(ID=device.numa_node)])
        devices.append(
            deviceplugin_pb2.Device(
                ID=device.id, health=UNHEALTHY if device.id in unhealthy else HEALTHY, topology=topology
            )
        )
    return deviceplugin_pb2.ListAndWatchResponse(devices=devices)


def fill_container_response(allocation: ContainerAllocation, out: deviceplugin_pb2.ContainerAllocateResponse) -> None:
    """Write one container's answer into `out` (filling in place is about twice as fast as building)."""
    edits = allocation.edits
    out.envs.update(edits.envs)
    for mount in edits.mounts:
        out.mounts.add(container_path=mount.container_path, host_path=mount.host_path, read_only=mount.read_only)
    for node in edits.device_nodes:
        out.devices.add(container_path=node.container_path, host_path=node.host_path, permissions=node.permissions)
    out.annotations.update(edits.annotations)
    for name in edits.cdi_devices:
        out.cdi_devices.add(name=name)


def allocate_response(answer: AllocationAnswer) -> deviceplugin_pb2.AllocateResponse:
    response = deviceplugin_pb2.AllocateResponse()
    for allocation in answer.containers:
        fill_container_response(allocation, response.container_responses.add())
    return response


def requested_ids(request: deviceplugin_pb2.AllocateRequest) -> list[list[str]]:
    return [list(container.devices_ids) for container in request.container_requests]
