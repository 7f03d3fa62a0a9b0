"""Allocate as a pure function: validate the requested IDs, then run the container-edit pipeline."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import lru_cache

from gpuslice.allocation.answer import AllocationAnswer, ContainerAllocation, ContainerEdits, DeviceNode, combine
from gpuslice.allocation.cdi import CONTROL_NODES, MODESET_NODE
from gpuslice.allocation.errors import (
    MAX_DEVICE_ID_LENGTH,
    EmptyRequest,
    IdTooLong,
    RequestTooLarge,
    TooManyReplicas,
    UnhealthyDevice,
    UnknownDevice,
)
from gpuslice.allocation.options import DEFAULT_OPTIONS, AllocateOptions, AllocationContext, EditStep
from gpuslice.sharing import AdvertisedDevice, Resource, is_replica, physical_id, weakest

VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
# gpuslice's plain answer gives the control nodes CUDA needs; NVIDIA's pipeline gives the options'
# control_nodes (those present, modeset included).
_CUDA_CONTROL_NODES = tuple(path for path in CONTROL_NODES if path != MODESET_NODE)


def validate_request(
    resource: Resource, device_ids: Sequence[str], unhealthy: Collection[str] = frozenset()
) -> tuple[AdvertisedDevice, ...]:
    """The advertised devices behind `device_ids`, or the first AllocationError found.

    As NVIDIA's plugin does, a repeated ID counts once (first-seen order) and an empty list is answered
    (with the edits every container gets, e.g. IMEX channels). Checks: each ID not too long, known (a
    replica number beyond the device's replicas is TooManyReplicas), healthy; then the shared-request
    size rule, on the de-duplicated IDs.
    """
    devices = []
    for device_id in dict.fromkeys(device_ids):
        if len(device_id) > MAX_DEVICE_ID_LENGTH:
            raise IdTooLong(resource.name, device_id)
        device = resource.by_id.get(device_id)
        if device is None:
            raise _unknown(resource, device_id)
        if device_id in unhealthy:
            raise UnhealthyDevice(resource.name, device_id)
        devices.append(device)
    # NVIDIA's rule: only a request that includes a shared (annotated) ID is limited to one device.
    shared = any(device.replica is not None for device in devices)
    if resource.fail_requests_greater_than_one and shared and len(devices) > 1:
        raise RequestTooLarge(resource.name, [d.id for d in devices])
    return tuple(devices)


def _unknown(resource: Resource, device_id: str) -> UnknownDevice:
    physical = physical_id(device_id)
    replicas = resource.replicas_of.get(physical)
    if replicas is not None and is_replica(device_id) and replicas[0].replica is not None:
        return TooManyReplicas(resource.name, device_id, physical, len(replicas))
    return UnknownDevice(resource.name, device_id)


def allocate_container(
    resource: Resource,
    device_ids: Sequence[str],
    unhealthy: Collection[str] = frozenset(),
    options: AllocateOptions | None = None,
) -> ContainerAllocation:
    """Validate one container request and build its answer."""
    return container_answer(resource, validate_request(resource, device_ids, unhealthy), options)


def container_answer(
    resource: Resource, devices: tuple[AdvertisedDevice, ...], options: AllocateOptions | None = None
) -> ContainerAllocation:
    """The answer for one container's devices, already validated by `validate_request` (not checked again)."""
    first: dict[str, AdvertisedDevice] = {}
    for device in devices:
        first.setdefault(device.physical_id, device)
    options = options or DEFAULT_OPTIONS
    context = AllocationContext(resource, devices, tuple(first.values()), options)
    edits = combine([step(context) for step in pipeline_steps(options)])
    return ContainerAllocation(
        resource=resource.name,
        device_ids=tuple(device.id for device in devices),
        physical_ids=tuple(first),
        edits=edits,
        isolation=weakest(device.isolation for device in devices),
    )


def pipeline_steps(options: AllocateOptions) -> tuple[EditStep, ...]:
    """The steps `options` runs: its own pipeline, or gpuslice's default one, then its extra steps."""
    if options.pipeline is not None:
        return (*options.pipeline, *options.extra_steps)
    return (visible_devices_step, *((device_nodes_step,) if options.pass_device_specs else ()), *options.extra_steps)


def allocate(
    resource: Resource,
    requests: Sequence[Sequence[str]],
    unhealthy: Collection[str] = frozenset(),
    options: AllocateOptions | None = None,
) -> AllocationAnswer:
    """Answer an Allocate call (one entry per container); raises the first AllocationError."""
    if not requests:
        raise EmptyRequest(resource.name)
    return AllocationAnswer(tuple(allocate_container(resource, ids, unhealthy, options) for ids in requests))


def visible_devices_step(context: AllocationContext) -> ContainerEdits:
    """NVIDIA_VISIBLE_DEVICES: the de-duplicated physical devices (UUIDs, or indices), first-seen order."""
    if context.options.device_id_strategy == "index":
        ids = [device.index for device in context.physical]
    else:
        ids = [device.physical_id for device in context.physical]
    return ContainerEdits(envs={VISIBLE_DEVICES_ENV: ",".join(ids)})


def device_nodes_step(context: AllocationContext) -> ContainerEdits:
    """The control nodes, then each device's nodes: /dev/nvidia<N>, plus the two MIG capability nodes."""
    root = context.options.dev_root
    nodes = {node.container_path: node for node in _nodes(_CUDA_CONTROL_NODES, root)}
    for device in context.physical:
        mig = device.mig
        paths: tuple[str, ...] = (device.gpu.device_path,)
        if mig is not None:
            paths += mig.capability_paths
        for node in _nodes(paths, root):
            nodes.setdefault(node.container_path, node)
    return ContainerEdits(device_nodes=tuple(nodes.values()))


@lru_cache(maxsize=4096)
def _nodes(container_paths: tuple[str, ...], dev_root: str) -> tuple[DeviceNode, ...]:
    # Allocate sits on the kubelet's admission path: build each node's spec once, not per call.
    root = dev_root.rstrip("/")
    return tuple(DeviceNode(path, root + path) for path in container_paths)
