"""GetPreferredAllocation: NVIDIA's two rules, with a deterministic final tie-break."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuslice.allocation.errors import NotEnoughDevices
from gpuslice.sharing import AllocationPolicy, Resource, is_replica
from gpuslice.topology import Topology, UnknownGpuError, preferred_whole_gpus

# Rule A (whole GPUs): (resource, available, must_include, size) -> preferred IDs. The plugin passes
# one bound to the node's topology (whole_gpu_rule_for); without one, GPUs go in advertised order.
WholeGpuRule = Callable[[Resource, Sequence[str], Sequence[str], int], tuple[str, ...]]


def whole_gpu_rule_for(topology: Topology) -> WholeGpuRule:
    """Rule A bound to a node's topology: go-gpuallocator's best-effort partition over GPU UUIDs."""

    def rule(resource: Resource, available: Sequence[str], must_include: Sequence[str], size: int) -> tuple[str, ...]:
        try:
            return tuple(preferred_whole_gpus(topology, list(available), list(must_include), size))
        except UnknownGpuError:
            return ()  # Rule A answers invalid arguments with an empty list, never an error

    return rule


def uses_whole_gpu_rule(resource: Resource) -> bool:
    """Rule A applies when every device is a full GPU and no ID is a replica."""
    return resource.kind == "gpu" and resource.sharing == "none" and not any(is_replica(d.id) for d in resource.devices)


def preferred_allocation(
    resource: Resource,
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    policy: AllocationPolicy | None = None,
    whole_gpu_rule: WholeGpuRule | None = None,
) -> tuple[str, ...]:
    """The IDs the plugin would like for one container (advisory: the kubelet may pick others).

    IDs unknown to the resource are dropped first. Whole GPUs follow Rule A (topology; invalid
    arguments give an empty answer); replicas and MIG devices follow Rule B (`preferred_shared`).
    """
    known = resource.by_id
    available = [i for i in dict.fromkeys(available) if i in known]
    must_include = [i for i in dict.fromkeys(must_include) if i in known]
    if uses_whole_gpu_rule(resource):
        if size < len(must_include) or size > len(available) or not set(must_include) <= set(available):
            return ()
        rule = whole_gpu_rule or in_advertised_order
        return rule(resource, available, must_include, size)
    return preferred_shared(resource, available, must_include, size, policy or resource.allocation_policy)


def in_advertised_order(
    resource: Resource, available: Sequence[str], must_include: Sequence[str], size: int
) -> tuple[str, ...]:
    """Fallback for Rule A: must-include, then the first free GPUs in advertised order."""
    chosen = list(must_include)
    for device_id in sorted(available, key=resource.position.__getitem__):
        if len(chosen) >= size:
            break
        if device_id not in chosen:
            chosen.append(device_id)
    return tuple(chosen)


def preferred_shared(
    resource: Resource,
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    policy: AllocationPolicy = "distributed",
) -> tuple[str, ...]:
    """Rule B (replicas, MIG): greedy picks by how allocated each physical device already is.

    For each physical device P, allocated(P) = its devices minus those still available (so replicas
    in use elsewhere and must-include ones count). Each pick takes the candidate whose P has the
    fewest (`distributed`) or most (`packed`) allocated, then the fewest picks so far in this call,
    then the earliest advertised position (GPU index, then replica number) so answers are reproducible.
    """
    must = list(must_include)
    candidates = [i for i in available if i not in set(must)]
    needed = size - len(must)
    if needed <= 0:
        return tuple(must)
    if len(candidates) < needed:
        raise NotEnoughDevices(resource.name, needed, len(candidates))
    by_id = resource.by_id
    free: dict[str, int] = {}
    for device_id in candidates:
        physical = by_id[device_id].physical_id
        free[physical] = free.get(physical, 0) + 1
    total = {physical: len(resource.replicas_of[physical]) for physical in free}
    picks = dict.fromkeys(free, 0)
    sign = 1 if policy == "distributed" else -1
    position = resource.position

    def key(device_id: str) -> tuple[int, int, int]:
        physical = by_id[device_id].physical_id
        return (sign * (total[physical] - free[physical]), picks[physical], position[device_id])

    chosen = []
    remaining = list(candidates)
    for _ in range(needed):
        best = min(remaining, key=key)
        remaining.remove(best)
        physical = by_id[best].physical_id
        picks[physical] += 1
        free[physical] -= 1
        chosen.append(best)
    return (*must, *chosen)
