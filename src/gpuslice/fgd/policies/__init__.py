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

PAPER_POLICIES = ("random", "dotprod", "clustering", "packing", "best-fit", "fgd")
OUR_POLICIES = ("fgd-cpu", "fgd-cpu-sym")
# One spelling per policy across both simulators (the event simulator's `best-fit`); the old one still works.
OPENB_POLICY_ALIASES = {"bestfit": "best-fit"}

FACTORIES: dict[str, Callable[[PolicyContext], OpenbPolicy]] = {
    "random": RandomPolicy,
    "dotprod": DotProdPolicy,
    "clustering": ClusteringPolicy,
    "packing": PackingPolicy,
    "best-fit": BestFitPolicy,
    "fgd": FgdPolicy,
    "fgd-cpu": CpuAwareFgdPolicy,
    "fgd-cpu-sym": SymmetricCpuAwareFgdPolicy,
}


def canonical_openb_policy(name: str) -> str:
    """A policy name in its one spelling (`bestfit` -> `best-fit`); other names unchanged."""
    return OPENB_POLICY_ALIASES.get(name, name)


def make_policy(name: str, context: PolicyContext) -> OpenbPolicy:
    try:
        factory = FACTORIES[canonical_openb_policy(name)]
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(FACTORIES)})") from None
    return factory(context)


__all__ = [
    "FACTORIES",
    "OPENB_POLICY_ALIASES",
    "OUR_POLICIES",
    "PAPER_POLICIES",
    "OpenbPolicy",
    "Placement",
    "PolicyContext",
    "canonical_openb_policy",
    "make_policy",
]
