"""openb replayed in real time: pods arrive at creation_time, wait in a FIFO queue, run their traced run time.

The rules (docs/openb.md, "Real-time replay"):
- A pod arrives at its `creation_time` and joins the queue. After every instant's events, one pass tries the
  waiting pods in arrival order with the policy; every pod that fits is placed (later pods may pass a pod
  that does not fit, as the Kubernetes scheduler does). A pod shape (shape, memory) that failed is not tried
  again until some pod leaves: placing only consumes capacity.
- A pod the trace scheduled runs for its traced run time, `deletion_time - scheduled_time`, from the moment
  it is placed here, then leaves and frees its resources.
- A pod the trace never scheduled (no `scheduled_time`, phase Pending) is deleted at its `deletion_time`:
  if it still waits then it leaves the queue unplaced (`withdrawn`); if it was placed it leaves then.
- At one instant departures come first, then arrivals, then deletions of never-scheduled pods. No inflation.
- `compress` K > 1 divides every arrival time by K and keeps every run time (and the time a never-scheduled
  pod waits before deletion): the same pods, K times the offered load. `offered_load` gives the factor for a
  target load: in real time the openb pod lists offer well under 1 % of the cluster's GPUs.
- `node_fraction` f < 1 replays on a seeded uniform sample of round(f x nodes) of the nodes (the model
  mix kept in expectation): the whole default pod list asks for fewer GPUs (6,087) than the cluster has
  (6,212), so only a smaller cluster can make pods wait. A pod no sampled node could ever hold is counted
  in `never_placed` (it waits to the end).
Metrics are time-weighted over the arrival window [first arrival, last arrival]: GPU allocation, unallocated
GPUs, fragmented GPUs (F_N(M) of the FGD paper, the cluster measure), queue length; waits over the pods that
were placed. The window ends at the last arrival, not the last departure, because the run times are heavy-
tailed (a few pods run for months): after the last arrival only the drain is left, and averaging over it
would make every load look alike. The peak allocation is over the whole run.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.engine import Workload
from gpuslice.fgd.policies import Placement, PolicyContext, make_policy
from gpuslice.fgd.state import OpenbCluster
from gpuslice.fgd.trace import MAX_PODS, POD_PREFIX, NodeTable, OpenbTraceError, _rows
from gpuslice.units import MILLI

TIME_COLUMNS = ("name", "creation_time", "deletion_time", "scheduled_time")
_DEPART, _ARRIVE, _WITHDRAW = 0, 1, 2
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PodTimes:
    """Per pod, aligned with the workload's pod table (sorted by name); `scheduled` is -1 when never scheduled."""

    creation: npt.NDArray[np.int64]
    deletion: npt.NDArray[np.int64]
    scheduled: npt.NDArray[np.int64]


def load_pod_times(workload: Workload) -> PodTimes:
    """The three time columns of the workload's pod list; a bad value names the file, line and column."""
    path = workload.trace.source / f"{POD_PREFIX}{workload.name}.csv"
    rows = sorted(_rows(path, TIME_COLUMNS, MAX_PODS), key=lambda item: item[1]["name"])
    values: dict[str, list[int]] = {column: [] for column in TIME_COLUMNS[1:]}
    for line, row in rows:
        for column in TIME_COLUMNS[1:]:
            text = (row.get(column) or "").strip()
            if not text and column == "scheduled_time":
                values[column].append(-1)
                continue
            try:
                value = int(text)
            except ValueError:
                raise OpenbTraceError(
                    f"{path.name}:{line}: {column}: not a whole number of seconds: {text!r}"
                ) from None
            if not 0 <= value <= 10**10:
                raise OpenbTraceError(f"{path.name}:{line}: {column}: {value} is outside 0..10^10 seconds")
            values[column].append(value)
        if values["deletion_time"][-1] < values["creation_time"][-1]:
            raise OpenbTraceError(f"{path.name}:{line}: deletion_time: before creation_time")
    if len(rows) != len(workload.trace.pods):
        raise OpenbTraceError(f"{path.name}: {len(rows)} rows with times for {len(workload.trace.pods)} pods")
    return PodTimes(*(np.array(values[column], dtype=np.int64) for column in TIME_COLUMNS[1:]))


