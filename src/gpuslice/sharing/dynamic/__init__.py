"""Dynamic MIG (`flags.migStrategy: dynamic`): placements advertised as devices, carved on Allocate.

plan: what a node advertises; geometry: which placements are held and which they block; checkpoint:
the holdings that survive a restart; runtime: claim, free and resume against a MigControl. No gRPC here.
Other packages import these names from here, not from the modules; each module loads on first use (a
plugin without dynamic MIG needs only the plan's few functions and the checkpoint's file name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:  # the one list of what the package exports; at run time each is imported on first use
    from gpuslice.sharing.dynamic.checkpoint import MigCheckpoint as MigCheckpoint
    from gpuslice.sharing.dynamic.checkpoint import MigCheckpointError as MigCheckpointError
    from gpuslice.sharing.dynamic.checkpoint import claimed_gpus as claimed_gpus
    from gpuslice.sharing.dynamic.geometry import DynamicMigGeometry as DynamicMigGeometry
    from gpuslice.sharing.dynamic.geometry import GeometryConflict as GeometryConflict
    from gpuslice.sharing.dynamic.geometry import Holding as Holding
    from gpuslice.sharing.dynamic.geometry import Slot as Slot
    from gpuslice.sharing.dynamic.geometry import SlotUnavailable as SlotUnavailable
    from gpuslice.sharing.dynamic.geometry import open_starts as open_starts
    from gpuslice.sharing.dynamic.geometry import placement_slot as placement_slot
    from gpuslice.sharing.dynamic.plan import DYNAMIC as DYNAMIC
    from gpuslice.sharing.dynamic.plan import dynamic_gpus as dynamic_gpus
    from gpuslice.sharing.dynamic.plan import has_placements as has_placements
    from gpuslice.sharing.dynamic.plan import placement_gpus as placement_gpus
    from gpuslice.sharing.dynamic.runtime import ClaimError as ClaimError
    from gpuslice.sharing.dynamic.runtime import DynamicMig as DynamicMig
    from gpuslice.sharing.dynamic.runtime import InUse as InUse
    from gpuslice.sharing.dynamic.runtime import ResumeReport as ResumeReport

_EXPORTS, __getattr__ = lazy_exports(__name__)

CHECKPOINT_FILE_NAME = (
    "gpuslice_dynamic_mig_checkpoint"  # beside the plugin sockets: the kubelet's wipe keeps regular files
)

__all__ = [*_EXPORTS, "CHECKPOINT_FILE_NAME"]
