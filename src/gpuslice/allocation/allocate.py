"""Allocate as a pure function: validate the requested IDs, then run the container-edit pipeline."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Literal

from gpuslice.allocation.answer import AllocationAnswer, ContainerAllocation, ContainerEdits, DeviceNode, combine
from gpuslice.allocation.errors import (
    MAX_DEVICE_ID_LENGTH,
    EmptyRequest,
    IdTooLong,
    RequestTooLarge,
    TooManyReplicas,
    UnhealthyDevice,
    UnknownDevice,
)
from gpuslice.config import Config
from gpuslice.sharing import AdvertisedDevice, Resource, is_replica, physical_id, weakest

VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
CONTROL_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")


@dataclass(frozen=True)
class AllocationContext:
    """What every pipeline step sees: the resource, the validated devices and the options."""

    resource: Resource
    devices: tuple[AdvertisedDevice, ...]  # as requested, validated
    physical: tuple[AdvertisedDevice, ...]  # one per physical device, first-seen order
    options: AllocateOptions


EditStep = Callable[[AllocationContext], ContainerEdits]


@dataclass(frozen=True)
class AllocateOptions:
    """How answers are built: a pipeline of steps, each adding ContainerEdits, merged in order.

    The default pipeline is NVIDIA_VISIBLE_DEVICES plus device nodes. `pipeline` replaces it entirely
    (e.g. NVIDIA's full device-list-strategy answer with CDI, volume-mounts and MPS); `extra_steps`
    run after whichever pipeline is in force.
    """

    device_id_strategy: Literal["uuid", "index"] = "uuid"
    pass_device_specs: bool = True  # the default pipeline always injects device nodes (issue 2's contract)
    dev_root: str = "/"  # host paths are dev_root + container path (NVIDIA's nvidiaDevRoot)
    extra_steps: tuple[EditStep, ...] = ()
    pipeline: tuple[EditStep, ...] | None = None

    @classmethod
    def from_config(cls, config: Config, **overrides: Any) -> AllocateOptions:
        """The ID strategy and dev root of `config`; keyword overrides for any other field."""
        flags = config.flags
        settings: dict[str, Any] = {"device_id_strategy": flags.plugin.device_id_strategy, "dev_root": flags.dev_root}
        return cls(**(settings | overrides))

    @cached_property
    def steps(self) -> tuple[EditStep, ...]:
        if self.pipeline is not None:
            return (*self.pipeline, *self.extra_steps)
        return (visible_devices_step, *((device_nodes_step,) if self.pass_device_specs else ()), *self.extra_steps)


DEFAULT_OPTIONS = AllocateOptions()


def validate_request(
    resource: Resource, device_ids: Sequence[str], unhealthy: Collection[str] = frozenset(), container: int = 0
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
    container: int = 0,
) -> ContainerAllocation:
    """Validate one container request and build its answer."""
    devices = validate_request(resource, device_ids, unhealthy, container)
    first: dict[str, AdvertisedDevice] = {}
    for device in devices:
        first.setdefault(device.physical_id, device)
    options = options or DEFAULT_OPTIONS
    context = AllocationContext(resource, devices, tuple(first.values()), options)
    edits = combine([step(context) for step in options.steps])
    return ContainerAllocation(
        resource=resource.name,
        device_ids=tuple(device.id for device in devices),
        physical_ids=tuple(first),
        edits=edits,
        isolation=weakest(device.isolation for device in devices),
    )


def allocate(
    resource: Resource,
    requests: Sequence[Sequence[str]],
    unhealthy: Collection[str] = frozenset(),
    options: AllocateOptions | None = None,
) -> AllocationAnswer:
    """Answer an Allocate call (one entry per container); raises the first AllocationError."""
    if not requests:
        raise EmptyRequest(resource.name)
    return AllocationAnswer(
        tuple(
            allocate_container(resource, ids, unhealthy, options, container) for container, ids in enumerate(requests)
        )
    )


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
    nodes = {node.container_path: node for node in _nodes(CONTROL_DEVICE_NODES, root)}
    for device in context.physical:
        mig = device.mig
        paths: tuple[str, ...] = (device.gpu.device_path,)
        if mig is not None:
            paths += (
                f"/dev/nvidia-caps/nvidia-cap{mig.gi_cap_minor}",
                f"/dev/nvidia-caps/nvidia-cap{mig.ci_cap_minor}",
            )
        for node in _nodes(paths, root):
            nodes.setdefault(node.container_path, node)
    return ContainerEdits(device_nodes=tuple(nodes.values()))


@lru_cache(maxsize=4096)
def _nodes(container_paths: tuple[str, ...], dev_root: str) -> tuple[DeviceNode, ...]:
    # Allocate sits on the kubelet's admission path: build each node's spec once, not per call.
    root = dev_root.rstrip("/")
    return tuple(DeviceNode(path, root + path) for path in container_paths)
