"""Allocation: the Allocator protocol (static and dynamic MIG), Allocate and GetPreferredAllocation as pure
functions with typed errors, NVIDIA's answer pipeline and CDI specs. Front ends import from here only
(CDI specs excepted: allocation.cdi)."""

from gpuslice.allocation.allocate import (
    VISIBLE_DEVICES_ENV,
    allocate_container,
    device_nodes_step,
    pipeline_steps,
    validate_request,
    visible_devices_step,
)
from gpuslice.allocation.allocator import (
    Allocator,
    StaticAllocator,
)
from gpuslice.allocation.answer import (
    AllocationAnswer,
    ContainerAllocation,
    ContainerEdits,
    DeviceNode,
    Mount,
    combine,
)
from gpuslice.allocation.dynamic import (
    DynamicAllocator,
)
from gpuslice.allocation.errors import (
    MAX_DEVICE_ID_LENGTH,
    AllocationError,
    AllocationFailed,
    EmptyRequest,
    IdTooLong,
    ImexChannelMissing,
    NotEnoughDevices,
    PlacementUnavailable,
    RequestTooLarge,
    TooManyReplicas,
    UnhealthyDevice,
    UnknownDevice,
)
from gpuslice.allocation.mps_edits import (
    MpsConfigError,
    daemon_settings,
)
from gpuslice.allocation.options import (
    DEFAULT_OPTIONS,
    AllocateOptions,
    AllocationContext,
    EditStep,
)
from gpuslice.allocation.preferred import (
    WholeGpuRule,
    in_advertised_order,
    preferred_allocation,
    preferred_shared,
    uses_whole_gpu_rule,
    whole_gpu_rule_for,
)
from gpuslice.allocation.strategies import (
    nvidia_answer,
    select_imex_channels,
)

__all__ = [
    "DEFAULT_OPTIONS",
    "MAX_DEVICE_ID_LENGTH",
    "VISIBLE_DEVICES_ENV",
    "AllocateOptions",
    "AllocationAnswer",
    "AllocationContext",
    "AllocationError",
    "AllocationFailed",
    "Allocator",
    "ContainerAllocation",
    "ContainerEdits",
    "DeviceNode",
    "DynamicAllocator",
    "EditStep",
    "EmptyRequest",
    "IdTooLong",
    "ImexChannelMissing",
    "Mount",
    "MpsConfigError",
    "NotEnoughDevices",
    "PlacementUnavailable",
    "RequestTooLarge",
    "StaticAllocator",
    "TooManyReplicas",
    "UnhealthyDevice",
    "UnknownDevice",
    "WholeGpuRule",
    "allocate_container",
    "combine",
    "daemon_settings",
    "device_nodes_step",
    "in_advertised_order",
    "nvidia_answer",
    "pipeline_steps",
    "preferred_allocation",
    "preferred_shared",
    "select_imex_channels",
    "uses_whole_gpu_rule",
    "validate_request",
    "visible_devices_step",
    "whole_gpu_rule_for",
]
