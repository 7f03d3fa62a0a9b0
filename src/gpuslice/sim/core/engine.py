"""The discrete-event engine: scheduling passes and job lifecycles over the shared event loop, with listeners."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuslice.sim.core.cluster import ClusterState
from gpuslice.sim.core.deadlock import find_deadlocked
from gpuslice.sim.core.loop import EventLoop
from gpuslice.sim.core.metrics import PendingDemand, SimResult, Timeline, stranded_gpus, summarize
from gpuslice.sim.core.model import ClusterSpec, JobSpec, PodSpec
from gpuslice.sim.core.placement import PlacementPolicy, first_fitting, place_all
from gpuslice.sim.core.queue import PendingQueue, PriorityOrder, QueueOrder, Unit
from gpuslice.sim.core.runs import Attempt, JobRun, JobStatus
from gpuslice.sim.core.sections import ReportSection
from gpuslice.units import MILLI

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


class Listener:
    """What an extension may watch or steer; every method is a no-op here, so extensions override only what they use.

    Call order for one job: gate (each time it would be queued), on_submit (after the engine accepted or
    rejected it: check run.status), slowdown and before_start (just before pods start; before_start may
    change `run.spec.duration` for this start), on_start, on_bind (after the pods of a unit are bound and
    any that could start have started), on_unbind (per pod released: finished or evicted), on_done.
    after_batch runs after every scheduling pass. An extension owns its metrics (`extras`, merged into the
    run's JSON record) and its report section (`section`, or None).
    """

    section: ReportSection | None = None

    def gate(self, engine: Engine, run: JobRun) -> bool:
        """False keeps `run` out of the pending queue for now; the listener then calls engine.release_to_queue."""
        return True

    def on_submit(self, engine: Engine, run: JobRun) -> None: ...

    def on_bind(self, engine: Engine, run: JobRun, positions: tuple[int, ...]) -> None: ...

    def slowdown(self, engine: Engine, run: JobRun, positions: tuple[int, ...], slowdown: float) -> float:
        return slowdown

    def before_start(self, engine: Engine, run: JobRun, positions: tuple[int, ...]) -> None: ...

    def on_start(self, engine: Engine, run: JobRun, positions: tuple[int, ...]) -> None: ...

    def on_unbind(self, engine: Engine, run: JobRun, position: int) -> None: ...

    def on_done(self, engine: Engine, run: JobRun) -> None: ...

    def after_batch(self, engine: Engine) -> None: ...

    def extras(self, engine: Engine) -> dict[str, Any]:
        return {}


class Engine:
    """Runs one policy on one cluster and trace.

    Events at the same time are applied in sequence order as one batch; then one scheduling pass tries
    the pending units in queue order; then metrics are sampled and, if a gang gained pods without
    starting, deadlock detection runs. Extensions attach as listeners (`listeners`, or `add_listener`
    before `run`) and act through `schedule_timer`, `evict`, `release_to_queue`, `wake` and `settle`;
    `observer` is called after every batch. With no listener a run is the bare engine's.
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
        listeners: Sequence[Listener] = (),
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
        self.listeners: list[Listener] = list(listeners)
        self._loop = EventLoop()
        # Counted in milli-GPU so that sums of fractions never drift; `useful` is busy / slowdown.
        self.busy_milli = 0
        self.held_milli = 0
        self.useful_gpus = 0.0
        self.timeline = Timeline()
        self.deadlocks = 0
        self.waiting_jobs = 0  # admitted jobs not yet running (the queue length in jobs), for the timeline
        self.holders: dict[int, JobRun] = {}  # gang jobs holding some but not all pods
        self.deadlocked: dict[int, JobRun] = {}
        self._holders_grew = False
        self._observer = observer
        self._progress = progress
        self._trace_name = trace_name
        self._settled = 0  # jobs done, rejected or deadlocked
        self._fits_empty: dict[tuple[Any, ...], bool] = {}
        self._demand_version = -1
        self._demand_cache: PendingDemand | None = None
        self._batches = 0
        for run in self.runs:
            self._loop.push(run.spec.submit, _SUBMIT, run)
        self.queue.order.attach(self)

    @property
    def now(self) -> float:
        return self._loop.now

    def add_listener(self, listener: Listener) -> None:
        """Attach an extension before `run`; listeners are called in the order they were added."""
        self.listeners.append(listener)

    # -- extension API ------------------------------------------------------------------------
    def schedule_timer(self, at: float, callback: Callable[[Engine], None]) -> None:
        """Call `callback(engine)` at time `at` (before that moment's scheduling pass)."""
        self._loop.push(max(at, self.now), _TIMER, callback)

    def evict(self, run: JobRun, requeue_after: float = 0.0) -> None:
        """Unbind every pod of a waiting or running job and queue it again from scratch, now or after a delay."""
        if run.status not in (JobStatus.WAITING, JobStatus.RUNNING, JobStatus.DEADLOCKED):
            raise ValueError(f"job {run.spec.job_id!r} is {run.status.value}; only live jobs can be evicted")
        for position, binding in enumerate(run.bound):
            if binding is not None:
                self._unbind(run, position)
        if run.status in (JobStatus.RUNNING, JobStatus.DEADLOCKED):
            self.waiting_jobs += 1
        run.attempts.append(Attempt(run.first_start, self.now, tuple(run.placement)))
        run.placement = [None] * len(run.bound)
        run.first_start = None
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

    def release_to_queue(self, run: JobRun) -> None:
        """Queue a job's unbound pods, bypassing the gates (a listener admitting a job it held back)."""
        if run.status is JobStatus.WAITING:
            self._queue_units(run)

    def wake(self) -> None:
        """Ask for one more scheduling pass at the current time (after evictions freed capacity)."""
        self.schedule_timer(self.now, _nothing)

    def settle(self, run: JobRun, status: JobStatus) -> None:
        """End a job that will never run (e.g. deactivated by a backoff limit); drops its queued units."""
        self.queue.remove(lambda unit: unit.seq == run.seq)
        if run.status is JobStatus.WAITING:
            self.waiting_jobs -= 1
        run.status = status
        self._settled += 1

    def _requeue(self, run: JobRun, epoch: int) -> None:
        if run.epoch == epoch and run.status is JobStatus.WAITING and run.bound_count == 0:
            self._enqueue(run)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> SimResult:
        self._loop.run(self._apply, self._after_batch)
        if self._progress is not None:
            self._progress(self._settled, len(self.runs))
        extras: dict[str, Any] = {}
        for listener in self.listeners:
            extras.update(listener.extras(self))
        sections = tuple(dict.fromkeys(ext.section for ext in self.listeners if ext.section is not None))
        return summarize(
            self.policy.name,
            self._trace_name,
            self.runs,
            self.timeline,
            self.state.total_gpus,
            self.deadlocks,
            extras,
            sections,
            tuple(node.name for node in self.cluster.nodes),
        )

    def _apply(self, kind: int, payload: Any) -> None:
        if kind == _SUBMIT:
            self._submit(payload)
        elif kind == _FINISH:
            self._finish(*payload)
        else:
            payload(self)

    def _after_batch(self) -> None:
        self.queue.run_pass(self._try_place)
        if self._holders_grew:
            self._detect_deadlocks()
        stranded = stranded_gpus(self.state, self._demand()) if len(self.queue) else 0.0
        self.timeline.record(
            self.now, self.busy_milli / MILLI, self.useful_gpus, self.held_milli / MILLI, stranded, self.waiting_jobs
        )
        if self._observer is not None:
            self._observer(self)
        for listener in self.listeners:
            listener.after_batch(self)
        self._batches += 1
        if self._progress is not None and self._batches % self.config.progress_every == 0:
            self._progress(self._settled, len(self.runs))

    def _demand(self) -> PendingDemand | None:
        """The pending pods as arrays for stranded_gpus, rebuilt only when the set of pending shapes changes."""
        if self._demand_version != self.queue.shapes_version:
            self._demand_version = self.queue.shapes_version
            self._demand_cache = PendingDemand.of(self.queue.shapes())
        return self._demand_cache

    # -- arrivals -----------------------------------------------------------------------------
    def _submit(self, run: JobRun) -> None:
        if not self._fits_on_empty_cluster(run.spec):
            run.status = JobStatus.REJECTED
            self._settled += 1
        else:
            self.waiting_jobs += 1
            self._enqueue(run)
        for listener in self.listeners:
            listener.on_submit(self, run)

    def _enqueue(self, run: JobRun) -> None:
        for listener in self.listeners:
            if not listener.gate(self, run):
                return
        self._queue_units(run)

    def _queue_units(self, run: JobRun) -> None:
        spec = run.spec
        missing = tuple(position for position, binding in enumerate(run.bound) if binding is None)
        # A topology constraint is about all of the job's GPUs at once, so such a job is one unit.
        if len(missing) > 1 and ((spec.gang and self.policy.all_or_nothing) or spec.topology != "any"):
            groups = [missing]
        else:
            groups = [(position,) for position in missing]
        for group in groups:
            pods = tuple(spec.pods[position] for position in group)
            self.queue.push(Unit(spec, run.seq, group, pods, run.epoch))

    def _fits_on_empty_cluster(self, spec: JobSpec) -> bool:
        """Reject what could never run: a pod no node can hold, a gang the empty cluster cannot hold at once, or a
        constrained job no GPU group of the empty cluster can hold."""
        key = (spec.pods, spec.gang, spec.topology)
        known = self._fits_empty.get(key)
        if known is None:
            if spec.topology != "any":  # only the policy knows the constraint's GPU groups
                known = self.policy.place(spec.pods, spec, self.state.fresh()) is not None
            elif spec.gang and len(spec.pods) > 1:
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
        before = run.bound_count if self.listeners else 0
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
        if self.listeners and run.bound_count > before:
            for listener in self.listeners:
                listener.on_bind(self, run, unit.pod_indices)
        return True

    def _start(self, run: JobRun, positions: tuple[int, ...], slowdown: float) -> None:
        for listener in self.listeners:
            slowdown = listener.slowdown(self, run, positions, slowdown)
        for listener in self.listeners:
            listener.before_start(self, run, positions)
        run.slowdown = slowdown
        if run.first_start is None:
            run.first_start = self.now
        for position in positions:
            run.pod_start[position] = self.now
            run.placement[position] = run.bound[position]
            self.busy_milli += _milli(run.spec.pods[position])
            self.useful_gpus += run.spec.pods[position].gpus / slowdown
        run.started_pods += len(positions)
        if run.started_pods == len(run.bound):
            run.start_time = self.now
            run.status = JobStatus.RUNNING
            self.waiting_jobs -= 1
        self._loop.push(self.now + run.spec.duration * slowdown, _FINISH, (run, positions, run.epoch))
        for listener in self.listeners:
            listener.on_start(self, run, positions)

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
        if run.status is JobStatus.DONE:
            for listener in self.listeners:
                listener.on_done(self, run)

    def _unbind(self, run: JobRun, position: int) -> None:
        for listener in self.listeners:
            listener.on_unbind(self, run, position)
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
            self.waiting_jobs -= 1
            self.holders.pop(run.seq, None)
            self.deadlocked[run.seq] = run
            self._settled += 1
        doomed = {run.seq for run in stuck}
        self.queue.remove(lambda unit: unit.seq in doomed)


def _nothing(engine: Engine) -> None:
    """A timer that only causes a scheduling pass."""
