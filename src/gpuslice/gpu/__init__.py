"""The shared GPU model: GPUs, MIG profiles and placements, nodes (pure data, no I/O)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.gpu.mig import CATALOGUES as CATALOGUES
    from gpuslice.gpu.mig import InvalidMigLayout as InvalidMigLayout
    from gpuslice.gpu.mig import MigCatalogue as MigCatalogue
    from gpuslice.gpu.mig import MigProfile as MigProfile
    from gpuslice.gpu.mig import assign_placements as assign_placements
    from gpuslice.gpu.mig import catalogue_for as catalogue_for
    from gpuslice.gpu.mig import free_placements as free_placements
    from gpuslice.gpu.model import PCI_CLASS_3D_CONTROLLER as PCI_CLASS_3D_CONTROLLER
    from gpuslice.gpu.model import PCI_CLASS_VGA_CONTROLLER as PCI_CLASS_VGA_CONTROLLER
    from gpuslice.gpu.model import ComputeCapability as ComputeCapability
    from gpuslice.gpu.model import FabricInfo as FabricInfo
    from gpuslice.gpu.model import Gpu as Gpu
    from gpuslice.gpu.model import MigInstance as MigInstance
    from gpuslice.gpu.model import Node as Node

# Loaded on first use, so that `gpuslice.gpu.units` (which the simulator needs) does not build the model's
# classes and MIG catalogues in processes that never touch them.
__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "gpuslice.gpu.mig": (
            "CATALOGUES",
            "InvalidMigLayout",
            "MigCatalogue",
            "MigProfile",
            "assign_placements",
            "catalogue_for",
            "free_placements",
        ),
        "gpuslice.gpu.model": (
            "PCI_CLASS_3D_CONTROLLER",
            "PCI_CLASS_VGA_CONTROLLER",
            "ComputeCapability",
            "FabricInfo",
            "Gpu",
            "MigInstance",
            "Node",
        ),
    },
)
