"""A user's placement policy behind a guard: what it raises, or an answer that breaks the place() contract,
is one error naming it, never a crash or a corrupted run.

Built-in policies are trusted (tested, and in the hot loop); a class loaded with `--policy` is wrapped, and
each place() call is checked against the contract of PlacementPolicy: None leaves the cluster as it was; a
list holds one binding per pod (a node index, as many distinct GPU indices of that node as the pod asks),
the cluster changed by exactly those bindings, and no GPU, CPU or memory went below zero. The check copies
the free-capacity arrays on each call, which only user policies pay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.core.placement import PlacementPolicy

_SHOWN = 80


class SimPolicyFailure(ValueError):
    """A user policy raised or broke the place() contract; the message names the policy and how."""


class CheckedSimFactory:
    """What the registry holds for a user class: a CheckedSimPolicy around a fresh instance."""

    def __init__(self, wrapped: Callable[[], PlacementPolicy], name: str) -> None:
        self.wrapped = wrapped
        self.name = name
        self.__qualname__ = getattr(wrapped, "__qualname__", name)

    def __call__(self) -> CheckedSimPolicy:
        return CheckedSimPolicy(self.wrapped, self.name)


class CheckedSimPolicy:
    def __init__(self, factory: Callable[[], PlacementPolicy], name: str) -> None:
        self.name = name
        try:
            self._inner = factory()
        except Exception as exc:
            raise SimPolicyFailure(f"policy {name!r}: building it raised {type(exc).__name__}: {exc}") from None
        self.all_or_nothing = bool(self._inner.all_or_nothing)

    def place(self, pods: Sequence[PodSpec], job: JobSpec, state: ClusterState) -> list[Binding] | None:
        before = (state.gpu_free.copy(), state.cpu_free.copy(), state.memory_free.copy())
        try:
            answer = self._inner.place(pods, job, state)
        except Exception as exc:
            raise SimPolicyFailure(f"policy {self.name!r}: place() raised {type(exc).__name__}: {exc}") from None
        problem, bindings = _check(pods, state, before, answer)
        if problem:
            shown = repr(answer)[:_SHOWN]
            raise SimPolicyFailure(f"policy {self.name!r}: place() returned {shown} for job {job.job_id}: {problem}")
        return bindings


def _check(
    pods: Sequence[PodSpec], state: ClusterState, before: tuple[Any, Any, Any], answer: Any
) -> tuple[str, list[Binding] | None]:
    gpu_free, cpu_free, memory_free = (array.copy() for array in before)
    if answer is None:
        changed = not (
            np.array_equal(gpu_free, state.gpu_free)
            and np.array_equal(cpu_free, state.cpu_free)
            and np.array_equal(memory_free, state.memory_free)
        )
        return ("None, but it changed the cluster (None must leave it as it was)" if changed else ""), None
    if not isinstance(answer, list | tuple) or len(answer) != len(pods):
        return f"not None and not a list of {len(pods)} bindings, one per pod", None
    nodes, slots = len(cpu_free), state.gpu_free.shape[1]
    bindings = []
    for pod, binding in zip(pods, answer, strict=True):
        try:
            node, gpus = binding
            chosen = tuple(gpus)
        except (TypeError, ValueError):
            return "a binding is not (node, gpus)", None
        if isinstance(node, bool) or not isinstance(node, int | np.integer) or not 0 <= node < nodes:
            return f"node must be an index from 0 to {nodes - 1}", None
        if any(isinstance(g, bool) or not isinstance(g, int | np.integer) or not 0 <= g < slots for g in chosen):
            return f"GPU indices must be 0 to {slots - 1}", None
        if len(set(chosen)) != len(chosen) or len(chosen) != pod.gpu_count:
            return f"a pod needs {pod.gpu_count} distinct GPUs, got {len(chosen)}", None
        for gpu in chosen:
            gpu_free[node, gpu] -= pod.gpu_milli
        cpu_free[node] -= pod.cpu_milli
        memory_free[node] -= pod.memory_mib
        bindings.append(Binding(int(node), tuple(int(g) for g in chosen)))
    if (gpu_free < 0).any() or (cpu_free < 0).any() or (memory_free < 0).any():
        return "the bindings ask more GPU, CPU or memory than a node has free", None
    if not (
        np.array_equal(gpu_free, state.gpu_free)
        and np.array_equal(cpu_free, state.cpu_free)
        and np.array_equal(memory_free, state.memory_free)
    ):
        return "the cluster did not change by exactly these bindings (bind each pod with state.bind)", None
    return "", bindings
