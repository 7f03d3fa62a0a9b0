"""Placement policies, one module each behind the PlacementPolicy protocol, selectable by name."""

from __future__ import annotations

from collections.abc import Callable

from gpuslice.sim.core.placement import PlacementPolicy
from gpuslice.sim.policies.best_fit import BestFit
from gpuslice.sim.policies.first_fit import FirstFit
from gpuslice.sim.policies.gang import Gang
from gpuslice.sim.policies.nvlink_aware import NvlinkAware
from gpuslice.sim.policies.topology_aware import TopologyAware

# name -> factory; later policies (preemption, sharing tiers) register here.
POLICIES: dict[str, Callable[[], PlacementPolicy]] = {
    FirstFit.name: FirstFit,
    BestFit.name: BestFit,
    Gang.name: Gang,
    TopologyAware.name: TopologyAware,
    NvlinkAware.name: NvlinkAware,
}


# One spelling per policy across both simulators; the unhyphenated ones are accepted too.
POLICY_ALIASES = {"bestfit": "best-fit", "firstfit": "first-fit"}


def canonical_policy(text: str) -> str:
    """`bestfit` -> `best-fit`, `bestfit:opt=1` -> `best-fit:opt=1`; any other text unchanged."""
    name, sep, rest = text.strip().partition(":")
    return POLICY_ALIASES.get(name.strip(), name.strip()) + sep + rest


class UnknownPolicy(ValueError):
    """A policy name that is not registered."""


def add_policy(reference: str) -> str:
    """Load a policy from `module:Name` or an installed entry point and register it; returns its name."""
    from gpuslice.sim.policies.loader import load_policy, register_policy

    return register_policy(load_policy(reference), POLICIES)


def make_policy(name: str) -> PlacementPolicy:
    """A fresh policy by its name (first-fit, best-fit, gang, topology-aware, nvlink-aware)."""
    factory = POLICIES.get(canonical_policy(name))
    if factory is None:
        raise UnknownPolicy(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
    return factory()


__all__ = [
    "POLICIES",
    "POLICY_ALIASES",
    "BestFit",
    "FirstFit",
    "Gang",
    "NvlinkAware",
    "PlacementPolicy",
    "TopologyAware",
    "UnknownPolicy",
    "add_policy",
    "canonical_policy",
    "make_policy",
]