@dataclass
class ReplayResult:
    workload: str
    policy: str
    seed: int
    compress: float
    node_fraction: float
    total_gpus: int
    pods: int
    placed: int
    never_placed: int  # waiting when the trace ended, or withdrawn
    withdrawn: int  # pods the trace never scheduled that left the queue at their deletion time
    wait_p50: float
    wait_p99: float
    wait_mean: float
    gpu_allocation: float  # time-weighted allocated GPU share
    unallocated_gpus: float  # time-weighted mean, in GPUs
    fragmented_gpus: float  # time-weighted mean F_N(M), in GPUs
    queue_mean: float
    queue_peak: int
    allocation_peak: float  # the most GPUs allocated at once, over the whole run
    window: tuple[float, float]  # first and last arrival: the span the means are over
    # Per pod: (name, milli per GPU, GPUs, arrival, start, end, status, node, GPU indices); start and end None when
    # they did not happen.
    pod_rows: list[tuple[str, int, int, float, float | None, float | None, str, str, str]] = field(repr=False)
    seconds: float
    times: FloatArray = field(repr=False)
    allocated: FloatArray = field(repr=False)  # GPUs
    fragmented: FloatArray = field(repr=False)  # GPUs
    queued: npt.NDArray[np.int64] = field(repr=False)

    def record(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "policy": self.policy,
            "seed": self.seed,
            "compress": round(self.compress, 6),
            "node_fraction": self.node_fraction,
            "total_gpus": self.total_gpus,
            "pods": self.pods,
            "placed": self.placed,
            "never_placed": self.never_placed,
            "withdrawn": self.withdrawn,
            "wait_p50": round(self.wait_p50, 3),
            "wait_p99": round(self.wait_p99, 3),
            "wait_mean": round(self.wait_mean, 3),
            "gpu_allocation": round(self.gpu_allocation, 6),
            "unallocated_gpus": round(self.unallocated_gpus, 3),
            "fragmented_gpus": round(self.fragmented_gpus, 3),
            "queue_mean": round(self.queue_mean, 3),
            "queue_peak": self.queue_peak,
            "allocation_peak_gpus": round(self.allocation_peak, 3),
            "seconds": round(self.seconds, 3),
        }


def offered_load(workload: Workload, times: PodTimes) -> float:
    """GPU-seconds the scheduled pods ran in the trace / (GPUs x the arrival span): the load of a real-time replay."""
    ran = times.scheduled >= 0
    work = float((workload.trace.pods.gpu_request[ran] * (times.deletion[ran] - times.scheduled[ran])).sum()) / MILLI
    span = float(times.creation.max() - times.creation.min())
    return work / (workload.total_gpus * span) if span > 0 and workload.total_gpus else 0.0


def sample_nodes(nodes: NodeTable, fraction: float, seed: int) -> NodeTable:
    """A seeded uniform sample of round(fraction x nodes) nodes (at least one), in name order."""
    if not 0 < fraction <= 1:
        raise ValueError(f"node fraction must be in (0, 1], got {fraction}")
    if fraction == 1:
        return nodes
    keep = max(1, round(fraction * len(nodes.names)))
    chosen = np.sort(np.random.default_rng([seed, 1]).choice(len(nodes.names), size=keep, replace=False))
    return NodeTable(
        names=tuple(nodes.names[i] for i in chosen.tolist()),
        cpu=nodes.cpu[chosen],
        memory=nodes.memory[chosen],
        gpus=nodes.gpus[chosen],
        model=nodes.model[chosen],
        models=nodes.models,
    )


