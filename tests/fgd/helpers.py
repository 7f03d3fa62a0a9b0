"""Builders for hand-made openb clusters and the real-trace fixtures' skip rule."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpuslice.fgd.frag import TaskArrays
from gpuslice.fgd.policies import PolicyContext, make_policy
from gpuslice.fgd.policies.base import OpenbPolicy
from gpuslice.fgd.shapes import Shape, TypicalTasks
from gpuslice.fgd.state import OpenbCluster
from gpuslice.fgd.trace import NodeTable, spec_mask

MODELS = ("G2", "P100", "T4")


def node_table(*nodes: tuple[int, int, str], memory: int = 1 << 20) -> NodeTable:
    """nodes: (cpu milli, GPUs, model) rows named n0, n1, ... in that order."""
    return NodeTable(
        names=tuple(f"n{i}" for i in range(len(nodes))),
        cpu=np.array([n[0] for n in nodes], dtype=np.int64),
        memory=np.array([memory] * len(nodes), dtype=np.int64),
        gpus=np.array([n[1] for n in nodes], dtype=np.int64),
        model=np.array([MODELS.index(n[2]) if n[1] else -1 for n in nodes], dtype=np.int64),
        models=MODELS,
    )


def shape(cpu: int, milli: int, count: int, spec: str = "", index: int = 0) -> Shape:
    return Shape(index=index, cpu=cpu, gpu_milli=milli, num_gpu=count, spec=spec, mask=spec_mask(spec, MODELS))


def typical(*weighted: tuple[Shape, int]) -> TypicalTasks:
    return TypicalTasks(shapes=tuple(s for s, _ in weighted), weights=tuple(w for _, w in weighted))


DEFAULT_TYPICAL = typical((shape(4000, 500, 1), 2), (shape(8000, 1000, 1), 1), (shape(2000, 0, 0), 1))


def cluster(
    nodes: NodeTable, tie_order: Sequence[int] | None = None, tasks: TypicalTasks = DEFAULT_TYPICAL
) -> OpenbCluster:
    order = list(range(len(nodes.names))) if tie_order is None else list(tie_order)
    return OpenbCluster(nodes, order, TaskArrays.build(tasks, len(nodes.models)))


def policy(
    name: str, state: OpenbCluster, shapes: Sequence[Shape], tasks: TypicalTasks = DEFAULT_TYPICAL, seed: int = 0
) -> OpenbPolicy:
    return make_policy(name, PolicyContext(state, list(shapes), tasks, np.random.default_rng(seed)))


def set_gpus(state: OpenbCluster, node: int, free: Sequence[int], cpu: int | None = None) -> None:
    """Put a node into a given state by binding synthetic pods (keeps every cache consistent)."""
    for gpu, value in enumerate(free):
        used = state.gpu_rows[node][gpu] - value
        if used:
            state.bind(node, (gpu,), 0, 0, used)
    if cpu is not None:
        state.bind(node, (), state.cpu_list[node] - cpu, 0, 0)
