"""Run metrics: time series of busy, held and stranded GPUs, stranded-GPU counting, and the run summary."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuslice.sim.core.cluster import ClusterState, IntArray
from gpuslice.sim.core.model import PodSpec
from gpuslice.sim.core.runs import JobRun, JobStatus
from gpuslice.sim.core.sections import ReportSection
from gpuslice.units import MILLI

FloatArray = npt.NDArray[np.float64]


class Timeline:
    """Step functions sampled after every scheduling pass: each value holds until the next sample."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.busy: list[float] = []  # GPUs used by running pods
        self.useful: list[float] = []  # the same, each divided by its job's cross-island slowdown
        self.held: list[float] = []  # GPUs bound to pods (running, or held by a waiting gang)
        self.stranded: list[float] = []  # see stranded_gpus
        self.queued: list[int] = []  # jobs submitted and admitted that wait for a pod to start

    def record(self, time: float, busy: float, useful: float, held: float, stranded: float, queued: int = 0) -> None:
        if self.times and self.times[-1] == time:
            self.busy[-1], self.useful[-1], self.held[-1], self.stranded[-1] = busy, useful, held, stranded
            self.queued[-1] = queued
            return
        self.times.append(time)
        self.busy.append(busy)
        self.useful.append(useful)
        self.held.append(held)
        self.stranded.append(stranded)
        self.queued.append(queued)

    def mean(self, series: Sequence[float], start: float, end: float) -> float:
        """Time-weighted mean of `series` over [start, end] (0 for an empty window)."""
        if end <= start or not self.times:
            return 0.0
        times = np.clip(np.asarray([*self.times, end], dtype=np.float64), start, end)
        return float(np.dot(np.diff(times), np.asarray(series, dtype=np.float64)) / (end - start))

    def peak(self, series: Sequence[float]) -> float:
        return float(max(series, default=0.0))


@dataclass(frozen=True)
class PendingDemand:
    """The distinct pending pods as columns, ready to compare against every node at once."""

    need_full: IntArray  # whole GPUs needed (0 for a fraction)
    need_share: IntArray  # milli-GPU needed on one GPU (0 for whole GPUs)
    cpu: IntArray
    memory: IntArray
    constrained: tuple[PodSpec, ...]  # pods with a GPU-model rule, checked one by one

    @classmethod
    def of(cls, pending: Iterable[Sequence[PodSpec]]) -> PendingDemand | None:
        pods = {pod for shape in pending for pod in shape}
        if not pods:
            return None
        plain = [pod for pod in pods if pod.gpu_model is None]

        def column(values: list[int]) -> IntArray:
            return np.array(values, dtype=np.int64)[:, None]

        return cls(
            column([pod.gpu_count if pod.gpu_milli == MILLI else 0 for pod in plain]),
            column([pod.gpu_milli if 0 < pod.gpu_milli < MILLI else 0 for pod in plain]),
            column([pod.cpu_milli for pod in plain]),
            column([pod.memory_mib for pod in plain]),
            tuple(pod for pod in pods if pod.gpu_model is not None),
        )


def stranded_gpus(state: ClusterState, demand: PendingDemand | None) -> float:
    """Free GPU capacity (in GPUs) on nodes where no pending pod fits; 0 when nothing is pending.

    A node's free GPUs are stranded when some work is waiting but not one waiting pod could be placed on
    that node: its free GPUs are too few or too fragmented (fractions spread over several GPUs), or its
    CPU, memory or GPU model rule every waiting pod out. Free GPUs on a node where a waiting pod fits are
    not stranded, even if that pod's gang as a whole cannot start yet: that is queueing, not stranding.
    """
    if demand is None:
        return 0.0
    usable = (
        (state.full_free >= demand.need_full)
        & (state.max_free >= demand.need_share)
        & (state.cpu_free >= demand.cpu)
        & (state.memory_free >= demand.memory)
    ).any(axis=0)
    for pod in demand.constrained:
        usable |= state.fit_mask(pod)
    return float(state.free_milli[~usable].sum()) / MILLI


def percentile(values: Sequence[float] | FloatArray, q: float) -> float:
    """The q-th percentile with linear interpolation (numpy's default); 0 when there are no values."""
    return float(np.percentile(values, q)) if len(values) else 0.0


