"""Sharing tiers: whole, time-sliced, MPS and MIG GPUs, fractional jobs mapped onto them, and their own simulator."""

from gpuslice.sim.extensions.tiers.engine import TierEngine
from gpuslice.sim.extensions.tiers.model import GpuSlot, Mechanism, Share, ShareDemand, TierParams, balanced_layout
from gpuslice.sim.extensions.tiers.plans import PLAN_NAMES, TierPlan, plan_for

__all__ = [
    "PLAN_NAMES",
    "GpuSlot",
    "Mechanism",
    "Share",
    "ShareDemand",
    "TierEngine",
    "TierParams",
    "TierPlan",
    "balanced_layout",
    "plan_for",
]
