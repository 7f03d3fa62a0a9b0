"""The what-if: the cluster as it is and each packing policy re-placing the same pods, in FGD's model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuslice.fgd.engine import Workload
from gpuslice.fgd.frag import TaskArrays
from gpuslice.fgd.policies import FACTORIES, OPENB_POLICY_ALIASES, OpenbPolicy, Placement, PolicyContext, make_policy
from gpuslice.fgd.policies.base import best_fit_gpu, best_fit_gpus, first_true
from gpuslice.fgd.shapes import Shape, TypicalTasks, build_shapes, typical_tasks
from gpuslice.fgd.state import OpenbCluster
from gpuslice.fgd.trace import NodeTable, OpenbTrace, PodTable
from gpuslice.snapshot.model import Snapshot
from gpuslice.units import MILLI

CURRENT = "current"
FIRST_FIT = "first-fit"
# One spelling per policy across the simulators; the old spellings are accepted.
ACCEPTED = {**OPENB_POLICY_ALIASES, "firstfit": FIRST_FIT}
SNAPSHOT_POLICIES = (FIRST_FIT, "best-fit", "dotprod", "packing", "clustering", "fgd", "fgd-cpu")


class FirstFitPolicy:
    """The first node in name order that fits; GPUs by openb's best-fit rule (whole pods take the
    lowest fully free GPUs, a share the fullest GPU that still holds it)."""

    name = FIRST_FIT

    def __init__(self, context: PolicyContext) -> None:
        self.cluster = context.cluster

    def place(self, shape: Shape, memory: int) -> Placement | None:
        cluster = self.cluster
        node = first_true(cluster.feasible(shape.cpu, memory, shape.num_gpu, shape.gpu_milli, shape.mask))
        if node < 0:
            return None
        return Placement(node, best_fit_gpus(cluster.gpu_rows[node], shape))

    def bound(self, placement: Placement, shape: Shape) -> None:
        pass


def policy_names() -> tuple[str, ...]:
    """Every name `--policies` takes, in its one spelling."""
    return (FIRST_FIT, *FACTORIES)


def canonical(name: str) -> str:
    """A policy's one spelling ('bestfit' -> 'best-fit'); ValueError listing every name for anything else."""
    spelled = ACCEPTED.get(name, name)
    if spelled not in policy_names():
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(policy_names())})")
    return spelled


def _make(name: str, context: PolicyContext) -> OpenbPolicy:
    if name == FIRST_FIT:
        return FirstFitPolicy(context)
    return make_policy(name, context)


@dataclass(frozen=True)
class Outcome:
    """One column of the what-if: free whole GPUs per node, the largest whole-GPU pod that fits on one
    node (GPU count; the node's CPU and memory left aside), FGD's fragmentation of the pod mix in GPUs
    (None without pods), the GPUs allocated, and the pods that do not fit."""

    policy: str
    free_gpus_per_node: dict[str, int]
    largest_fit: int
    fragmented_gpus: float | None
    allocated_gpus: float
    unplaced: tuple[str, ...]

    @property
    def free_gpus(self) -> int:
        return sum(self.free_gpus_per_node.values())


@dataclass(frozen=True)
class WhatIf:
    snapshot: Snapshot
    outcomes: tuple[Outcome, ...]
    model_notes: tuple[str, ...]  # pods the current placement could not be mapped onto the model


def workload_of(snapshot: Snapshot) -> Workload:
    """The snapshot as an openb workload: nodes by name, the pods in snapshot order (bound, then pending)."""
    nodes, pods = snapshot.nodes, snapshot.pods
    models = tuple(sorted({node.gpu_model for node in nodes if node.gpus}))
    index = {name: i for i, name in enumerate(models)}
    table = NodeTable(
        names=tuple(node.name for node in nodes),
        cpu=np.array([node.cpu_milli for node in nodes], dtype=np.int64),
        memory=np.array([node.memory_mib for node in nodes], dtype=np.int64),
        gpus=np.array([node.gpus for node in nodes], dtype=np.int64),
        model=np.array([index[node.gpu_model] if node.gpus else -1 for node in nodes], dtype=np.int64),
        models=models,
    )
    pod_table = PodTable(
        names=tuple(pod.key for pod in pods),
        cpu=np.array([pod.cpu_milli for pod in pods], dtype=np.int64),
        memory=np.array([pod.memory_mib for pod in pods], dtype=np.int64),
        num_gpu=np.array([pod.num_gpu for pod in pods], dtype=np.int64),
        gpu_milli=np.array([pod.gpu_milli for pod in pods], dtype=np.int64),
        spec=tuple(pod.spec for pod in pods),
    )
    trace = OpenbTrace(workload="snapshot", nodes=table, pods=pod_table, source=Path("."))
    shapes = build_shapes(pod_table, models)
    typical = typical_tasks(shapes) if len(pod_table) else _no_tasks(shapes)
    return Workload(trace, shapes, typical, TaskArrays.build(typical, len(models)))


