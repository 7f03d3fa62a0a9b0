"""Allocation: the Allocator protocol (static and dynamic MIG), Allocate and GetPreferredAllocation as pure
functions with typed errors, NVIDIA's answer pipeline and CDI specs. Front ends import from here only
(CDI specs excepted: allocation.cdi)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.allocation.allocate import VISIBLE_DEVICES_ENV as VISIBLE_DEVICES_ENV
    from gpuslice.allocation.allocate import allocate_container as allocate_container
    from gpuslice.allocation.allocate import device_nodes_step as device_nodes_step
    from gpuslice.allocation.allocate import pipeline_steps as pipeline_steps
    from gpuslice.allocation.allocate import validate_request as validate_request
    from gpuslice.allocation.allocate import visible_devices_step as visible_devices_step
    from gpuslice.allocation.allocator import Allocator as Allocator
    from gpuslice.allocation.allocator import StaticAllocator as StaticAllocator
    from gpuslice.allocation.answer import AllocationAnswer as AllocationAnswer
    from gpuslice.allocation.answer import ContainerAllocation as ContainerAllocation
    from gpuslice.allocation.answer import ContainerEdits as ContainerEdits
    from gpuslice.allocation.answer import DeviceNode as DeviceNode
    from gpuslice.allocation.answer import Mount as Mount
    from gpuslice.allocation.answer import combine as combine
    from gpuslice.allocation.dynamic import DynamicAllocator as DynamicAllocator
    from gpuslice.allocation.errors import MAX_DEVICE_ID_LENGTH as MAX_DEVICE_ID_LENGTH
    from gpuslice.allocation.errors import AllocationError as AllocationError
    from gpuslice.allocation.errors import AllocationFailed as AllocationFailed
    from gpuslice.allocation.errors import EmptyRequest as EmptyRequest
    from gpuslice.allocation.errors import IdTooLong as IdTooLong
    from gpuslice.allocation.errors import ImexChannelMissing as ImexChannelMissing
    from gpuslice.allocation.errors import NotEnoughDevices as NotEnoughDevices
    from gpuslice.allocation.errors import PlacementUnavailable as PlacementUnavailable
    from gpuslice.allocation.errors import RequestTooLarge as RequestTooLarge
    from gpuslice.allocation.errors import TooManyReplicas as TooManyReplicas
    from gpuslice.allocation.errors import UnhealthyDevice as UnhealthyDevice
    from gpuslice.allocation.errors import UnknownDevice as UnknownDevice
    from gpuslice.allocation.mps_edits import MpsConfigError as MpsConfigError
    from gpuslice.allocation.mps_edits import daemon_settings as daemon_settings
    from gpuslice.allocation.options import DEFAULT_OPTIONS as DEFAULT_OPTIONS
    from gpuslice.allocation.options import AllocateOptions as AllocateOptions
    from gpuslice.allocation.options import AllocationContext as AllocationContext
    from gpuslice.allocation.options import EditStep as EditStep
    from gpuslice.allocation.preferred import WholeGpuRule as WholeGpuRule
    from gpuslice.allocation.preferred import in_advertised_order as in_advertised_order
    from gpuslice.allocation.preferred import preferred_allocation as preferred_allocation
    from gpuslice.allocation.preferred import preferred_shared as preferred_shared
    from gpuslice.allocation.preferred import uses_whole_gpu_rule as uses_whole_gpu_rule
    from gpuslice.allocation.preferred import whole_gpu_rule_for as whole_gpu_rule_for
    from gpuslice.allocation.strategies import nvidia_answer as nvidia_answer
    from gpuslice.allocation.strategies import select_imex_channels as select_imex_channels

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "gpuslice.allocation.allocate": (
            "VISIBLE_DEVICES_ENV",
            "allocate_container",
            "device_nodes_step",
            "pipeline_steps",
            "validate_request",
            "visible_devices_step",
        ),
        "gpuslice.allocation.allocator": ("Allocator", "StaticAllocator"),
        "gpuslice.allocation.answer": (
            "AllocationAnswer",
            "ContainerAllocation",
            "ContainerEdits",
            "DeviceNode",
            "Mount",
            "combine",
        ),
        "gpuslice.allocation.dynamic": ("DynamicAllocator",),
        "gpuslice.allocation.errors": (
            "MAX_DEVICE_ID_LENGTH",
            "AllocationError",
            "AllocationFailed",
            "EmptyRequest",
            "IdTooLong",
            "ImexChannelMissing",
            "NotEnoughDevices",
            "PlacementUnavailable",
            "RequestTooLarge",
            "TooManyReplicas",
            "UnhealthyDevice",
            "UnknownDevice",
        ),
        "gpuslice.allocation.mps_edits": ("MpsConfigError", "daemon_settings"),
        "gpuslice.allocation.options": ("DEFAULT_OPTIONS", "AllocateOptions", "AllocationContext", "EditStep"),
        "gpuslice.allocation.preferred": (
            "WholeGpuRule",
            "in_advertised_order",
            "preferred_allocation",
            "preferred_shared",
            "uses_whole_gpu_rule",
            "whole_gpu_rule_for",
        ),
        "gpuslice.allocation.strategies": ("nvidia_answer", "select_imex_channels"),
    },
)
