"""The Allocator protocol: what a kubelet front end asks of one resource; the static implementation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from gpuslice.allocation.allocate import allocate
from gpuslice.allocation.answer import AllocationAnswer
from gpuslice.allocation.options import AllocateOptions
from gpuslice.allocation.preferred import WholeGpuRule, preferred_allocation
from gpuslice.sharing import HealthStore, Resource
from gpuslice.sharing.listeners import Listener


class Allocator(Protocol):
    """One advertised resource as the front ends see it: its listing, preferences and allocations.

    Errors are typed: AllocationError for a request to refuse (the front end answers INVALID_ARGUMENT and
    keeps serving), AllocationFailed for a valid request the device could not carry out (INTERNAL).
    """

    @property
    def resource(self) -> Resource: ...

    def unhealthy_now(self) -> frozenset[str]:
        """The advertised IDs to list as Unhealthy now."""
        ...

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> tuple[str, ...]:
        """The IDs to prefer for one container (advisory); AllocationError when the request cannot be met."""
        ...

    def allocate(self, requests: Sequence[Sequence[str]]) -> AllocationAnswer:
        """Answer one Allocate call (one request per container) as plain data."""
        ...

    def set_options(self, options: AllocateOptions) -> None:
        """Build later answers with new options (a config reload); calls in flight keep the old ones."""
        ...

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call `listener()` whenever the listing may have changed; returns a function that removes it."""
        ...

    def close(self) -> None:
        """Stop listening to the model; the allocator answers nothing after this."""
        ...


ANSWER_CACHE_LIMIT = 1024  # distinct requests remembered per resource; past it the memory starts over


class StaticAllocator:
    """A resource whose devices exist as advertised: health decides the listing, the pure functions the rest.

    Allocate sits on the kubelet's admission path, and its answer is a pure function of the request, the
    health of the resource and the options (pipeline steps are pure functions of their context), so each
    answer is built once and remembered until health or options change. The cdi-annotations strategy
    names its annotation with a fresh UUID per call (NVIDIA's answer), so with it every answer is built.
    """

    def __init__(
        self,
        resource: Resource,
        health: HealthStore,
        options: AllocateOptions | None = None,
        whole_gpu_rule: WholeGpuRule | None = None,
    ) -> None:
        self._resource = resource
        self._health = health
        self._options = options or AllocateOptions()
        self._whole_gpu_rule = whole_gpu_rule
        self._answers: dict[tuple[tuple[str, ...], ...], AllocationAnswer] = {}
        self._answers_generation = 0  # bumped by every change that outdates remembered answers
        self._removers: list[Callable[[], None]] = [health.add_listener(self._forget_answers)]

    @property
    def resource(self) -> Resource:
        return self._resource

    @property
    def options(self) -> AllocateOptions:
        return self._options

    def unhealthy_now(self) -> frozenset[str]:
        return self._health.unhealthy_ids(self._resource)

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> tuple[str, ...]:
        return preferred_allocation(
            self._resource, list(available), list(must_include), size, whole_gpu_rule=self._whole_gpu_rule
        )

    def allocate(self, requests: Sequence[Sequence[str]]) -> AllocationAnswer:
        key = tuple(map(tuple, requests))
        answer = self._answers.get(key)
        if answer is not None:
            return answer
        generation, options = self._answers_generation, self._options
        answer = allocate(self._resource, requests, self._health.unhealthy_ids(self._resource), options)
        # kept only when nothing changed while it was built (a health change or a reload clears the memory)
        if generation == self._answers_generation and "cdi-annotations" not in options.strategies:
            answers = self._answers
            if len(answers) >= ANSWER_CACHE_LIMIT:
                answers.clear()
            answers[key] = answer
        return answer

    def _forget_answers(self) -> None:
        self._answers_generation += 1
        self._answers = {}

    def set_options(self, options: AllocateOptions) -> None:
        self._options = options
        self._forget_answers()

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        remove = self._health.add_listener(listener)
        self._removers.append(remove)
        return remove

    def close(self) -> None:
        removers, self._removers = self._removers, []
        for remove in removers:
            remove()
