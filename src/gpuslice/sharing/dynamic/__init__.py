"""Dynamic MIG (`flags.migStrategy: dynamic`): placements advertised as devices, carved on Allocate.

plan: what a node advertises; geometry: which placements are held and which they block; checkpoint:
the holdings that survive a restart; runtime: claim, free and resume against a MigControl. No gRPC here.
Other packages import these names from here, not from the modules.
"""

from gpuslice.sharing.dynamic.checkpoint import FILE_NAME as CHECKPOINT_FILE_NAME
from gpuslice.sharing.dynamic.checkpoint import MigCheckpoint, MigCheckpointError, claimed_gpus
from gpuslice.sharing.dynamic.geometry import (
    DynamicMigGeometry,
    GeometryConflict,
    Holding,
    SlotUnavailable,
    open_starts,
)
from gpuslice.sharing.dynamic.plan import DYNAMIC, dynamic_gpus, has_placements, placement_gpus
from gpuslice.sharing.dynamic.runtime import ClaimError, DynamicMig, InUse, ResumeReport

__all__ = [
    "CHECKPOINT_FILE_NAME",
    "DYNAMIC",
    "ClaimError",
    "DynamicMig",
    "DynamicMigGeometry",
    "GeometryConflict",
    "Holding",
    "InUse",
    "MigCheckpoint",
    "MigCheckpointError",
    "ResumeReport",
    "SlotUnavailable",
    "claimed_gpus",
    "dynamic_gpus",
    "has_placements",
    "open_starts",
    "placement_gpus",
]
