"""Slow, literal implementations of the six policies' node choice (reference §4-§5), to check the fast ones.

They read the cluster as plain lists and score every feasible node one by one, the way the reference
simulator does, sharing nothing with the vectorised code but the scalar fragment measure.
"""

from __future__ import annotations

from gpuslice.fgd.frag import node_fragment_weighted
from gpuslice.fgd.policies.fgd import sigmoid_score
from gpuslice.fgd.shapes import Shape, TypicalTasks
from gpuslice.fgd.state import OpenbCluster

MILLI = 1000


def feasible(state: OpenbCluster, node: int, shape: Shape, memory: int) -> bool:
    if state.cpu_list[node] < shape.cpu or state.memory_list[node] < memory:
        return False
    if shape.num_gpu == 0:
        return True
    model = state.model_list[node]
    if model < 0 or not (shape.mask >> model) & 1:
        return False
    return sum(1 for g in state.gpu_rows[node] if g >= shape.gpu_milli) >= shape.num_gpu


def best_fit_index(row: list[int], milli: int) -> int:
    candidates = [(free, i) for i, free in enumerate(row) if free >= milli]
    return min(candidates)[1]


def whole_gpus(row: list[int], count: int) -> tuple[int, ...]:
    return tuple([i for i, free in enumerate(row) if free == MILLI][:count])


def fgd(state: OpenbCluster, node: int, shape: Shape, typical: TypicalTasks) -> tuple[int, tuple[int, ...]]:
    row, cpu, model = state.gpu_rows[node], state.cpu_list[node], state.model_list[node]
    before = node_fragment_weighted(cpu, row, model, typical)
    weight = typical.total_weight
    if shape.is_fractional:
        best, best_gpu = -1, -1
        for i, free in enumerate(row):
            if free >= shape.gpu_milli:
                after_row = list(row)
                after_row[i] -= shape.gpu_milli
                after = node_fragment_weighted(cpu - shape.cpu, after_row, model, typical)
                score = sigmoid_score(before - after, weight)
                if best_gpu < 0 or score > best:
                    best, best_gpu = score, i
        return best, (best_gpu,)
    gpus = whole_gpus(row, shape.num_gpu)
    after_row = [0 if i in gpus else free for i, free in enumerate(row)]
    after = node_fragment_weighted(cpu - shape.cpu, after_row, model, typical)
    return sigmoid_score(before - after, weight), gpus


def cpu_fgd(
    state: OpenbCluster, node: int, shape: Shape, typical: TypicalTasks, symmetric: bool
) -> tuple[int, tuple[int, ...]]:
    """fgd-cpu: FGD's Δ minus the increase of S = max(0, free GPU - free CPU / κ); -sym: plus its change."""
    gpu_tasks = [(t, w) for t, w in zip(typical.shapes, typical.weights, strict=True) if t.num_gpu]
    kappa = sum(w * t.cpu for t, w in gpu_tasks) / sum(w * t.gpu_request for t, w in gpu_tasks)
    row, cpu, model = state.gpu_rows[node], state.cpu_list[node], state.model_list[node]
    weight = typical.total_weight
    before = node_fragment_weighted(cpu, row, model, typical)
    total = sum(row)
    relief = max(0.0, total - cpu / kappa) - max(0.0, total - shape.gpu_request - (cpu - shape.cpu) / kappa)
    bonus = round((relief if symmetric else min(relief, 0.0)) * weight)
    candidates = [i for i, free in enumerate(row) if free >= shape.gpu_milli] if shape.is_fractional else [-1]
    best, best_gpus = -1, ()
    for i in candidates:
        gpus = (i,) if i >= 0 else whole_gpus(row, shape.num_gpu)
        after_row = [free - shape.gpu_milli if g in gpus else free for g, free in enumerate(row)]
        after = node_fragment_weighted(cpu - shape.cpu, after_row, model, typical)
        value = sigmoid_score(before - after + bonus, weight)
        if (not best_gpus and best < 0) or value > best:
            best, best_gpus = value, gpus
    return best, best_gpus


def score(
    name: str, state: OpenbCluster, node: int, shape: Shape, typical: TypicalTasks, classes: list[set[str]]
) -> tuple[int, tuple[int, ...]]:
    row, cpu = state.gpu_rows[node], state.cpu_list[node]
    free_total = sum(row)
    if name == "fgd":
        return fgd(state, node, shape, typical)
    if name in ("fgd-cpu", "fgd-cpu-sym"):
        return cpu_fgd(state, node, shape, typical, symmetric=name == "fgd-cpu-sym")
    if shape.num_gpu == 0:
        gpus: tuple[int, ...] = ()
    elif shape.is_fractional:
        gpus = (best_fit_index(row, shape.gpu_milli),)
    else:
        gpus = whole_gpus(row, shape.num_gpu)
    if name == "dotprod":
        dot = (cpu / 128000) * (shape.cpu / 128000) + (free_total / 8000) * (shape.gpu_request / 8000)
        return int((1.0 - dot / 2) * 100), gpus
    if name == "best-fit":
        left = ((cpu - shape.cpu) / 128000) * 0.5 + ((free_total - shape.gpu_request) / 8000) * 0.5
        return int((1.0 - left) * 100), gpus
    if name == "clustering":
        if shape.num_gpu == 0:
            return 0, gpus
        base = 25 * (8000 - free_total) // 8000
        mine = shape.cluster_class
        if mine in classes[node]:
            return base + (75 if classes[node] == {mine} else 50), gpus
        return base + (25 if not classes[node] else 0), gpus
    if name == "packing":
        if shape.num_gpu == 0:
            return 0, gpus
        full = sum(1 for g in row if g == MILLI)
        if full == state.gpus[node]:
            return max(33 - full, full), gpus
        chosen = sorted(range(len(row)), key=lambda i: (row[i], i))
        taken = [i for i in chosen if row[i] >= shape.gpu_milli][: shape.num_gpu]
        whole = sum(1 for i in taken if row[i] == MILLI)
        if whole:
            return max(50 - whole, 33), gpus
        return max(100 - sum(row[i] * 100 // MILLI for i in taken) // 10, 50), gpus
    raise ValueError(name)


def choose(
    name: str, state: OpenbCluster, shape: Shape, memory: int, typical: TypicalTasks, classes: list[set[str]]
) -> tuple[int, tuple[int, ...]] | None:
    """Highest score wins; among equal scores the node first in tie order (smallest index)."""
    scored = [
        (node, *score(name, state, node, shape, typical, classes))
        for node in range(state.n)
        if feasible(state, node, shape, memory)
    ]
    if not scored:
        return None
    if name == "best-fit":  # min-max normalised to 0..100 with integer arithmetic
        low, high = min(s for _, s, _ in scored), max(s for _, s, _ in scored)
        scored = [(n, 0 if high == low else (s - low) * 100 // (high - low), g) for n, s, g in scored]
    best = max(s for _, s, _ in scored)
    node, _, gpus = next(item for item in scored if item[1] == best)
    return node, gpus