@dataclass
class SimResult:
    """One policy on one trace. `summary()` is the JSON record; the arrays feed plots."""

    policy: str
    trace: str
    jobs_total: int
    jobs_completed: int
    jobs_rejected: int
    jobs_deadlocked: int
    partial_allocation_deadlocks: int
    gpu_utilization: float
    gpu_goodput: float
    gpu_allocation: float
    wait_p50: float
    wait_p99: float
    wait_mean: float
    jct_mean: float
    jct_p50: float
    stranded_gpus: float
    stranded_gpus_peak: float
    makespan: float
    cross_island_jobs: int
    evictions: int
    total_gpus: int
    wait_by_gpus: dict[str, dict[str, float]]
    times: FloatArray = field(repr=False)
    utilization_series: FloatArray = field(repr=False)
    waits: FloatArray = field(repr=False)
    extras: dict[str, Any] = field(default_factory=dict)  # the attached extensions' metrics
    sections: tuple[ReportSection, ...] = ()  # the attached extensions' report sections
    jobs_started: int = 0  # jobs whose pods all started at least once (the waits are theirs)
    runs: tuple[JobRun, ...] = field(default=(), repr=False)  # per-job records for jobs.csv
    timeline: Timeline = field(default_factory=Timeline, repr=False)  # the step series for timeline.csv
    node_names: tuple[str, ...] = field(default=(), repr=False)  # node index -> name, for jobs.csv

    @property
    def jobs_unfinished(self) -> int:
        """Jobs admitted that never completed: still waiting or running when the run ended, or deadlocked."""
        return self.jobs_total - self.jobs_completed - self.jobs_rejected

    def summary(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "policy": self.policy,
            "gpu_utilization": round(self.gpu_utilization, 6),
            "wait_p50": round(self.wait_p50, 3),
            "wait_p99": round(self.wait_p99, 3),
            "stranded_gpus": round(self.stranded_gpus, 4),
            "partial_allocation_deadlocks": self.partial_allocation_deadlocks,
            "jobs_completed": self.jobs_completed,
            "makespan": round(self.makespan, 3),
        }
        record.update(
            jobs_total=self.jobs_total,
            jobs_rejected=self.jobs_rejected,
            jobs_deadlocked=self.jobs_deadlocked,
            jobs_started=self.jobs_started,
            jobs_unfinished=self.jobs_unfinished,
            gpu_goodput=round(self.gpu_goodput, 6),
            gpu_allocation=round(self.gpu_allocation, 6),
            wait_mean=round(self.wait_mean, 3),
            jct_mean=round(self.jct_mean, 3),
            jct_p50=round(self.jct_p50, 3),
            stranded_gpus_peak=round(self.stranded_gpus_peak, 4),
            cross_island_jobs=self.cross_island_jobs,
            evictions=self.evictions,
            wait_by_gpus=self.wait_by_gpus,
        )
        record.update(self.extras)
        return record


def summarize(
    policy: str,
    trace: str,
    runs: Sequence[JobRun],
    timeline: Timeline,
    total_gpus: int,
    deadlocks: int,
    extras: dict[str, Any] | None = None,
    sections: tuple[ReportSection, ...] = (),
    node_names: Sequence[str] = (),
) -> SimResult:
    """Reduce a finished run to its metrics (definitions in docs/simulator.md)."""
    start = min((run.spec.submit for run in runs), default=0.0)
    end = timeline.times[-1] if timeline.times else start
    started = [run for run in runs if run.start_time is not None]
    done = [run for run in runs if run.status is JobStatus.DONE]
    waits = np.array([run.wait for run in started], dtype=np.float64)
    jcts = np.array([run.completion_time for run in done], dtype=np.float64)
    last_end = max((run.end_time for run in done if run.end_time is not None), default=start)
    by_size: dict[float, list[float]] = {}
    for run in started:
        by_size.setdefault(run.spec.gpus, []).append(run.wait or 0.0)
    wait_by_gpus = {
        f"{size:g}": {
            "jobs": len(values),
            "p50": round(percentile(values, 50), 3),
            "p99": round(percentile(values, 99), 3),
        }
        for size, values in sorted(by_size.items())
    }
    capacity = max(total_gpus, 1)
    return SimResult(
        policy=policy,
        trace=trace,
        jobs_total=len(runs),
        jobs_completed=len(done),
        jobs_rejected=sum(run.status is JobStatus.REJECTED for run in runs),
        jobs_deadlocked=sum(run.status is JobStatus.DEADLOCKED for run in runs),
        partial_allocation_deadlocks=deadlocks,
        gpu_utilization=timeline.mean(timeline.busy, start, end) / capacity,
        gpu_goodput=timeline.mean(timeline.useful, start, end) / capacity,
        gpu_allocation=timeline.mean(timeline.held, start, end) / capacity,
        wait_p50=percentile(waits, 50),
        wait_p99=percentile(waits, 99),
        wait_mean=float(waits.mean()) if len(waits) else 0.0,
        jct_mean=float(jcts.mean()) if len(jcts) else 0.0,
        jct_p50=percentile(jcts, 50),
        stranded_gpus=timeline.mean(timeline.stranded, start, end),
        stranded_gpus_peak=timeline.peak(timeline.stranded),
        makespan=last_end - start if done else 0.0,
        cross_island_jobs=sum(run.cross_island for run in runs),
        evictions=sum(run.evictions for run in runs),
        total_gpus=total_gpus,
        wait_by_gpus=wait_by_gpus,
        times=np.asarray(timeline.times, dtype=np.float64),
        utilization_series=np.asarray(timeline.busy, dtype=np.float64) / capacity,
        waits=waits,
        extras=dict(extras or {}),
        sections=sections,
        jobs_started=len(started),
        runs=tuple(runs),
        timeline=timeline,
        node_names=tuple(node_names),
    )
