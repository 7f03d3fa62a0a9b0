"""A user's openb policy behind a guard: what it raises or answers wrong is one error naming it, never a crash.

Built-in policies are trusted (tested, and in the hot loop); a class loaded with `--policy` is wrapped so that
every answer of `place()` is checked before the engine binds it: a node index in range, as many distinct GPU
indices of that node as the pod asks, each with room for the pod's share, the node's CPU, memory and GPU
model allowing the pod.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuslice.fgd.policies.base import OpenbPolicy, Placement, PolicyContext
from gpuslice.fgd.shapes import Shape

_SHOWN = 80  # characters of a bad answer quoted in the error


class PolicyFailure(ValueError):
    """A user policy raised or gave an answer the engine cannot use; the message names the policy and why."""


def _raised(name: str, method: str, exc: Exception) -> PolicyFailure:
    return PolicyFailure(f"policy {name!r}: {method} raised {type(exc).__name__}: {str(exc)[:200]}")


class CheckedFactory:
    """What the registry holds for a user class: builds a CheckedPolicy around a fresh instance."""

    def __init__(self, wrapped: Callable[[PolicyContext], OpenbPolicy], name: str) -> None:
        self.wrapped = wrapped
        self.name = name
        self.__qualname__ = getattr(wrapped, "__qualname__", name)

    def __call__(self, context: PolicyContext) -> CheckedPolicy:
        return CheckedPolicy(self.wrapped, self.name, context)


class CheckedPolicy:
    def __init__(self, factory: Callable[[PolicyContext], OpenbPolicy], name: str, context: PolicyContext) -> None:
        self.name = name
        self._cluster = context.cluster
        try:
            self._inner = factory(context)
        except Exception as exc:
            raise _raised(name, "building it", exc) from None
        if callable(getattr(self._inner, "released", None)):
            self.released = self._released  # the replay calls it when a pod leaves

    def place(self, shape: Shape, memory: int) -> Placement | None:
        try:
            answer = self._inner.place(shape, memory)
        except Exception as exc:
            raise _raised(self.name, "place()", exc) from None
        if answer is None:
            return None
        problem, placement = self._check(shape, memory, answer)
        if placement is None:
            shown = repr(answer)[:_SHOWN]
            raise PolicyFailure(f"policy {self.name!r}: place() returned {shown}: {problem}")
        return placement

    def bound(self, placement: Placement, shape: Shape) -> None:
        try:
            self._inner.bound(placement, shape)
        except Exception as exc:
            raise _raised(self.name, "bound()", exc) from None

    def _released(self, placement: Placement, shape: Shape) -> None:
        try:
            self._inner.released(placement, shape)  # type: ignore[attr-defined]
        except Exception as exc:
            raise _raised(self.name, "released()", exc) from None

    def _check(self, shape: Shape, memory: int, answer: Any) -> tuple[str, Placement | None]:
        """(what is wrong, None) or ("", the answer as a Placement)."""
        cluster = self._cluster
        try:
            node, gpus = answer
        except (TypeError, ValueError):
            return "not None and not a Placement(node, gpus)", None
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < cluster.n:
            return f"node must be an index from 0 to {cluster.n - 1}", None
        try:
            chosen = tuple(gpus)
        except TypeError:
            return "gpus must be a sequence of GPU indices", None
        slots = int(cluster.gpus[node])
        if any(isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < slots for g in chosen):
            return f"gpus must be GPU indices of node {cluster.names[node]} (0 to {slots - 1})", None
        if len(set(chosen)) != len(chosen) or len(chosen) != shape.num_gpu:
            return f"the pod needs {shape.num_gpu} distinct GPUs, got {len(chosen)}", None
        row = cluster.gpu_rows[node]
        if any(row[g] < shape.gpu_milli for g in chosen):
            return f"a chosen GPU has less than the pod's {shape.gpu_milli} milli free", None
        if cluster.cpu_list[node] < shape.cpu or cluster.memory_list[node] < memory:
            return f"node {cluster.names[node]} lacks the pod's CPU or memory", None
        model = cluster.model_list[node]
        if shape.num_gpu and (model < 0 or not (shape.mask >> model) & 1):
            return f"node {cluster.names[node]}'s GPU model is not one the pod may use", None
        return "", Placement(node, chosen)
