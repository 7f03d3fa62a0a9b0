"""Priority preemption with checkpoint cost: who gets evicted for a higher-priority job, and what it costs.

Every job that runs as one piece (a single pod, or a gang whose pods start together) checkpoints as
gpuslice.sim.extensions.checkpoint describes. The Checkpoints listener does that bookkeeping for every row of the
preemption trace, with or without preemption, so that the checkpoint overhead is paid everywhere.

Preemption (the Preemptor listener). After each scheduling pass, pending units are taken in queue order;
for one that did not fit, the candidates are running jobs of strictly lower priority. They are released
one by one on a copy of the cluster, cheapest first (lowest priority, then the least time to release,
then the least work lost, then the most recently started), until the placement policy can place the
unit; then every victim that turns out not to be needed is given back. The chosen victims release their
GPUs at once (`grace` 0: they lose what they did since their last completed save) or at their next
completed save when it comes within `grace` seconds (no work lost, the preemptor waits), else after
`grace` seconds with the loss. A preemptor that finds room elsewhere before its victims are released
cancels their eviction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuslice.sim.core.cluster import ClusterState
from gpuslice.sim.core.engine import Engine, Listener
from gpuslice.sim.core.metrics import percentile
from gpuslice.sim.core.queue import Unit
from gpuslice.sim.core.runs import JobRun, JobStatus
from gpuslice.sim.core.sections import Cell, Record, ReportSection, format_duration, number
from gpuslice.sim.extensions.checkpoint import (
    NEVER,
    Checkpointing,
    cut_segment,
    next_safe_point,
    saves_needed,
    segment_length,
)
from gpuslice.units import HOUR


@dataclass
class _Progress:
    """A job's checkpoint state across its segments (GPU-seconds are wall seconds x GPUs)."""

    work: float
    ckpt: Checkpointing
    gpus: float
    durable: float = 0.0
    remaining: float = 0.0
    resumed: bool = False
    segment_start: float = 0.0
    first_start: float | None = None
    preempted: int = 0
    lost_gpu_s: float = 0.0
    restore_gpu_s: float = 0.0
    save_gpu_s: float = 0.0


