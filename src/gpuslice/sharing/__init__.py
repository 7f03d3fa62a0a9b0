"""Sharing: from a node and settings to the advertised resources (whole, time-sliced, MPS, MIG)."""

from gpuslice.sharing.bases import (
    GPU_RESOURCE,
    BaseResource,
    base_resources,
    mig_resource_name,
)
from gpuslice.sharing.build import (
    SHARED_SUFFIX,
)
from gpuslice.sharing.health import (
    HealthChange,
    HealthStore,
    UnknownHealthTarget,
)
from gpuslice.sharing.ids import (
    REPLICA_SEPARATOR,
    DeviceReference,
    InvalidDeviceReference,
    is_replica,
    parse_device_reference,
    physical_id,
    replica_id,
    resolve_reference,
)
from gpuslice.sharing.model import (
    AdvertisedDevice,
    AllocationPolicy,
    Isolation,
    Resource,
    SharingError,
    SharingPlan,
    SharingStrategy,
    isolation_label_key,
    weakest,
)
from gpuslice.sharing.strategy import (
    build_resources,
    is_dynamic,
)

__all__ = [
    "GPU_RESOURCE",
    "REPLICA_SEPARATOR",
    "SHARED_SUFFIX",
    "AdvertisedDevice",
    "AllocationPolicy",
    "BaseResource",
    "DeviceReference",
    "HealthChange",
    "HealthStore",
    "InvalidDeviceReference",
    "Isolation",
    "Resource",
    "SharingError",
    "SharingPlan",
    "SharingStrategy",
    "UnknownHealthTarget",
    "base_resources",
    "build_resources",
    "is_dynamic",
    "is_replica",
    "isolation_label_key",
    "mig_resource_name",
    "parse_device_reference",
    "physical_id",
    "replica_id",
    "resolve_reference",
    "weakest",
]
