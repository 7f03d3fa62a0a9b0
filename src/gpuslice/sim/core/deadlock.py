"""Partial-allocation deadlock detection: gang jobs that hold pods and can never get the rest.

Definition (also in docs/simulator.md). At a moment t, let H be the gang jobs that hold some but not all
of their pods. Capacity bound to a running or non-gang pod will be released in finite time; capacity held
by a job in H is released only after that job gets its missing pods and runs. Start from the empty cluster
minus everything held by H, and repeat until nothing changes: if the placement policy can place all
missing pods of some job in H on that capacity, that job can finish, so give its holdings back and drop it
from H. The jobs left in H are deadlocked: even if every other job finished and nothing new arrived, none of
them could ever start. This is the Banker's-algorithm style detection, with the simulator's own policy
deciding what "fits" on real per-node capacity rather than on cluster totals.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.placement import PlacementPolicy
from gpuslice.sim.core.runs import JobRun


def find_deadlocked(state: ClusterState, holders: Iterable[JobRun], policy: PlacementPolicy) -> list[JobRun]:
    """The holders that can never complete (see the module docstring); `state` only supplies the cluster."""
    unresolved = list(holders)
    if not unresolved:
        return []
    work = state.fresh()
    for run in unresolved:
        for position, binding in enumerate(run.bound):
            if binding is not None:
                work.apply(binding, run.spec.pods[position])
    changed = True
    while changed and unresolved:
        changed = False
        for run in list(unresolved):
            if _could_finish(run, work, policy):
                unresolved.remove(run)
                for position, binding in enumerate(run.bound):
                    if binding is not None:
                        work.release(binding, run.spec.pods[position])
                changed = True
    return unresolved


def _could_finish(run: JobRun, work: ClusterState, policy: PlacementPolicy) -> bool:
    """Whether the policy could place every missing pod of `run` on `work`; leaves `work` unchanged."""
    missing = [position for position, binding in enumerate(run.bound) if binding is None]
    pods = run.spec.pods
    placed: list[tuple[int, Binding]] = []
    if policy.all_or_nothing:
        bindings = policy.place([pods[position] for position in missing], run.spec, work)
        if bindings is not None:
            placed = list(zip(missing, bindings, strict=True))
        ok = bindings is not None
    else:
        ok = True
        for position in missing:
            got = policy.place([pods[position]], run.spec, work)
            if got is None:
                ok = False
                break
            placed.append((position, got[0]))
    for position, binding in placed:
        work.release(binding, pods[position])
    return ok