class Checkpoints(Listener):
    """Stretches each run segment by its saves and restore, and books the GPU time they cost."""

    def __init__(self, checkpoints: Mapping[str, Checkpointing], default: Checkpointing = NEVER) -> None:
        self.checkpoints = checkpoints
        self.default = default
        self.jobs: dict[int, _Progress] = {}

    def tracked(self, run: JobRun) -> _Progress | None:
        return self.jobs.get(run.seq)

    def on_submit(self, engine: Engine, run: JobRun) -> None:
        spec = run.spec
        if len(spec.pods) > 1 and not spec.gang:
            return  # pods run on their own clocks: not one checkpointable piece
        ckpt = self.checkpoints.get(spec.job_id, self.default)
        self.jobs[run.seq] = _Progress(spec.duration, ckpt, spec.gpus)

    def before_start(self, engine: Engine, run: JobRun, positions: tuple[int, ...]) -> None:
        progress = self.jobs.get(run.seq)
        if progress is None:
            return
        progress.remaining = progress.work - progress.durable
        progress.resumed = progress.durable > 0
        length = segment_length(progress.remaining, progress.resumed, progress.ckpt)
        run.spec = replace(run.spec, duration=length)

    def on_start(self, engine: Engine, run: JobRun, positions: tuple[int, ...]) -> None:
        progress = self.jobs.get(run.seq)
        if progress is None:
            return
        progress.segment_start = engine.now
        if progress.first_start is None:
            progress.first_start = engine.now

    def on_done(self, engine: Engine, run: JobRun) -> None:
        progress = self.jobs.get(run.seq)
        if progress is None:
            return
        wall = run.slowdown * progress.gpus
        progress.save_gpu_s += saves_needed(progress.remaining, progress.ckpt.interval) * progress.ckpt.save * wall
        if progress.resumed:
            progress.restore_gpu_s += progress.ckpt.restore * wall

    def cut(self, engine: Engine, run: JobRun) -> None:
        """Book the end of `run`'s current segment at engine.now (it is about to be evicted)."""
        progress = self.jobs[run.seq]
        elapsed = (engine.now - progress.segment_start) / run.slowdown
        cut = cut_segment(elapsed, progress.remaining, progress.resumed, progress.ckpt)
        wall = run.slowdown * progress.gpus
        progress.durable += cut.durable
        progress.lost_gpu_s += cut.lost * wall
        progress.save_gpu_s += cut.saves * progress.ckpt.save * wall
        if progress.resumed and not cut.restoring:
            progress.restore_gpu_s += progress.ckpt.restore * wall
        progress.preempted += 1

    def release_in(self, engine: Engine, run: JobRun) -> float:
        """Seconds from now until `run` reaches its next completed save (or its end)."""
        progress = self.jobs[run.seq]
        elapsed = (engine.now - progress.segment_start) / run.slowdown
        safe = next_safe_point(elapsed, progress.remaining, progress.resumed, progress.ckpt)
        if safe is None:
            safe = run.spec.duration  # no save left: it releases when it ends
        return max(0.0, (safe - elapsed) * run.slowdown)

    def loss_if_cut(self, engine: Engine, run: JobRun) -> float:
        progress = self.jobs[run.seq]
        elapsed = (engine.now - progress.segment_start) / run.slowdown
        return cut_segment(elapsed, progress.remaining, progress.resumed, progress.ckpt).lost * progress.gpus

    def extras(self, engine: Engine) -> dict[str, Any]:
        lost = sum(p.lost_gpu_s for p in self.jobs.values()) / HOUR
        restore = sum(p.restore_gpu_s for p in self.jobs.values()) / HOUR
        save = sum(p.save_gpu_s for p in self.jobs.values()) / HOUR
        return {
            "preemptions": sum(p.preempted for p in self.jobs.values()),
            "wasted_gpu_hours": round(lost + restore, 3),
            "lost_gpu_hours": round(lost, 3),
            "restore_gpu_hours": round(restore, 3),
            "checkpoint_gpu_hours": round(save, 3),
            "overhead_gpu_hours": round(lost + restore + save, 3),
            "wait_by_priority": self.by_priority(engine),
        }

    def by_priority(self, engine: Engine) -> dict[str, dict[str, float]]:
        """Per priority class: first-start wait and completion time (seconds), and preemptions suffered."""
        classes: dict[int, list[JobRun]] = {}
        for run in engine.runs:
            classes.setdefault(run.spec.priority, []).append(run)
        table: dict[str, dict[str, float]] = {}
        for priority in sorted(classes, reverse=True):
            runs = classes[priority]
            waits = [
                p.first_start - r.spec.submit for r in runs if (p := self.jobs.get(r.seq)) and p.first_start is not None
            ]
            jcts = [r.completion_time for r in runs if r.completion_time is not None]
            table[str(priority)] = {
                "jobs": len(runs),
                "completed": len(jcts),
                "wait_p50": round(percentile(waits, 50), 3),
                "wait_p99": round(percentile(waits, 99), 3),
                "wait_mean": round(float(np.mean(waits)) if waits else 0.0, 3),
                "jct_mean": round(float(np.mean(jcts)) if jcts else 0.0, 3),
                "jct_p50": round(percentile(jcts, 50), 3),
                "preempted": sum(p.preempted for r in runs if (p := self.jobs.get(r.seq))),
            }
        return table


@dataclass(frozen=True)
class PreemptionConfig:
    """grace 0: victims are killed at once; inf: they run to their next completed save first."""

    grace: float = 0.0
    max_victims: int = 64  # a unit needing more victims than this is left to wait

    def __post_init__(self) -> None:
        if not self.grace >= 0:
            raise ValueError(f"grace must be >= 0 seconds, got {self.grace}")


