"""The discrete-event engine: a heap of events with a sequence tie-break, scheduling passes, job lifecycles."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuslice.sim.cluster import ClusterState
from gpuslice.sim.deadlock import find_deadlocked
from gpuslice.sim.metrics import Demand, SimResult, Timeline, stranded_gpus, summarize
from gpuslice.sim.model import MILLI, ClusterSpec, JobSpec, PodSpec
from gpuslice.sim.policies.base import PlacementPolicy, first_fitting, place_all
from gpuslice.sim.queue import PendingQueue, PriorityOrder, QueueOrder, Unit
from gpuslice.sim.runs import JobRun, JobStatus

_SUBMIT, _FINISH, _TIMER = 0, 1, 2

Observer = Callable[["Engine"], None]
Progress = Callable[[int, int], None]


def _milli(pod: PodSpec) -> int:
    return pod.gpu_count * pod.gpu_milli


@dataclass(frozen=True)
class SimConfig:
    """Knobs of one run.

    cross_island_penalty: a gang job whose pods span more than one NVLink island runs (1 + penalty) times
    longer (0.3 = 30 % slower); it applies whatever the policy, which is why topology-aware placement pays.
    seed: seeds `Engine.rng`, the only randomness a policy or extension may use, so runs are reproducible.
    """

    cross_island_penalty: float = 0.3
    seed: int = 0
    progress_every: int = 2000  # event batches between progress callbacks

    def __post_init__(self) -> None:
        if self.cross_island_penalty < 0:
            raise ValueError(f"cross_island_penalty must be >= 0, got {self.cross_island_penalty}")


class Engine:
    """Runs one policy on one cluster and trace.

    Events at the same time are applied in sequence order as one batch; then one scheduling pass tries
    the pending units in queue order; then metrics are sampled and, if a gang gained pods without
    starting, deadlock detection runs. Extensions hook in through `schedule_timer`, `evict`, the queue
    order, and `observer` (called after every batch).
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        jobs: Sequence[JobSpec],
        policy: PlacementPolicy,
        order: QueueOrder | None = None,
        config: SimConfig | None = None,
        observer: Observer | None = None,
        progress: Progress | None = None,
        trace_name: str = "",
        skip_dead_shapes: bool = True,
    ) -> None:
        self.config = config or SimConfig()
        self.cluster = cluster
        self.policy = policy
        self.state = ClusterState(cluster)
        self.queue = PendingQueue(order or PriorityOrder(), skip_dead_shapes)
        # Bound GPU milli, CPU milli and memory MiB per tenant (for fairness orders such as DRF).
        self.tenant_usage: dict[str, list[int]] = {}
        self.rng = np.random.default_rng(self.config.seed)
        self.runs = [JobRun.new(job, seq) for seq, job in enumerate(jobs)]
        self.now = 0.0
        # Counted in milli-GPU so that sums of fractions never drift; `useful` is busy / slowdown.
        self.busy_milli = 0
        self.held_milli = 0
        self.useful_gpus = 0.0
        self.timeline = Timeline()
        self.deadlocks = 0
        self.holders: dict[int, JobRun] = {}  # gang jobs holding some but not all pods
        self.deadlocked: dict[int, JobRun] = {}
        self._holders_grew = False
        self._events: list[tuple[float, int, int, Any]] = []
        self._event_seq = 0
        self._observer = observer
        self._progress = progress
        self._trace_name = trace_name
        self._settled = 0  # jobs done, rejected or deadlocked
        self._fits_empty: dict[tuple[Any, ...], bool] = {}
        self._demand_version = -1
        self._demand_cache: Demand | None = None
        for run in self.runs:
            self._push(run.spec.submit, _SUBMIT, run)
        self.queue.order.attach(self)

    # -- extension API ------------------------------------------------------------------------
    def schedule_timer(self, at: float, callback: Callable[[Engine], None]) -> None:
        """Call `callback(engine)` at time `at` (before that moment's scheduling pass)."""
        self._push(max(at, self.now), _TIMER, callback)

    def evict(self, run: JobRun, requeue_after: float = 0.0) -> None:
        """Unbind every pod of a waiting or running job and queue it again from scratch, now or after a delay."""
        if run.status not in (JobStatus.WAITING, JobStatus.RUNNING, JobStatus.DEADLOCKED):
            raise ValueError(f"job {run.spec.job_id!r} is {run.status.value}; only live jobs can be evicted")
        for position, binding in enumerate(run.bound):
            if binding is not None:
                self._unbind(run, position)
        run.epoch += 1  # voids its pending finish events and queued units
        run.evictions += 1
        run.start_time = None
        run.started_pods = 0
        run.finished_pods = 0
        if run.status is JobStatus.DEADLOCKED:
            self._settled -= 1
        run.status = JobStatus.WAITING
        self.holders.pop(run.seq, None)
        self.deadlocked.pop(run.seq, None)
        self.queue.remove(lambda unit: unit.seq == run.seq)
        if requeue_after > 0:
            epoch = run.epoch
            self.schedule_timer(self.now + requeue_after, lambda engine: engine._requeue(run, epoch))
        else:
            self._enqueue(run)

    def _requeue(self, run: JobRun, epoch: int) -> None:
        if run.epoch == epoch and run.status is JobStatus.WAITING and run.bound_count == 0:
            self._enqueue(run)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> SimResult:
        batches = 0
        while self._events:
            self.now = self._events[0][0]
            while self._events and self._events[0][0] == self.now:
                _, _, kind, payload = heapq.heappop(self._events)
                if kind == _SUBMIT:
                    self._submit(payload)
                elif kind == _FINISH:
                    self._finish(*payload)
                else:
                    payload(self)
            self.queue.run_pass(self._try_place)
            if self._holders_grew:
                self._detect_deadlocks()
            stranded = stranded_gpus(self.state, self._demand()) if len(self.queue) else 0.0
            self.timeline.record(self.now, self.busy_milli / MILLI, self.useful_gpus, self.held_milli / MILLI, stranded)
            if self._observer is not None:
                self._observer(self)
            batches += 1
            if self._progress is not None and batches % self.config.progress_every == 0:
                self._progress(self._settled, len(self.runs))
        if self._progress is not None:
            self._progress(self._settled, len(self.runs))
        return summarize(
            self.policy.name, self._trace_name, self.runs, self.timeline, self.state.total_gpus, self.deadlocks
        )

    def _demand(self) -> Demand | None:
        """The pending pods as arrays for stranded_gpus, rebuilt only when the set of pending shapes changes."""
        if self._demand_version != self.queue.shapes_version:
            self._demand_version = self.queue.shapes_version
            self._demand_cache = Demand.of(self.queue.shapes())
        return self._demand_cache

    def _push(self, at: float, kind: int, payload: Any) -> None:
        self._event_seq += 1
        heapq.heappush(self._events, (at, self._event_seq, kind, payload))

    # -- arrivals -----------------------------------------------------------------------------
    def _submit(self, run: JobRun) -> None:
        if not self._fits_on_empty_cluster(run.spec):
            run.status = JobStatus.REJECTED
            self._settled += 1
            return
        self._enqueue(run)

    def _enqueue(self, run: JobRun) -> None:
        spec = run.spec
        missing = tuple(position for position, binding in enumerate(run.bound) if binding is None)
        if spec.gang and self.policy.all_or_nothing and len(missing) > 1:
            groups = [missing]
        else:
            groups = [(position,) for position in missing]
        for group in groups:
            pods = tuple(spec.pods[position] for position in group)
            self.queue.push(Unit(spec, run.seq, group, pods, run.epoch))

    def _fits_on_empty_cluster(self, spec: JobSpec) -> bool:
        """Reject what could never run: a pod no node can hold, or a gang the empty cluster cannot hold at once."""
        key = (spec.pods, spec.gang)
        known = self._fits_empty.get(key)
        if known is None:
            if spec.gang and len(spec.pods) > 1:
                known = place_all(spec.pods, self.state.fresh(), first_fitting) is not None
            else:
                known = all(self.state.fits_empty(pod) for pod in spec.pods)
            self._fits_empty[key] = known
        return known

    # -- placement ----------------------------------------------------------------------------
    def _try_place(self, unit: Unit) -> bool:
        run = self.runs[unit.seq]
        if unit.epoch != run.epoch or run.status is not JobStatus.WAITING:
            return True  # a stale unit (evicted or deadlocked job): drop it as if placed
        bindings = self.policy.place(unit.pods, run.spec, self.state)
        if bindings is None:
            return False
        for position, binding in zip(unit.pod_indices, bindings, strict=True):
            run.bound[position] = binding
            self.held_milli += _milli(run.spec.pods[position])
            self._charge(run, run.spec.pods[position], +1)
        if not run.spec.gang:
            for position in unit.pod_indices:
                self._start(run, (position,), 1.0)
        elif run.bound_count == len(run.bound):
            self.holders.pop(run.seq, None)
            islands = {int(self.state.island_of[binding.node]) for binding in run.bound if binding is not None}
            run.cross_island = len(islands) > 1
            slowdown = 1.0 + self.config.cross_island_penalty if run.cross_island else 1.0
            self._start(run, tuple(range(len(run.bound))), slowdown)
        else:
            self.holders[run.seq] = run
            self._holders_grew = True
        return True

    def _start(self, run: JobRun, positions: tuple[int, ...], slowdown: float) -> None:
        run.slowdown = slowdown
        for position in positions:
            run.pod_start[position] = self.now
            self.busy_milli += _milli(run.spec.pods[position])
            self.useful_gpus += run.spec.pods[position].gpus / slowdown
        run.started_pods += len(positions)
        if run.started_pods == len(run.bound):
            run.start_time = self.now
            run.status = JobStatus.RUNNING
        self._push(self.now + run.spec.duration * slowdown, _FINISH, (run, positions, run.epoch))

    def _charge(self, run: JobRun, pod: PodSpec, sign: int) -> None:
        usage = self.tenant_usage.setdefault(run.spec.tenant, [0, 0, 0])
        usage[0] += sign * _milli(pod)
        usage[1] += sign * pod.cpu_milli
        usage[2] += sign * pod.memory_mib

    # -- completions --------------------------------------------------------------------------
    def _finish(self, run: JobRun, positions: tuple[int, ...], epoch: int) -> None:
        if epoch != run.epoch:
            return  # the job was evicted after this event was scheduled
        for position in positions:
            self._unbind(run, position)
            run.finished_pods += 1
        if run.finished_pods == len(run.bound):
            run.status = JobStatus.DONE
            run.end_time = self.now
            self._settled += 1

    def _unbind(self, run: JobRun, position: int) -> None:
        binding = run.bound[position]
        assert binding is not None
        pod = run.spec.pods[position]
        self.state.release(binding, pod)
        self.held_milli -= _milli(pod)
        self._charge(run, pod, -1)
        if run.pod_start[position] is not None:
            self.busy_milli -= _milli(pod)
            self.useful_gpus -= pod.gpus / run.slowdown
            run.pod_start[position] = None
        run.bound[position] = None
        self.queue.revive_node(self.state, binding.node)

    # -- deadlocks ----------------------------------------------------------------------------
    def _detect_deadlocks(self) -> None:
        self._holders_grew = False
        candidates = [*self.holders.values(), *self.deadlocked.values()]
        stuck = [run for run in find_deadlocked(self.state, candidates, self.policy) if run.seq not in self.deadlocked]
        if not stuck:
            return
        self.deadlocks += 1
        for run in stuck:
            run.status = JobStatus.DEADLOCKED
            run.deadlocked_at = self.now
            self.holders.pop(run.seq, None)
            self.deadlocked[run.seq] = run
            self._settled += 1
        doomed = {run.seq for run in stuck}
        self.queue.remove(lambda unit: unit.seq in doomed)