def replay(
    workload: Workload,
    policy_name: str,
    seed: int,
    times: PodTimes | None = None,
    compress: float = 1.0,
    node_fraction: float = 1.0,
) -> ReplayResult:
    """Replay the workload's pods in time on its nodes (or a sample) with one policy; the seed draws the tie order."""
    if not 1.0 <= compress <= 1e6:
        raise ValueError(f"compress must be 1 to 10^6, got {compress}")
    times = times or load_pod_times(workload)
    trace = workload.trace
    nodes = sample_nodes(trace.nodes, node_fraction, seed)
    rng = np.random.default_rng(seed)
    cluster = OpenbCluster(nodes, rng.permutation(len(nodes.names)), workload.tasks)
    shapes = workload.shapes.shapes
    policy = make_policy(policy_name, PolicyContext(cluster, shapes, workload.typical, rng))
    released = getattr(policy, "released", None)
    pod_shape = workload.shapes.pod_shape.tolist()
    gpu_milli, num_gpu = trace.pods.gpu_milli.tolist(), trace.pods.num_gpu.tolist()
    memory = trace.pods.memory.tolist()
    creation = (times.creation / compress).tolist()
    run_time = np.where(times.scheduled >= 0, times.deletion - times.scheduled, times.deletion - times.creation)
    durations, scheduled = run_time.astype(np.float64).tolist(), times.scheduled.tolist()
    count = len(pod_shape)
    events: list[tuple[float, int, int]] = [(creation[i], _ARRIVE, i) for i in range(count)]
    events += [(creation[i] + durations[i], _WITHDRAW, i) for i in range(count) if scheduled[i] < 0]
    heapq.heapify(events)
    waiting: dict[tuple[int, int], deque[int]] = {}  # (shape, memory) -> pods in arrival order
    dead: set[tuple[int, int]] = set()
    placement: dict[int, Placement] = {}
    start: dict[int, float] = {}
    ran: dict[int, Placement] = {}  # every placement made, kept after the pod leaves
    ended: dict[int, float] = {}
    gone: set[int] = set()  # withdrawn
    withdrawn = 0
    queued = 0
    samples_t: list[float] = []
    samples_alloc: list[float] = []
    samples_frag: list[float] = []
    samples_queue: list[int] = []
    weight = workload.tasks.total_weight
    began = time.perf_counter()
    while events:
        now = events[0][0]
        freed = False
        while events and events[0][0] == now:
            _, kind, pod = heapq.heappop(events)
            key = (pod_shape[pod], memory[pod])
            if kind == _ARRIVE:
                waiting.setdefault(key, deque()).append(pod)
                queued += 1
            elif pod in placement:  # a departure, or a never-scheduled pod deleted while it runs
                where = placement.pop(pod)
                ended[pod] = now
                shape = shapes[pod_shape[pod]]
                cluster.release(where.node, where.gpus, shape.cpu, memory[pod], shape.gpu_milli)
                if released is not None:
                    released(where, shape)
                freed = True
            elif kind == _WITHDRAW and pod not in start:  # never scheduled in the trace, still waiting here
                waiting[key].remove(pod)
                queued -= 1
                withdrawn += 1
                gone.add(pod)
        if freed:
            dead.clear()
        queued -= _pass(waiting, dead, shapes, policy, cluster, memory, placement, start, now, events,
                        (creation, scheduled, durations))  # fmt: skip
        ran.update(placement)
        samples_t.append(now)
        samples_alloc.append(cluster.allocated_milli / MILLI)
        samples_frag.append(cluster.fragment_weighted() / weight / MILLI)
        samples_queue.append(queued)
    seconds = time.perf_counter() - began
    waits = np.array([start[pod] - creation[pod] for pod in start], dtype=np.float64)
    t = np.asarray(samples_t, dtype=np.float64)
    allocated = np.asarray(samples_alloc, dtype=np.float64)
    fragmented = np.asarray(samples_frag, dtype=np.float64)
    queue = np.asarray(samples_queue, dtype=np.int64)
    total = nodes.total_gpus
    window = (float(min(creation)), float(max(creation))) if creation else (0.0, 0.0)
    return ReplayResult(
        workload=workload.name,
        policy=policy_name,
        seed=seed,
        compress=compress,
        node_fraction=node_fraction,
        total_gpus=total,
        pods=count,
        placed=len(start),
        never_placed=count - len(start),
        withdrawn=withdrawn,
        wait_p50=float(np.percentile(waits, 50)) if len(waits) else 0.0,
        wait_p99=float(np.percentile(waits, 99)) if len(waits) else 0.0,
        wait_mean=float(waits.mean()) if len(waits) else 0.0,
        gpu_allocation=_mean(t, allocated, window) / total if total else 0.0,
        unallocated_gpus=total - _mean(t, allocated, window),
        fragmented_gpus=_mean(t, fragmented, window),
        queue_mean=_mean(t, queue.astype(np.float64), window),
        queue_peak=int(queue.max()) if len(queue) else 0,
        allocation_peak=float(allocated.max()) if len(allocated) else 0.0,
        window=window,
        pod_rows=[
            (
                trace.pods.names[pod],
                gpu_milli[pod],
                num_gpu[pod],
                creation[pod],
                start.get(pod),
                ended.get(pod),
                "withdrawn" if pod in gone else "placed" if pod in start else "waiting",
                cluster.names[ran[pod].node] if pod in ran else "",
                " ".join(map(str, ran[pod].gpus)) if pod in ran else "",
            )
            for pod in range(count)
        ],
        seconds=seconds,
        times=t,
        allocated=allocated,
        fragmented=fragmented,
        queued=queue,
    )