class Preemptor(Listener):
    """Evicts lower-priority jobs for pending higher-priority units (see the module docstring)."""

    def __init__(self, checkpoints: Checkpoints, config: PreemptionConfig | None = None) -> None:
        self.checkpoints = checkpoints
        self.config = config or PreemptionConfig()
        self.preemptions = 0
        self.preemptors: dict[int, list[int]] = {}  # preemptor seq -> victims not yet released
        self.draining: set[int] = set()
        self.running: dict[int, JobRun] = {}  # jobs with every pod running, by seq

    def on_start(self, engine: Engine, run: JobRun, positions: tuple[int, ...]) -> None:
        if run.status is JobStatus.RUNNING:
            self.running[run.seq] = run
        for victim in self.preemptors.pop(run.seq, []):
            self.draining.discard(victim)  # found room: the remaining evictions are called off

    def on_unbind(self, engine: Engine, run: JobRun, position: int) -> None:
        self.running.pop(run.seq, None)

    def after_batch(self, engine: Engine) -> None:
        if not len(engine.queue):
            return
        running = [run for run in self.running.values() if self._candidate(run)]
        if not running:
            return
        lowest = min(run.spec.priority for run in running)
        units = [
            unit
            for unit in engine.queue.units()
            if unit.job.priority > lowest and unit.epoch == engine.runs[unit.seq].epoch
        ]
        if not units:
            return
        units.sort(key=engine.queue.order.key)
        work = engine.state.copy()
        evict_now: list[JobRun] = []
        for unit in units:
            if unit.seq in self.preemptors or engine.runs[unit.seq].status is not JobStatus.WAITING:
                continue
            victims = self._choose(engine, unit, work, running)
            if victims is None:
                continue
            self.preemptors[unit.seq] = [victim.seq for victim in victims]
            running = [run for run in running if run not in victims]
            for victim in victims:
                self.draining.add(victim.seq)
                delay = min(self.checkpoints.release_in(engine, victim), self.config.grace)
                if delay <= 0:
                    evict_now.append(victim)
                else:
                    engine.schedule_timer(engine.now + delay, _Release(self, victim, unit.seq, victim.epoch))
        for victim in evict_now:
            self.evict(engine, victim)
        if evict_now:
            engine.wake()

    def evict(self, engine: Engine, victim: JobRun) -> None:
        self.draining.discard(victim.seq)
        self.checkpoints.cut(engine, victim)
        self.preemptions += 1
        engine.evict(victim)

    def _candidate(self, run: JobRun) -> bool:
        return (
            run.status is JobStatus.RUNNING
            and run.seq not in self.draining
            and self.checkpoints.tracked(run) is not None
            and run.bound_count == len(run.bound)
        )

    def _choose(self, engine: Engine, unit: Unit, work: ClusterState, running: list[JobRun]) -> list[JobRun] | None:
        """Victims whose release lets the policy place `unit` on `work`; binds the unit there. None: no such set."""
        policy = engine.policy
        if _fits(policy, unit, work):
            _place(policy, unit, work)
            return None  # room already (freed by victims chosen for others): no new victims
        cheapest = sorted(
            (run for run in running if run.spec.priority < unit.job.priority),
            key=lambda run: (
                run.spec.priority,
                min(self.checkpoints.release_in(engine, run), self.config.grace),
                self.checkpoints.loss_if_cut(engine, run),
                -(run.start_time or 0.0),
                -run.seq,
            ),
        )
        chosen: list[JobRun] = []
        for run in cheapest[: self.config.max_victims]:
            _release_all(work, run)
            chosen.append(run)
            if _fits(policy, unit, work):
                break
        else:
            for run in chosen:
                _apply_all(work, run)
            return None
        for run in reversed(chosen[:-1]):  # give back victims the unit turns out not to need
            _apply_all(work, run)
            if _fits(policy, unit, work):
                chosen.remove(run)
            else:
                _release_all(work, run)
        _place(policy, unit, work)
        return chosen

    def extras(self, engine: Engine) -> dict[str, Any]:
        grace = self.config.grace
        return {"preemptions": self.preemptions, "grace": "inf" if math.isinf(grace) else grace}


