"""Which mechanism each node's GPUs use, and where each kind of job may go: the tier configurations compared."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from gpuslice.gpu import catalogue_for
from gpuslice.sim.core.model import ClusterSpec, SimModelError
from gpuslice.sim.extensions.tiers.model import Mechanism, TierParams, balanced_layout

PLAN_NAMES = ("whole", "time-slicing", "mps", "mig", "tiered")


@dataclass(frozen=True)
class TierPlan:
    """Per node: its mechanism. fractional_routes: node groups fractional jobs try in order; training_nodes: where
    whole-GPU jobs may run."""

    name: str
    mechanisms: tuple[Mechanism, ...]
    params: TierParams
    fractional_routes: tuple[tuple[int, ...], ...]
    training_nodes: tuple[int, ...]
    static_mig_nodes: frozenset[int] = frozenset()


def plan_for(name: str, options: Mapping[str, str], cluster: ClusterSpec) -> TierPlan:
    """A plan by name: whole, time-slicing, mps, mig (every node alike) or tiered.

    Options: replicas (time-slicing, mps), layout=balanced (mig: a fixed mig-parted "all-balanced" layout),
    and for tiered mig=N, mps=N (node counts, default one eighth of the nodes each; the rest are whole-GPU
    nodes for training).
    """
    nodes = len(cluster.nodes)
    known = {
        "time-slicing": {"replicas"},
        "mps": {"replicas"},
        "mig": {"layout"},
        "whole": set(),
        "tiered": {"mig", "mps", "replicas"},
    }
    if name not in known:
        raise SimModelError(f"unknown sharing plan {name!r}; known: {', '.join(PLAN_NAMES)}")
    unknown = set(options) - known[name]
    if unknown:
        raise SimModelError(f"sharing plan {name!r}: unknown option(s) {sorted(unknown)}; known: {sorted(known[name])}")
    params = TierParams(replicas=_int(options, "replicas", TierParams.replicas, name))
    everything = tuple(range(nodes))
    if name != "tiered":
        mechanism = Mechanism(name)
        static: frozenset[int] = frozenset()
        if name == "mig" and options.get("layout"):
            if options["layout"] != "balanced":
                raise SimModelError(f"sharing plan mig: layout must be 'balanced', got {options['layout']!r}")
            params = replace(params, mig_layout=_balanced(cluster))
            static = frozenset(everything)
        return TierPlan(name, (mechanism,) * nodes, params, (everything,), everything, static)
    mig = _int(options, "mig", max(1, nodes // 8), name)
    mps = _int(options, "mps", max(1, nodes // 8) if nodes > 2 else 0, name)
    whole = nodes - mig - mps
    if whole < 1 or mig < 0 or mps < 0:
        raise SimModelError(
            f"sharing plan tiered: mig={mig} + mps={mps} must leave at least one of {nodes} nodes whole"
        )
    params = replace(params, mig_layout=_balanced(cluster))
    whole_nodes = tuple(range(whole))
    mig_nodes = tuple(range(whole, whole + mig))
    mps_nodes = tuple(range(whole + mig, nodes))
    mechanisms = (Mechanism.WHOLE,) * whole + (Mechanism.MIG,) * mig + (Mechanism.MPS,) * mps
    # Isolated slices first, then trusted sharing, then a whole GPU as the last resort.
    routes = tuple(group for group in (mig_nodes, mps_nodes, whole_nodes) if group)
    return TierPlan(name, mechanisms, params, routes, whole_nodes, frozenset(mig_nodes))


def _balanced(cluster: ClusterSpec) -> tuple[str, ...]:
    gpu = cluster.nodes[0].gpus[0]
    catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
    if catalogue is None:
        raise SimModelError(f"{gpu.product_name} has no MIG: no static MIG layout")
    return balanced_layout(catalogue)


def _int(options: Mapping[str, str], key: str, default: int, name: str) -> int:
    text = options.get(key)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise SimModelError(f"sharing plan {name}: {key} must be an integer, got {text!r}") from None
