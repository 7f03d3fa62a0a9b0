"""Device IDs and references: the one map from a replica ID to its physical ID; the parser is gpu.refs."""

from __future__ import annotations

from gpuslice.gpu import Gpu, MigInstance, Node
from gpuslice.gpu.refs import (
    REPLICA_SEPARATOR,
    DeviceReference,
    InvalidDeviceReference,
    ReferenceKind,
    parse_device_reference,
)

__all__ = [
    "REPLICA_SEPARATOR",
    "DeviceReference",
    "InvalidDeviceReference",
    "ReferenceKind",
    "is_replica",
    "parse_device_reference",
    "physical_id",
    "replica_id",
    "resolve_reference",
]


def physical_id(device_id: str) -> str:
    """The physical device (GPU or MIG UUID) behind an advertised ID: the part before the first '::'."""
    return device_id.split(REPLICA_SEPARATOR, 1)[0]


def replica_id(physical: str, replica: int) -> str:
    """The advertised ID of replica `replica` of a physical device."""
    return f"{physical}{REPLICA_SEPARATOR}{replica}"


def is_replica(device_id: str) -> bool:
    """True for an annotated (replica) ID."""
    return REPLICA_SEPARATOR in device_id


def resolve_reference(node: Node, reference: DeviceReference) -> tuple[Gpu, MigInstance | None]:
    """The GPU (and MIG instance) a reference names on `node`; InvalidDeviceReference when none matches."""
    for gpu in node.gpus:
        if reference.kind == "gpu-uuid" and gpu.uuid == reference.uuid:
            return gpu, None
        if reference.kind == "gpu-index" and gpu.index == reference.gpu_index:
            return gpu, None
        for mig in gpu.mig_instances:
            if (
                (reference.kind == "mig-uuid" and mig.uuid == reference.uuid)
                or (
                    reference.kind == "mig-index"
                    and (gpu.index, mig.index) == (reference.gpu_index, reference.mig_index)
                )
                or (
                    reference.kind == "legacy-mig"
                    and (gpu.uuid, mig.gi, mig.ci) == (reference.uuid, reference.gi, reference.ci)
                )
            ):
                return gpu, mig
    raise InvalidDeviceReference(f"no device {reference.text!r} on node {node.name}")