class _Release:
    """Timer: release a draining victim, unless its preemptor found room or the victim changed meanwhile."""

    def __init__(self, preemptor: Preemptor, victim: JobRun, preemptor_seq: int, epoch: int) -> None:
        self.preemptor, self.victim, self.preemptor_seq, self.epoch = preemptor, victim, preemptor_seq, epoch

    def __call__(self, engine: Engine) -> None:
        victims = self.preemptor.preemptors.get(self.preemptor_seq)
        victim = self.victim
        if victims is None or victim.seq not in victims:
            return  # the preemptor started elsewhere
        victims.remove(victim.seq)
        if victim.epoch != self.epoch or victim.status is not JobStatus.RUNNING:
            self.preemptor.draining.discard(victim.seq)  # it ended on its own
        else:
            self.preemptor.evict(engine, victim)
        if not victims:
            del self.preemptor.preemptors[self.preemptor_seq]
        engine.wake()


def _fits(policy: Any, unit: Unit, work: ClusterState) -> bool:
    bindings = policy.place(unit.pods, unit.job, work)
    if bindings is None:
        return False
    for binding, pod in zip(bindings, unit.pods, strict=True):
        work.release(binding, pod)
    return True


def _place(policy: Any, unit: Unit, work: ClusterState) -> None:
    policy.place(unit.pods, unit.job, work)


def _release_all(work: ClusterState, run: JobRun) -> None:
    for position, binding in enumerate(run.bound):
        if binding is not None:
            work.release(binding, run.spec.pods[position])


def _apply_all(work: ClusterState, run: JobRun) -> None:
    for position, binding in enumerate(run.bound):
        if binding is not None:
            work.apply(binding, run.spec.pods[position])


def parse_grace(text: str) -> float:
    """'0', '600', 'inf' -> seconds."""
    value = math.inf if text.strip().lower() in {"inf", "drain"} else float(text)
    if not value >= 0:
        raise ValueError(f"grace must be >= 0 seconds or 'inf', got {text!r}")
    return value


def _top_priority(record: Record) -> str | None:
    classes = record.get("wait_by_priority") or {}
    return max(classes, key=int) if classes else None


def _by_top(key: str) -> Cell:
    def cell(record: Record) -> str:
        top = _top_priority(record)
        value = None if top is None else record["wait_by_priority"][top].get(key)
        return "-" if value is None else format_duration(float(value))

    return cell


def _by_low(key: str) -> Cell:
    def cell(record: Record) -> str:
        classes = record.get("wait_by_priority") or {}
        if not classes:
            return "-"
        return format_duration(float(classes[min(classes, key=int)][key]))

    return cell


PREEMPTION_SECTION = ReportSection(
    "preemption and checkpoints (GPU-hours; waits by priority class)",
    (
        ("preemptions", number("preemptions")),
        ("top-priority wait mean", _by_top("wait_mean")),
        ("top-priority wait p99", _by_top("wait_p99")),
        ("lowest-priority JCT mean", _by_low("jct_mean")),
        ("lost", number("lost_gpu_hours", fmt="{:.1f}")),
        ("restore", number("restore_gpu_hours", fmt="{:.1f}")),
        ("wasted", number("wasted_gpu_hours", fmt="{:.1f}")),
        ("checkpoint saves", number("checkpoint_gpu_hours", fmt="{:.1f}")),
        ("all overhead", number("overhead_gpu_hours", fmt="{:.1f}")),
    ),
    figure="preemption",
)
Checkpoints.section = PREEMPTION_SECTION
