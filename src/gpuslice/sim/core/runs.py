"""A job's life in one simulation: where its pods are bound, when they started and ended."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gpuslice.sim.core.cluster import Binding
from gpuslice.sim.core.model import JobSpec


class JobStatus(enum.Enum):
    WAITING = "waiting"  # submitted, not every pod started yet (may hold some bound pods)
    RUNNING = "running"  # every pod started
    DONE = "done"
    REJECTED = "rejected"  # cannot fit even on the empty cluster
    DEADLOCKED = "deadlocked"  # holds pods that can never be joined by the rest (see deadlock.py)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One earlier try of a job that an extension ended by eviction: when its pods started and where they ran."""

    start: float | None  # when its first pod started; None if it was evicted before any pod started
    end: float  # when it was evicted
    placement: tuple[Binding | None, ...]


@dataclass(slots=True, eq=False)
class JobRun:
    spec: JobSpec
    seq: int
    bound: list[Binding | None]
    pod_start: list[float | None]
    status: JobStatus = JobStatus.WAITING
    epoch: int = 0
    started_pods: int = 0
    finished_pods: int = 0
    start_time: float | None = None  # when the last of its pods started
    end_time: float | None = None
    cross_island: bool = False  # a gang that ran spread over more than one NVLink island
    slowdown: float = 1.0  # run time stretch of its current run (cross-island penalty)
    evictions: int = 0
    deadlocked_at: float | None = None
    first_start: float | None = None  # when the first pod of the current attempt started
    extra: dict[str, float] = field(default_factory=dict)  # room for extensions (checkpoint progress, ...)
    # Where each pod ran in the current attempt; kept after the pod ends (`bound` is cleared then).
    placement: list[Binding | None] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)  # earlier tries, ended by eviction

    @classmethod
    def new(cls, spec: JobSpec, seq: int) -> JobRun:
        count = len(spec.pods)
        return cls(spec, seq, [None] * count, [None] * count, placement=[None] * count)

    @property
    def bound_count(self) -> int:
        return sum(binding is not None for binding in self.bound)

    @property
    def holds_partial_gang(self) -> bool:
        """A gang job with some but not all pods bound: it holds capacity without running."""
        bound = self.bound_count
        return self.spec.gang and 0 < bound < len(self.bound)

    @property
    def wait(self) -> float | None:
        return None if self.start_time is None else self.start_time - self.spec.submit

    @property
    def completion_time(self) -> float | None:
        return None if self.end_time is None else self.end_time - self.spec.submit
