"""Sharing: from a node and settings to the advertised resources (whole, time-sliced, MPS, MIG)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.sharing.bases import GPU_RESOURCE as GPU_RESOURCE
    from gpuslice.sharing.bases import BaseResource as BaseResource
    from gpuslice.sharing.bases import base_resources as base_resources
    from gpuslice.sharing.bases import mig_resource_name as mig_resource_name
    from gpuslice.sharing.build import SHARED_SUFFIX as SHARED_SUFFIX
    from gpuslice.sharing.health import HealthChange as HealthChange
    from gpuslice.sharing.health import HealthStore as HealthStore
    from gpuslice.sharing.health import UnknownHealthTarget as UnknownHealthTarget
    from gpuslice.sharing.ids import REPLICA_SEPARATOR as REPLICA_SEPARATOR
    from gpuslice.sharing.ids import DeviceReference as DeviceReference
    from gpuslice.sharing.ids import InvalidDeviceReference as InvalidDeviceReference
    from gpuslice.sharing.ids import is_replica as is_replica
    from gpuslice.sharing.ids import parse_device_reference as parse_device_reference
    from gpuslice.sharing.ids import physical_id as physical_id
    from gpuslice.sharing.ids import replica_id as replica_id
    from gpuslice.sharing.ids import resolve_reference as resolve_reference
    from gpuslice.sharing.model import AdvertisedDevice as AdvertisedDevice
    from gpuslice.sharing.model import AllocationPolicy as AllocationPolicy
    from gpuslice.sharing.model import Isolation as Isolation
    from gpuslice.sharing.model import Resource as Resource
    from gpuslice.sharing.model import SharingError as SharingError
    from gpuslice.sharing.model import SharingPlan as SharingPlan
    from gpuslice.sharing.model import SharingStrategy as SharingStrategy
    from gpuslice.sharing.model import isolation_label_key as isolation_label_key
    from gpuslice.sharing.model import weakest as weakest
    from gpuslice.sharing.strategy import build_resources as build_resources
    from gpuslice.sharing.strategy import is_dynamic as is_dynamic

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "gpuslice.sharing.bases": ("GPU_RESOURCE", "BaseResource", "base_resources", "mig_resource_name"),
        "gpuslice.sharing.build": ("SHARED_SUFFIX",),
        "gpuslice.sharing.health": ("HealthChange", "HealthStore", "UnknownHealthTarget"),
        "gpuslice.sharing.ids": (
            "REPLICA_SEPARATOR",
            "DeviceReference",
            "InvalidDeviceReference",
            "is_replica",
            "parse_device_reference",
            "physical_id",
            "replica_id",
            "resolve_reference",
        ),
        "gpuslice.sharing.model": (
            "AdvertisedDevice",
            "AllocationPolicy",
            "Isolation",
            "Resource",
            "SharingError",
            "SharingPlan",
            "SharingStrategy",
            "isolation_label_key",
            "weakest",
        ),
        "gpuslice.sharing.strategy": ("build_resources", "is_dynamic"),
    },
)
