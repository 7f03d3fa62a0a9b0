"""The placement-policy interface and the helpers the built-in policies share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from gpuslice.sim.core.cluster import Binding, BoolArray, ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec

_NEVER = np.iinfo(np.int64).max

# Chooses a node index for one pod, or None when no allowed node fits it.
NodeChooser = Callable[[PodSpec, ClusterState, BoolArray | None], int | None]


class PlacementPolicy(Protocol):
    """Decides where a unit of pods runs. The engine decides what a unit is and when to ask.

    `all_or_nothing`: True means the engine hands over all pods of a gang job as one unit (gang
    scheduling); False means every pod is its own unit, placed as it reaches the head of the queue,
    so a gang job may hold GPUs while its other pods wait (and can deadlock).

    Contract for `place`: bind every pod of `pods` into `state` (state.bind / state.apply) and return
    one Binding per pod in the order given; or return None and leave `state` exactly as it was. Return
    None only when the unit cannot be placed at all on the current free capacity: the engine relies on
    this to skip a unit shape that failed until capacity is released on a node where one of its pods fits.
    """

    name: str
    all_or_nothing: bool

    def place(self, pods: Sequence[PodSpec], job: JobSpec, state: ClusterState) -> list[Binding] | None: ...


def first_fitting(pod: PodSpec, state: ClusterState, allowed: BoolArray | None) -> int | None:
    """The lowest-indexed node that fits."""
    mask = state.fit_mask(pod)
    if allowed is not None:
        mask &= allowed
    node = int(mask.argmax())
    return node if mask[node] else None


def best_fitting(pod: PodSpec, state: ClusterState, allowed: BoolArray | None) -> int | None:
    """The fitting node with the least free GPU capacity left (then least free CPU, then lowest index)."""
    mask = state.fit_mask(pod)
    if allowed is not None:
        mask &= allowed
    # One integer key: free milli-GPU first, free CPU second (CPU stays below 2**40 milli-cores).
    key = np.where(mask, (state.free_milli << 40) + state.cpu_free, _NEVER)
    node = int(key.argmin())
    return node if mask[node] else None


def largest_first(pods: Sequence[PodSpec]) -> list[int]:
    """Pod positions, biggest GPU request first (then CPU): the usual greedy order for packing a group."""
    return sorted(range(len(pods)), key=lambda i: (-pods[i].gpus, -pods[i].cpu_milli, i))


def place_all(
    pods: Sequence[PodSpec], state: ClusterState, choose: NodeChooser, allowed: BoolArray | None = None
) -> list[Binding] | None:
    """Bind every pod with `choose` (biggest first); on the first pod that fits nowhere undo all and return None."""
    bindings: dict[int, Binding] = {}
    for position in largest_first(pods) if len(pods) > 1 else [0]:
        node = choose(pods[position], state, allowed)
        if node is None:
            for undo, binding in bindings.items():
                state.release(binding, pods[undo])
            return None
        bindings[position] = state.bind(pods[position], node)
    return [bindings[position] for position in range(len(pods))]
