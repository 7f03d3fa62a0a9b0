"""Sharing tiers: whole, time-sliced, MPS and MIG GPUs, fractional jobs mapped onto them, and their own simulator."""

from gpuslice.sim.tiers.engine import TierEngine
from gpuslice.sim.tiers.model import Demand, GpuSlot, Mechanism, Share, TierParams, balanced_layout
from gpuslice.sim.tiers.plans import PLAN_NAMES, TierPlan, plan_for

__all__ = [
    "PLAN_NAMES",
    "Demand",
    "GpuSlot",
    "Mechanism",
    "Share",
    "TierEngine",
    "TierParams",
    "TierPlan",
    "balanced_layout",
    "plan_for",
]
