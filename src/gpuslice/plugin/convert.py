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


def container_response(allocation: ContainerAllocation) -> deviceplugin_pb2.ContainerAllocateResponse:
    edits = allocation.edits
    return deviceplugin_pb2.ContainerAllocateResponse(
        envs=dict(edits.envs),
        mounts=[
            deviceplugin_pb2.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in edits.mounts
        ],
        devices=[
            deviceplugin_pb2.DeviceSpec(
                container_path=d.container_path, host_path=d.host_path, permissions=d.permissions
            )
            for d in edits.device_nodes
        ],
        annotations=dict(edits.annotations),
        cdi_devices=[deviceplugin_pb2.CDIDevice(name=name) for name in edits.cdi_devices],
    )


def allocate_response(answer: AllocationAnswer) -> deviceplugin_pb2.AllocateResponse:
    return deviceplugin_pb2.AllocateResponse(container_responses=[container_response(c) for c in answer.containers])


def requested_ids(request: deviceplugin_pb2.AllocateRequest) -> list[list[str]]:
    return [list(container.devices_ids) for container in request.container_requests]