def _pass(
    waiting: dict[tuple[int, int], deque[int]],
    dead: set[tuple[int, int]],
    shapes: Any,
    policy: Any,
    cluster: OpenbCluster,
    memory: list[int],
    placement: dict[int, Placement],
    start: dict[int, float],
    now: float,
    events: list[tuple[float, int, int]],
    pod_times: tuple[list[float], list[int], list[float]],
) -> int:
    """Place waiting pods in arrival order, trying only the head of each live shape; returns how many were placed."""
    creation, scheduled, durations = pod_times
    # Arrival order: creation time, then pod index (the order arrivals of one instant were queued in).
    heads = [(creation[queue[0]], queue[0], key) for key, queue in waiting.items() if queue and key not in dead]
    heapq.heapify(heads)
    placed = 0
    while heads:
        _, pod, key = heapq.heappop(heads)
        shape = shapes[key[0]]
        where = policy.place(shape, key[1])
        if where is None:
            dead.add(key)
            continue
        cluster.bind(where.node, where.gpus, shape.cpu, memory[pod], shape.gpu_milli)
        policy.bound(where, shape)
        queue = waiting[key]
        queue.popleft()
        placement[pod] = where
        start[pod] = now
        placed += 1
        if scheduled[pod] >= 0:  # runs its traced run time from now; a never-scheduled pod leaves at deletion
            heapq.heappush(events, (now + durations[pod], _DEPART, pod))
        if queue:
            heapq.heappush(heads, (creation[queue[0]], queue[0], key))
        else:
            del waiting[key]
    return placed


def _mean(times: FloatArray, values: FloatArray, window: tuple[float, float]) -> float:
    """Time-weighted mean over `window` of a step series (each value holds until the next sample); for an empty
    window, the value at its start."""
    if not len(times):
        return 0.0
    start, end = window
    if end <= start:
        index = max(int(np.searchsorted(times, start, side="right")) - 1, 0)
        return float(values[index])
    edges = np.clip(np.append(times, end), start, end)
    return float(np.dot(np.diff(edges), values) / (end - start))
