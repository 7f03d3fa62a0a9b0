"""One openb run: a seed's arrival plan placed pod by pod by one policy, recording the cluster after each pod."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.frag import TaskArrays
from gpuslice.fgd.policies import PolicyContext, make_policy
from gpuslice.fgd.protocol import DEFAULT_RATIO, ArrivalPlan, plan_arrivals
from gpuslice.fgd.shapes import ShapeTable, TypicalTasks, build_shapes, typical_tasks
from gpuslice.fgd.state import OpenbCluster
from gpuslice.fgd.trace import OpenbTrace

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Workload:
    """A loaded trace with what every run of it shares: pod shapes and the typical tasks (from the
    original, pre-inflation pod list)."""

    trace: OpenbTrace
    shapes: ShapeTable
    typical: TypicalTasks
    tasks: TaskArrays

    @classmethod
    def from_trace(cls, trace: OpenbTrace) -> Workload:
        shapes = build_shapes(trace.pods, trace.nodes.models)
        typical = typical_tasks(shapes)
        return cls(trace, shapes, typical, TaskArrays.build(typical, len(trace.nodes.models)))

    @property
    def name(self) -> str:
        return self.trace.workload

    @property
    def total_gpus(self) -> int:
        return self.trace.nodes.total_gpus


@dataclass(frozen=True)
class RunResult:
    """Per arrived pod (in arrival order): cumulative arrived and allocated GPU milli, and the cluster
    fragmentation F_N(M) in milli-GPU after that pod."""

    workload: str
    policy: str
    seed: int
    ratio: float
    total_gpus: int
    arrived_milli: IntArray
    allocated_milli: IntArray
    frag_milli: npt.NDArray[np.float64]
    clones: int
    removed: int
    failed: int
    placement_seconds: float

    @property
    def pods(self) -> int:
        return len(self.arrived_milli)


def simulate(workload: Workload, policy_name: str, seed: int, ratio: float = DEFAULT_RATIO) -> RunResult:
    trace = workload.trace
    plan = plan_arrivals(trace.pods, len(trace.nodes.names), workload.total_gpus, seed, ratio)
    return run_plan(workload, policy_name, plan)[0]


def run_plan(workload: Workload, policy_name: str, plan: ArrivalPlan) -> tuple[RunResult, OpenbCluster]:
    """Place the plan's pods in order (reference §3 steps 6-7); returns the result and the final cluster."""
    trace = workload.trace
    tie_order = np.argsort(plan.node_prefix, kind="stable")  # rank r holds the node whose prefix is r
    cluster = OpenbCluster(trace.nodes, tie_order, workload.tasks)
    shapes = workload.shapes.shapes
    policy = make_policy(policy_name, PolicyContext(cluster, shapes, workload.typical, plan.rng))
    pod_shape = workload.shapes.pod_shape[plan.order].tolist()
    pod_memory = trace.pods.memory[plan.order].tolist()
    count = len(pod_shape)
    arrived = [0] * count
    allocated = [0] * count
    old_state = [0] * count  # the bound node's state before and after each pod (0 -> 0 when it failed)
    new_state = [0] * count
    initial_states = cluster.state.copy()
    states = cluster.state_list
    place, bound, bind = policy.place, policy.bound, cluster.bind
    arrived_milli = failed = 0
    started = time.perf_counter()
    for i in range(count):
        shape = shapes[pod_shape[i]]
        memory = pod_memory[i]
        arrived_milli += shape.gpu_request
        placement = place(shape, memory)
        if placement is None:
            failed += 1
        else:
            node = placement.node
            old_state[i] = states[node]
            bind(node, placement.gpus, shape.cpu, memory, shape.gpu_milli)
            new_state[i] = states[node]
            bound(placement, shape)
        arrived[i] = arrived_milli
        allocated[i] = cluster.allocated_milli
    frag_weighted = _fragment_trajectory(cluster, initial_states, old_state, new_state)
    seconds = time.perf_counter() - started
    result = RunResult(
        workload=workload.name,
        policy=policy_name,
        seed=plan.seed,
        ratio=plan.ratio,
        total_gpus=workload.total_gpus,
        arrived_milli=np.array(arrived, dtype=np.int64),
        allocated_milli=np.array(allocated, dtype=np.int64),
        frag_milli=frag_weighted / workload.tasks.total_weight,
        clones=plan.clones,
        removed=plan.removed,
        failed=failed,
        placement_seconds=seconds,
    )
    return result, cluster


def _fragment_trajectory(
    cluster: OpenbCluster, initial: IntArray, old_state: list[int], new_state: list[int]
) -> npt.NDArray[np.float64]:
    """Σ_n Σ_m w_m F_n(m) after each pod: only the bound node changes, so it is the initial sum plus the
    running sum of (F of its new state - F of its old state); every state's F is computed in one batch."""
    frag = cluster.states.frag(np.arange(cluster.states.size))
    steps = frag[np.array(new_state, dtype=np.int64)] - frag[np.array(old_state, dtype=np.int64)]
    return (int(frag[initial].sum()) + np.cumsum(steps)).astype(np.float64)
