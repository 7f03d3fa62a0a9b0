"""Extension hooks: an Engine that tells listeners about binds, starts, releases and batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from gpuslice.sim.engine import Engine, Progress, SimConfig
from gpuslice.sim.metrics import SimResult
from gpuslice.sim.model import ClusterSpec, JobSpec
from gpuslice.sim.policies.base import PlacementPolicy
from gpuslice.sim.queue import QueueOrder, Unit
from gpuslice.sim.runs import JobRun, JobStatus


class Listener:
    """What an extension may watch or steer; every method is a no-op here, so extensions override only what they use.

    Call order for one job: gate (each time it would be queued), on_submit (after the engine accepted or
    rejected it: check run.status), on_bind (pods bound), slowdown and
    before_start (just before pods start; before_start may change `run.spec.duration` for this start),
    on_start, on_unbind (per pod released: finished or evicted), on_done. after_batch runs after every
    scheduling pass; extras adds keys to the run's JSON record.
    """

    def gate(self, engine: HookedEngine, run: JobRun) -> bool:
        """False keeps `run` out of the pending queue for now; the listener then calls engine.release_to_queue."""
        return True

    def on_submit(self, engine: HookedEngine, run: JobRun) -> None: ...

    def on_bind(self, engine: HookedEngine, run: JobRun, positions: tuple[int, ...]) -> None: ...

    def slowdown(self, engine: HookedEngine, run: JobRun, positions: tuple[int, ...], slowdown: float) -> float:
        return slowdown

    def before_start(self, engine: HookedEngine, run: JobRun, positions: tuple[int, ...]) -> None: ...

    def on_start(self, engine: HookedEngine, run: JobRun, positions: tuple[int, ...]) -> None: ...

    def on_unbind(self, engine: HookedEngine, run: JobRun, position: int) -> None: ...

    def on_done(self, engine: HookedEngine, run: JobRun) -> None: ...

    def after_batch(self, engine: HookedEngine) -> None: ...

    def extras(self, engine: HookedEngine) -> dict[str, Any]:
        return {}


class HookedEngine(Engine):
    """The core Engine plus listeners. It adds no behaviour of its own: with no listeners it runs identically."""

    def __init__(
        self,
        cluster: ClusterSpec,
        jobs: Sequence[JobSpec],
        policy: PlacementPolicy,
        order: QueueOrder | None = None,
        config: SimConfig | None = None,
        listeners: Sequence[Listener] = (),
        progress: Progress | None = None,
        trace_name: str = "",
    ) -> None:
        self.listeners = tuple(listeners)
        super().__init__(
            cluster, jobs, policy, order, config, observer=self._after_batch, progress=progress, trace_name=trace_name
        )

    # -- helpers for listeners ----------------------------------------------------------------
    def release_to_queue(self, run: JobRun) -> None:
        """Queue a job's unbound pods, bypassing the gates (a listener admitting a job it held back)."""
        if run.status is JobStatus.WAITING:
            Engine._enqueue(self, run)

    def wake(self) -> None:
        """Ask for one more scheduling pass at the current time (after evictions freed capacity)."""
        self.schedule_timer(self.now, _nothing)

    def settle(self, run: JobRun, status: JobStatus) -> None:
        """End a job that will never run (e.g. deactivated by a backoff limit); drops its queued units."""
        self.queue.remove(lambda unit: unit.seq == run.seq)
        run.status = status
        self._settled += 1

    def run_extended(self) -> ExtendedResult:
        result = self.run()
        extras: dict[str, Any] = {}
        for listener in self.listeners:
            extras.update(listener.extras(self))
        return ExtendedResult.of(result, extras)

    # -- the overridden engine steps ----------------------------------------------------------
    def _submit(self, run: JobRun) -> None:
        super()._submit(run)
        for listener in self.listeners:
            listener.on_submit(self, run)

    def _enqueue(self, run: JobRun) -> None:
        if all(listener.gate(self, run) for listener in self.listeners):
            super()._enqueue(run)

    def _try_place(self, unit: Unit) -> bool:
        run = self.runs[unit.seq]
        before = run.bound_count
        placed = super()._try_place(unit)
        if placed and run.bound_count > before:
            for listener in self.listeners:
                listener.on_bind(self, run, unit.pod_indices)
        return placed

    def _start(self, run: JobRun, positions: tuple[int, ...], slowdown: float) -> None:
        for listener in self.listeners:
            slowdown = listener.slowdown(self, run, positions, slowdown)
        for listener in self.listeners:
            listener.before_start(self, run, positions)
        super()._start(run, positions, slowdown)
        for listener in self.listeners:
            listener.on_start(self, run, positions)

    def _finish(self, run: JobRun, positions: tuple[int, ...], epoch: int) -> None:
        super()._finish(run, positions, epoch)
        if epoch == run.epoch and run.status is JobStatus.DONE:
            for listener in self.listeners:
                listener.on_done(self, run)

    def _unbind(self, run: JobRun, position: int) -> None:
        for listener in self.listeners:
            listener.on_unbind(self, run, position)
        super()._unbind(run, position)

    def _after_batch(self, engine: Engine) -> None:
        for listener in self.listeners:
            listener.after_batch(self)


def _nothing(engine: Engine) -> None:
    """A timer that only causes a scheduling pass."""


@dataclass
class ExtendedResult(SimResult):
    """A SimResult whose JSON record carries an extension's metrics too (preemptions, jain_index, ...)."""

    extras: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, result: SimResult, extras: dict[str, Any]) -> ExtendedResult:
        values = {item.name: getattr(result, item.name) for item in fields(SimResult)}
        return cls(**values, extras=dict(extras))

    def summary(self) -> dict[str, Any]:
        record = super().summary()
        record.update(self.extras)
        return record