def _no_tasks(shapes: object) -> TypicalTasks:
    """A cluster without pods has no pod mix: one whole-GPU task stands in so the state tables can be
    built; the fragmentation is then reported as None, not as this task's."""
    return TypicalTasks(shapes=(Shape(index=0, cpu=0, gpu_milli=MILLI, num_gpu=1, spec="", mask=-1),), weights=(1,))


def _outcome(policy: str, workload: Workload, cluster: OpenbCluster, unplaced: Sequence[str]) -> Outcome:
    full = {name: int(cluster.full_count[rank]) for rank, name in enumerate(cluster.names)}
    has_pods = len(workload.trace.pods) > 0
    return Outcome(
        policy=policy,
        free_gpus_per_node=dict(sorted(full.items())),
        largest_fit=max(full.values(), default=0),
        fragmented_gpus=round(cluster.fragment_milli() / MILLI, 3) if has_pods else None,
        allocated_gpus=cluster.allocated_milli / MILLI,
        unplaced=tuple(unplaced),
    )


def current(workload: Workload, snapshot: Snapshot) -> tuple[Outcome, list[str]]:
    """The cluster as it is: every bound pod on its node. Which GPU a pod holds is not in the API, so
    whole GPUs are the lowest free ones and a share goes to the fullest GPU that holds it; a pod that does
    not fit the model on its own node (overcommitted sharing, say) is noted and left out."""
    cluster = OpenbCluster(workload.trace.nodes, np.arange(len(snapshot.nodes)), workload.tasks)
    rank = {name: i for i, name in enumerate(cluster.names)}
    shapes = workload.shapes.shapes
    notes: list[str] = []
    pending = []
    for i, pod in enumerate(snapshot.pods):
        if not pod.node:
            pending.append(pod.key)
            continue
        node = rank[pod.node]
        shape = shapes[int(workload.shapes.pod_shape[i])]
        row = cluster.gpu_rows[node]
        try:
            if shape.num_gpu == 0:
                gpus: tuple[int, ...] = ()
            elif shape.is_fractional:
                gpus = (best_fit_gpu(row, shape.gpu_milli),)
            else:
                gpus = best_fit_gpus(row, shape)
        except ValueError:
            notes.append(f"{pod.key}: its GPUs do not fit node {pod.node} in the model (left out)")
            continue
        cpu = min(shape.cpu, cluster.cpu_list[node])
        memory = min(pod.memory_mib, cluster.memory_list[node])
        if (cpu, memory) != (shape.cpu, pod.memory_mib):
            notes.append(f"{pod.key}: node {pod.node} has less CPU or memory left than it requests (clamped)")
        cluster.bind(node, gpus, cpu, memory, shape.gpu_milli)
    return _outcome(CURRENT, workload, cluster, pending), notes


def replace(workload: Workload, policy: str, seed: int = 0) -> Outcome:
    """Every pod of the snapshot placed again, in snapshot order, onto the empty cluster by `policy`.
    Ties go to the first node by name (openb's tie order with the identity prefix)."""
    cluster = OpenbCluster(workload.trace.nodes, np.arange(len(workload.trace.nodes.names)), workload.tasks)
    shapes = workload.shapes.shapes
    rng = np.random.default_rng(seed)
    placer = _make(policy, PolicyContext(cluster, shapes, workload.typical, rng))
    pods = workload.trace.pods
    unplaced = []
    for i, shape_index in enumerate(workload.shapes.pod_shape.tolist()):
        shape = shapes[shape_index]
        memory = int(pods.memory[i])
        placement = placer.place(shape, memory)
        if placement is None:
            unplaced.append(pods.names[i])
            continue
        cluster.bind(placement.node, placement.gpus, shape.cpu, memory, shape.gpu_milli)
        placer.bound(placement, shape)
    return _outcome(policy, workload, cluster, unplaced)


def what_if(snapshot: Snapshot, policies: Sequence[str] = SNAPSHOT_POLICIES, seed: int = 0) -> WhatIf:
    workload = workload_of(snapshot)
    now, notes = current(workload, snapshot)
    outcomes = [now, *(replace(workload, canonical(name), seed) for name in policies)]
    return WhatIf(snapshot, tuple(outcomes), tuple(notes))
