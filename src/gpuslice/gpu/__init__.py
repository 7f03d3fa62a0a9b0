"""The shared GPU model: GPUs, MIG profiles and placements, nodes (pure data, no I/O)."""

from gpuslice.gpu.mig import (
    CATALOGUES,
    InvalidMigLayout,
    MigCatalogue,
    MigProfile,
    assign_placements,
    catalogue_for,
    free_placements,
)
from gpuslice.gpu.model import (
    PCI_CLASS_3D_CONTROLLER,
    PCI_CLASS_VGA_CONTROLLER,
    ComputeCapability,
    FabricInfo,
    Gpu,
    MigInstance,
    Node,
)
from gpuslice.gpu.uuids import name_uuid

__all__ = [
    "CATALOGUES",
    "PCI_CLASS_3D_CONTROLLER",
    "PCI_CLASS_VGA_CONTROLLER",
    "ComputeCapability",
    "FabricInfo",
    "Gpu",
    "InvalidMigLayout",
    "MigCatalogue",
    "MigInstance",
    "MigProfile",
    "Node",
    "assign_placements",
    "catalogue_for",
    "free_placements",
    "name_uuid",
]
