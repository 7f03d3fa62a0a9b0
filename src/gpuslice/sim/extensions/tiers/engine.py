"""The sharing-tier simulator: jobs whose speed changes with their neighbours, on nodes of one mechanism each.

It shares the core's event loop but not the core engine, because the engine's jobs run at a fixed speed
set when they start, while here a time-sliced job slows down whenever a neighbour arrives and speeds up
when it leaves: every change on a GPU re-times the jobs on it (remaining work / new speed). Queue:
priority, then submission; a job shape that did not fit is not tried again in the same pass. Whole-GPU
jobs use whole, empty GPUs of a node (best-fit node); a fractional job goes to the GPU that is fullest
already where it fits (so shared GPUs fill before a new one is opened), trying the plan's node groups in
order. Memory and CPU of the host are not modelled here; the core engine does that.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuslice.sim.core.cluster import Binding
from gpuslice.sim.core.loop import EventLoop
from gpuslice.sim.core.metrics import SimResult, Timeline, percentile, summarize
from gpuslice.sim.core.model import ClusterSpec, JobSpec, SimModelError
from gpuslice.sim.core.runs import JobRun, JobStatus
from gpuslice.sim.core.sections import ReportSection, duration, number
from gpuslice.sim.extensions.tiers.model import GpuSlot, ShareDemand
from gpuslice.sim.extensions.tiers.plans import TierPlan
from gpuslice.units import HOUR

_SUBMIT, _FINISH = 0, 1


@dataclass
class _Job:
    run: JobRun
    demand: ShareDemand | None  # None: a whole-GPU job
    gpus: int
    remaining: float
    speed: float = 1.0
    updated: float = 0.0
    version: int = 0
    slots: tuple[GpuSlot, ...] = ()
    overcommitted: bool = False
    demand_id: int = -1


class TierEngine:
    def __init__(
        self,
        cluster: ClusterSpec,
        jobs: Sequence[JobSpec],
        plan: TierPlan,
        gpu_memory: Mapping[str, int] | None = None,
        trace_name: str = "",
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.cluster, self.plan, self.trace_name, self.progress = cluster, plan, trace_name, progress
        self.slots = [
            [GpuSlot.build(gpu, plan.mechanisms[n], plan.params) for gpu in node.gpus]
            for n, node in enumerate(cluster.nodes)
        ]
        self.flat = [slot for node in self.slots for slot in node]
        self.position = {id(slot): index for index, slot in enumerate(self.flat)}
        self.node_of = [node for node, slots in enumerate(self.slots) for _ in slots]
        self.empties = [sum(slot.empty and slot.takes_whole_jobs for slot in slots) for slots in self.slots]
        self.training = set(plan.training_nodes)
        self.routes = [set(group) for group in plan.fractional_routes]
        # GPUs in equal states (GpuSlot.state_key) accept the same demands: group them under a small integer id,
        # so that "where does this fit?" is one memo lookup per state instead of one fit test per GPU.
        self.key_ids: dict[tuple[Any, ...], int] = {}
        self.key_held: list[float] = []
        self.key_empty: list[bool] = []
        self.kid_of = [self._intern(slot) for slot in self.flat]
        self.members: dict[int, set[int]] = {}
        for index, kid in enumerate(self.kid_of):
            self.members.setdefault(kid, set()).add(index)
        self.demand_ids: dict[ShareDemand, int] = {}
        self.fit_memo: dict[tuple[int, int], bool] = {}
        self.ever_fits: dict[tuple[ShareDemand | None, int], bool] = {}
        self.jobs = [self._job(spec, seq, gpu_memory or {}) for seq, spec in enumerate(jobs)]
        # Per GPU: (busy, held, fractional jobs, their GPU-fault, crash and memory domain sums, shared, over-committed)
        self.contrib = [(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)] * len(self.flat)
        self.totals = [0.0] * 8
        self.dirty: set[int] = set()
        self.loop = EventLoop()
        self.batches = 0
        # Waiting jobs in one heap per shape; a shape that failed stays dead until a job ends (only ends free room).
        self.pending: dict[tuple[Any, ...], list[tuple[tuple[float, float, int], _Job]]] = {}
        self.dead: set[tuple[Any, ...]] = set()
        self.timeline = Timeline()
        self.sums: dict[str, float] = dict.fromkeys(
            ("frac_time", "gpu_domain", "crash", "memory", "shared_gpu_time", "overcommit"), 0.0
        )
        self.sample: dict[str, float] | None = None
        self.last_time = 0.0
        self.done = 0
        for job in self.jobs:
            self._push(job.run.spec.submit, _SUBMIT, job)

    def _job(self, spec: JobSpec, seq: int, gpu_memory: Mapping[str, int]) -> _Job:
        if len(spec.pods) != 1:
            raise SimModelError(f"job {spec.job_id!r}: the sharing-tier simulator takes single-pod jobs only")
        pod = spec.pods[0]
        run = JobRun.new(spec, seq)
        if pod.fractional:
            memory = gpu_memory.get(spec.job_id, int(pod.gpus * self.cluster.nodes[0].gpus[0].memory_mib))
            demand = ShareDemand(pod.gpus, memory)
            demand_id = self.demand_ids.setdefault(demand, len(self.demand_ids))
            return _Job(run, demand, 1, spec.duration, demand_id=demand_id)
        return _Job(run, None, pod.gpu_count, spec.duration)

    @property
    def now(self) -> float:
        return self.loop.now

    def _push(self, at: float, kind: int, payload: Any) -> None:
        self.loop.push(at, kind, payload)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> SimResult:
        self.loop.run(self._apply, self._after_batch)
        if self.progress is not None:
            self.progress(self.done, len(self.jobs))
        return self._result()

    def _apply(self, kind: int, payload: Any) -> None:
        if kind == _SUBMIT:
            self._submit(payload)
        else:
            job, version = payload
            if version == job.version:
                self._finish(job)

    def _after_batch(self) -> None:
        self._pass()
        self._record()
        self.batches += 1
        if self.progress is not None and self.batches % 500 == 0:
            self.progress(self.done, len(self.jobs))

    def _submit(self, job: _Job) -> None:
        if not self._could_ever_fit(job):
            job.run.status = JobStatus.REJECTED
            self.done += 1
            return
        spec = job.run.spec
        heapq.heappush(
            self.pending.setdefault((job.demand, job.gpus), []), ((-spec.priority, spec.submit, job.run.seq), job)
        )

    def _pass(self) -> None:
        """Heads of the live shapes in queue order; place each head that fits, mark a shape dead when it does not."""
        heads = [(queue[0][0], shape) for shape, queue in self.pending.items() if shape not in self.dead]
        heapq.heapify(heads)
        while heads:
            _, shape = heapq.heappop(heads)
            queue = self.pending[shape]
            if not self._place(queue[0][1]):
                self.dead.add(shape)
                continue
            heapq.heappop(queue)
            if queue:
                heapq.heappush(heads, (queue[0][0], shape))
            else:
                del self.pending[shape]

    # -- placement ----------------------------------------------------------------------------
    def _place(self, job: _Job) -> bool:
        if job.demand is None:
            chosen = self._whole_gpus(job.gpus)
            if chosen is None:
                return False
            for slot in chosen:
                slot.hold(job.run.seq)
                self._touch(slot)
            self._start(job, tuple(chosen))
            return True
        for route in self.routes:
            best: tuple[tuple[Any, ...], int] | None = None
            for kid, members in self.members.items():
                if not members or not self._fits(kid, job.demand_id, job.demand):
                    continue
                empty, held = self.key_empty[kid], self.key_held[kid]
                for index in members:
                    node = self.node_of[index]
                    if node in route:
                        key = (empty, -held, self.empties[node], node, index)
                        if best is None or key < best[0]:
                            best = (key, index)
            if best is not None:
                slot = self.flat[best[1]]
                share = slot.fit(job.run.seq, job.demand)
                assert share is not None
                slot.add(share)
                self._touch(slot)
                self._start(job, (slot,))
                self._retime(slot, exclude=job)
                return True
        return False

    def _intern(self, slot: GpuSlot) -> int:
        key = slot.state_key()
        kid = self.key_ids.get(key)
        if kid is None:
            kid = self.key_ids[key] = len(self.key_ids)
            self.key_held.append(slot.held())
            self.key_empty.append(slot.empty)
        return kid

    def _touch(self, slot: GpuSlot) -> None:
        """`slot` changed: regroup it by state, resample it at the next record, recount its node's empty GPUs."""
        index = self.position[id(slot)]
        kid = self._intern(slot)
        if kid != self.kid_of[index]:
            self.members[self.kid_of[index]].discard(index)
            self.members.setdefault(kid, set()).add(index)
            self.kid_of[index] = kid
        self.dirty.add(index)
        node = self.node_of[index]
        self.empties[node] = sum(s.empty and s.takes_whole_jobs for s in self.slots[node])

    def _fits(self, kid: int, demand_id: int, demand: ShareDemand) -> bool:
        """Whether GPUs in state `kid` (it must have members) take `demand`, memoized."""
        known = self.fit_memo.get((kid, demand_id))
        if known is None:
            example = self.flat[next(iter(self.members[kid]))]
            known = self.fit_memo[(kid, demand_id)] = example.fit(-1, demand) is not None
        return known

    def _whole_gpus(self, count: int) -> list[GpuSlot] | None:
        best: tuple[int, int] | None = None
        for node in self.plan.training_nodes:
            free = self.empties[node]
            if free >= count and (best is None or free < best[0]):
                best = (free, node)
        if best is None:
            return None
        return [slot for slot in self.slots[best[1]] if slot.empty and slot.takes_whole_jobs][:count]

    def _could_ever_fit(self, job: _Job) -> bool:
        """Whether the job fits the empty cluster (memoized per shape: the plan never changes)."""
        shape = (job.demand, job.gpus)
        known = self.ever_fits.get(shape)
        if known is None:
            known = self.ever_fits[shape] = self._fits_empty_cluster(job)
        return known

    def _fits_empty_cluster(self, job: _Job) -> bool:
        if job.demand is None:
            return any(sum(s.takes_whole_jobs for s in self.slots[n]) >= job.gpus for n in self.plan.training_nodes)
        routed = {node for route in self.routes for node in route}
        for node in sorted(routed):
            for slot in self.slots[node]:
                if GpuSlot.build(slot.gpu, slot.mechanism, slot.params).fit(-1, job.demand) is not None:
                    return True
        return False

    # -- running ------------------------------------------------------------------------------
    def _start(self, job: _Job, slots: tuple[GpuSlot, ...]) -> None:
        job.slots = slots
        if len(job.run.placement) == 1:  # one pod: record its node and GPUs for jobs.csv
            node = self.node_of[self.position[id(slots[0])]]
            gpus = tuple(i for i, slot in enumerate(self.slots[node]) if any(slot is mine for mine in slots))
            job.run.placement[0] = Binding(node, gpus)
        job.run.first_start = self.now
        job.run.start_time = self.now
        job.run.status = JobStatus.RUNNING
        job.updated = self.now
        job.speed = slots[0].speed() if job.demand is not None else 1.0
        self._schedule_finish(job)

    def _schedule_finish(self, job: _Job) -> None:
        job.version += 1
        self._push(self.now + job.remaining / job.speed, _FINISH, (job, job.version))

    def _retime(self, slot: GpuSlot, exclude: _Job | None = None) -> None:
        """The jobs on `slot` changed: book each one's progress at its old speed and re-time its end."""
        speed = slot.speed()
        for seq in slot.shares:
            job = self.jobs[seq]
            if job is exclude or job.speed == speed:
                continue
            job.remaining = max(0.0, job.remaining - job.speed * (self.now - job.updated))
            job.updated = self.now
            job.speed = speed
            self._schedule_finish(job)

    def _finish(self, job: _Job) -> None:
        for slot in job.slots:
            slot.remove(job.run.seq)
            self._touch(slot)
        self.dead.clear()  # room was freed: every shape may fit again
        job.run.end_time = self.now
        job.run.status = JobStatus.DONE
        job.version += 1
        self.done += 1
        if job.demand is not None:
            self._retime(job.slots[0])

    # -- metrics ------------------------------------------------------------------------------
    def _record(self) -> None:
        span = self.now - self.last_time
        if self.sample is not None and span > 0:
            for key, value in self.sample.items():
                self.sums[key] += span * value
        self.last_time = self.now
        for index in self.dirty:  # only GPUs whose jobs changed since the last sample
            slot = self.flat[index]
            new = self._contribution(slot)
            self.totals = [
                total - old + fresh for total, old, fresh in zip(self.totals, self.contrib[index], new, strict=True)
            ]
            self.contrib[index] = new
            if new[7]:
                for seq in slot.shares:
                    self.jobs[seq].overcommitted = True
        self.dirty.clear()
        busy, held, *rest = self.totals
        self.sample = dict(
            zip(("frac_time", "gpu_domain", "crash", "memory", "shared_gpu_time", "overcommit"), rest, strict=True)
        )
        stranded = self._stranded() if self.pending else 0.0
        queued = sum(len(queue) for queue in self.pending.values())
        self.timeline.record(self.now, busy, busy, held, stranded, queued)

    @staticmethod
    def _contribution(slot: GpuSlot) -> tuple[float, float, float, float, float, float, float, float]:
        count = len(slot.shares)
        if not count:
            return (slot.busy(), slot.held(), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return (
            slot.busy(),
            slot.held(),
            count,
            count * count,
            count * slot.crash_domain(),
            count * slot.memory_domain(),
            1.0,
            1.0 if slot.memory_overcommitted() else 0.0,
        )

    def _stranded(self) -> float:
        """Free GPU capacity (in GPUs) on GPUs where no waiting job could be placed now."""
        heads = [queue[0][1] for queue in self.pending.values()]
        fractional = [(job.demand_id, job.demand) for job in heads if job.demand is not None]
        whole = [job.gpus for job in heads if job.demand is None]
        total = 0.0
        for kid, members in self.members.items():
            free = 1.0 - self.key_held[kid]
            if not members or free <= 1e-9 or any(self._fits(kid, did, demand) for did, demand in fractional):
                continue
            for index in members:
                node = self.node_of[index]
                if whole and self.key_empty[kid] and node in self.training and self.empties[node] >= min(whole):
                    continue
                total += free
        return total

    def _result(self) -> SimResult:
        runs = [job.run for job in self.jobs]
        sums = self.sums
        frac = sums["frac_time"]
        extras: dict[str, Any] = {
            "jobs_per_shared_gpu": round(frac / sums["shared_gpu_time"], 3) if sums["shared_gpu_time"] else 0.0,
            "gpu_fault_domain_jobs": round(sums["gpu_domain"] / frac, 3) if frac else 0.0,
            "crash_domain_jobs": round(sums["crash"] / frac, 3) if frac else 0.0,
            "memory_domain_jobs": round(sums["memory"] / frac, 3) if frac else 0.0,
            "memory_overcommit_gpu_hours": round(sums["overcommit"] / HOUR, 3),
            "oom_exposed_jobs": sum(job.overcommitted for job in self.jobs),
            "fractional_gpu_hours_held": round(sums["shared_gpu_time"] / HOUR, 3),
            "by_kind": self._by_kind(),
        }
        total_gpus = self.cluster.total_gpus
        return summarize(
            self.plan.name,
            self.trace_name,
            runs,
            self.timeline,
            total_gpus,
            0,
            extras,
            (SHARING_SECTION,),
            tuple(node.name for node in self.cluster.nodes),
        )

    def _by_kind(self) -> dict[str, dict[str, float]]:
        table: dict[str, dict[str, float]] = {}
        for kind, members in (
            ("inference", [j for j in self.jobs if j.demand]),
            ("training", [j for j in self.jobs if not j.demand]),
        ):
            waits = [j.run.wait for j in members if j.run.wait is not None]
            stretch = [
                (j.run.end_time - j.run.start_time) / j.run.spec.duration
                for j in members
                if j.run.end_time is not None and j.run.start_time is not None
            ]
            table[kind] = {
                "jobs": len(members),
                "completed": len(stretch),
                "wait_p50": round(percentile(waits, 50), 3),
                "wait_p99": round(percentile(waits, 99), 3),
                "run_time_stretch": round(float(np.mean(stretch)) if stretch else 0.0, 4),
            }
        return table


SHARING_SECTION = ReportSection(
    "sharing tiers (fault domains: mean jobs per domain, seen from each fractional job)",
    (
        ("GPU util", number("gpu_utilization", fmt="{:.1%}")),
        ("GPUs held", number("gpu_allocation", fmt="{:.1%}")),
        ("jobs per shared GPU", number("jobs_per_shared_gpu", fmt="{:.2f}")),
        ("GPU-fault domain", number("gpu_fault_domain_jobs", fmt="{:.2f}")),
        ("crash domain", number("crash_domain_jobs", fmt="{:.2f}")),
        ("memory domain", number("memory_domain_jobs", fmt="{:.2f}")),
        ("mem over-commit GPU-h", number("memory_overcommit_gpu_hours", fmt="{:.1f}")),
        ("OOM-exposed jobs", number("oom_exposed_jobs")),
        ("inference wait p99", duration("by_kind", "inference", "wait_p99")),
        ("inference stretch", number("by_kind", "inference", "run_time_stretch", fmt="{:.3f}")),
        ("training wait p99", duration("by_kind", "training", "wait_p99")),
    ),
    figure="sharing",
)
