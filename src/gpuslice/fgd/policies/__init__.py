"""Placement policies for the openb simulator: the paper's six and our own."""

from __future__ import annotations

from collections.abc import Callable

from gpuslice.fgd.policies.base import OpenbPolicy, Placement, PolicyContext
from gpuslice.fgd.policies.fgd import FgdPolicy
from gpuslice.fgd.policies.heuristics import (
    BestFitPolicy,
    ClusteringPolicy,
    DotProdPolicy,
    PackingPolicy,
    RandomPolicy,
)
from gpuslice.fgd.policies.ours import CpuAwareFgdPolicy, SymmetricCpuAwareFgdPolicy

PAPER_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")
OUR_POLICIES = ("fgd-cpu", "fgd-cpu-sym")

FACTORIES: dict[str, Callable[[PolicyContext], OpenbPolicy]] = {
    "random": RandomPolicy,
    "dotprod": DotProdPolicy,
    "clustering": ClusteringPolicy,
    "packing": PackingPolicy,
    "bestfit": BestFitPolicy,
    "fgd": FgdPolicy,
    "fgd-cpu": CpuAwareFgdPolicy,
    "fgd-cpu-sym": SymmetricCpuAwareFgdPolicy,
}


def make_policy(name: str, context: PolicyContext) -> OpenbPolicy:
    try:
        factory = FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(FACTORIES)})") from None
    return factory(context)


__all__ = ["FACTORIES", "OUR_POLICIES", "PAPER_POLICIES", "OpenbPolicy", "Placement", "PolicyContext", "make_policy"]
