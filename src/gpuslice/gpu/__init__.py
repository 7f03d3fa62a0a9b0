"""The shared GPU model: GPUs, MIG profiles and placements, nodes (pure data, no I/O)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Loaded on first use, so that `gpuslice.gpu.units` (which the simulator needs) does not build the model's
# classes and MIG catalogues in processes that never touch them.
_HOMES = {
    **dict.fromkeys(
        (
            "CATALOGUES",
            "InvalidMigLayout",
            "MigCatalogue",
            "MigProfile",
            "assign_placements",
            "catalogue_for",
            "free_placements",
        ),
        "gpuslice.gpu.mig",
    ),
    **dict.fromkeys(
        (
            "PCI_CLASS_3D_CONTROLLER",
            "PCI_CLASS_VGA_CONTROLLER",
            "ComputeCapability",
            "FabricInfo",
            "Gpu",
            "MigInstance",
            "Node",
        ),
        "gpuslice.gpu.model",
    ),
}

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
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
