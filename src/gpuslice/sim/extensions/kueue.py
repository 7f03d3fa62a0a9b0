"""Kueue-style admission with waitForPodsReady: admit, wait for every pod to run, else evict and requeue with backoff.

Kueue admits a workload (a job) when its GPU request fits the ClusterQueue's quota; only then are its
pods created and scheduled, one by one, by the ordinary scheduler (the engine, with a pod-by-pod policy).
If not every pod is running `timeout` seconds after admission, the workload is evicted (its pods
unbound, its quota returned) and requeued after a backoff: the n-th requeue waits
min(base x 2^(n-1) x (1 + jitter x U), max) seconds, U uniform in [0, 1) from the run's seeded RNG
(Kueue: 60 s, 120 s, 240 s, ... capped at 3600 s, jitter 0.0001). With `backoff_limit` set, a workload
evicted that many times is deactivated. `block_admission` admits one workload at a time until its pods
are all running. Queue order in Kueue: priority, then the eviction (or creation) time.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from gpuslice.sim.core.engine import Engine, Listener
from gpuslice.sim.core.runs import JobRun, JobStatus
from gpuslice.sim.core.sections import ReportSection, duration, number


@dataclass(frozen=True)
class KueueConfig:
    timeout: float = 300.0  # waitForPodsReady.timeout (5 min)
    backoff_base: float = 60.0  # requeuingStrategy.backoffBaseSeconds
    backoff_max: float = 3600.0  # requeuingStrategy.backoffMaxSeconds
    backoff_limit: int | None = None  # requeuingStrategy.backoffLimitCount (None: requeue forever)
    jitter: float = 0.0001
    block_admission: bool = False
    quota_gpus: float | None = None  # None: the cluster's GPU count

    def __post_init__(self) -> None:
        if not self.timeout > 0 or not self.backoff_base > 0 or self.backoff_max < self.backoff_base:
            raise ValueError("timeout and backoff base must be positive and backoff max >= base")
        if self.backoff_limit is not None and self.backoff_limit < 0:
            raise ValueError(f"backoff limit must be >= 0, got {self.backoff_limit}")
        if self.quota_gpus is not None and not self.quota_gpus > 0:
            raise ValueError(f"quota must be positive, got {self.quota_gpus}")

    def backoff(self, requeues: int, draw: float = 0.0) -> float:
        """Seconds before the `requeues`-th requeue (1-based), for a uniform draw in [0, 1)."""
        if requeues < 1:
            raise ValueError(f"requeue count starts at 1, got {requeues}")
        exponent = min(requeues - 1, 64)  # 2^64 x base is far past any cap
        return min(self.backoff_base * 2.0**exponent * (1 + self.jitter * draw), self.backoff_max)


class Kueue(Listener):
    """Admission, the pods-ready timeout and the requeue backoff, on top of any pod-by-pod placement policy."""

    def __init__(self, config: KueueConfig | None = None) -> None:
        self.config = config or KueueConfig()
        self.quota = 0.0
        self.used = 0.0
        self.waiting: list[tuple[int, float, int, JobRun]] = []  # (-priority, queue timestamp, seq, run)
        self.admitted: dict[int, int] = {}  # seq -> admission number (voids stale timeout timers)
        self.unready: set[int] = set()  # admitted, not every pod running yet
        self.requeues: dict[int, int] = {}
        self.admissions = 0
        self.timeouts = 0
        self.deactivated = 0
        self._holding: int | None = None  # a job being evicted: it must not be re-admitted at once

    # -- admission ----------------------------------------------------------------------------
    def gate(self, engine: Engine, run: JobRun) -> bool:
        if run.seq in self.admitted:
            return True
        if run.seq == self._holding:
            return False
        heapq.heappush(self.waiting, (-run.spec.priority, engine.now, run.seq, run))
        self._admit(engine)
        return False

    def _admit(self, engine: Engine) -> None:
        if not self.quota:
            self.quota = self.config.quota_gpus or float(engine.state.total_gpus)
        while self.waiting:
            if self.config.block_admission and self.unready:
                return
            run = self.waiting[0][3]
            if self.used + run.spec.gpus > self.quota + 1e-9:
                return  # Kueue's StrictFIFO: the head blocks the queue
            heapq.heappop(self.waiting)
            self.used += run.spec.gpus
            self.admissions += 1
            self.admitted[run.seq] = self.admissions
            self.unready.add(run.seq)
            engine.release_to_queue(run)
            engine.schedule_timer(engine.now + self.config.timeout, _Timeout(self, run, self.admissions))

    # -- readiness, timeouts, release ---------------------------------------------------------
    def on_start(self, engine: Engine, run: JobRun, positions: tuple[int, ...]) -> None:
        if run.status is JobStatus.RUNNING and run.seq in self.unready:
            self.unready.discard(run.seq)
            if self.config.block_admission:
                engine.schedule_timer(engine.now, self._readmit)

    def on_done(self, engine: Engine, run: JobRun) -> None:
        if self.admitted.pop(run.seq, None) is not None:
            self.used -= run.spec.gpus
            self.unready.discard(run.seq)
            self._admit(engine)

    def _readmit(self, engine: Engine) -> None:
        self._admit(engine)

    def expire(self, engine: Engine, run: JobRun, admission: int) -> None:
        if self.admitted.get(run.seq) != admission or run.seq not in self.unready:
            return  # ready in time, or a later admission
        self.timeouts += 1
        del self.admitted[run.seq]
        self.unready.discard(run.seq)
        self.used -= run.spec.gpus
        count = self.requeues[run.seq] = self.requeues.get(run.seq, 0) + 1
        if self.config.backoff_limit is not None and count > self.config.backoff_limit:
            self._holding = run.seq
            try:
                engine.evict(run)
            finally:
                self._holding = None
            self.deactivated += 1
            engine.settle(run, JobStatus.REJECTED)
        else:
            # After the backoff the engine queues it again, which brings it back here through the gate.
            engine.evict(run, requeue_after=self.config.backoff(count, float(engine.rng.random())))
        self._admit(engine)

    def extras(self, engine: Engine) -> dict[str, Any]:
        return {
            "admissions": self.admissions,
            "pods_ready_timeouts": self.timeouts,
            "requeues": sum(self.requeues.values()),
            "deactivated": self.deactivated,
        }


class _Timeout:
    def __init__(self, kueue: Kueue, run: JobRun, admission: int) -> None:
        self.kueue, self.run, self.admission = kueue, run, admission

    def __call__(self, engine: Engine) -> None:
        self.kueue.expire(engine, self.run, self.admission)


KUEUE_SECTION = ReportSection(
    "Kueue admission (waitForPodsReady)",
    (
        ("admissions", number("admissions")),
        ("pods-ready timeouts", number("pods_ready_timeouts")),
        ("requeues", number("requeues")),
        ("deactivated", number("deactivated")),
        ("GPUs held", number("gpu_allocation", fmt="{:.1%}")),
        ("makespan", duration("makespan")),
    ),
)
Kueue.section = KUEUE_SECTION
