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

    @property
    def repeatable_answers(self) -> bool:
        """True when `allocate` gives an equal answer to an equal request until the next listener call or
        `set_options` (it depends on nothing else and does nothing), so a front end may answer a repeated
        request from memory and forget that memory at each of those; False when every call must run."""
        ...

    def set_options(self, options: AllocateOptions) -> None:
        """Build later answers with new options (a config reload); calls in flight keep the old ones."""
        ...

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call `listener()` whenever the listing or an answer may have changed (after the change); returns a
        function that removes it."""
        ...

    def close(self) -> None:
        """Stop listening to the model; the allocator answers nothing after this."""
        ...


class StaticAllocator:
    """A resource whose devices exist as advertised: health decides the listing, the pure functions the rest.

    An answer is a pure function of the request, the health of the resource and the options (pipeline
    steps are pure functions of their context), and health changes reach the listeners, so answers are
    repeatable: the front end remembers them (the device plugin keeps the serialized response of each
    request). The cdi-annotations strategy names its annotation with a fresh UUID per call (NVIDIA's
    answer), so with it answers are not repeatable and every call builds its own.
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
        self._removers: list[Callable[[], None]] = []

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
        return allocate(self._resource, requests, self._health.unhealthy_ids(self._resource), self._options)

    @property
    def repeatable_answers(self) -> bool:
        return "cdi-annotations" not in self._options.strategies

    def set_options(self, options: AllocateOptions) -> None:
        self._options = options

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        remove = self._health.add_listener(listener)
        self._removers.append(remove)
        return remove

    def close(self) -> None:
        removers, self._removers = self._removers, []
        for remove in removers:
            remove()
