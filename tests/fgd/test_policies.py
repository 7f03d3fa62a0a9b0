"""The six policies and ours on hand-built nodes, the §4 tie rule, GPU-index rules, and a cross-check
of every deterministic policy against a slow literal implementation on a slice of the real trace."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gpuslice.fgd.engine import Workload
from gpuslice.fgd.policies import FACTORIES, Placement, PolicyContext, make_policy
from gpuslice.fgd.policies.fgd import FgdPolicy, score_thresholds, sigmoid_score
from gpuslice.fgd.policies.heuristics import BestFitPolicy, ClusteringPolicy, DotProdPolicy, PackingPolicy
from gpuslice.fgd.protocol import plan_arrivals
from gpuslice.fgd.state import OpenbCluster
from gpuslice.fgd.trace import NodeTable
from tests.fgd import oracle
from tests.fgd.helpers import DEFAULT_TYPICAL, cluster, node_table, policy, set_gpus, shape

DETERMINISTIC = ("dotprod", "clustering", "packing", "best-fit", "fgd", "fgd-cpu", "fgd-cpu-sym")
SHARE, WHOLE, PAIR, CPU_ONLY = (
    shape(4000, 500, 1, index=0),
    shape(8000, 1000, 1, index=1),
    shape(8000, 1000, 2, index=2),
    shape(2000, 0, 0, index=3),
)
SHAPES = (SHARE, WHOLE, PAIR, CPU_ONLY)


@pytest.mark.parametrize("name", DETERMINISTIC)
@pytest.mark.parametrize("pod", SHAPES, ids=lambda s: s.cluster_class or "cpu")
def test_equal_scores_go_to_the_smallest_prefix(name: str, pod: object) -> None:
    state = cluster(node_table(*[(32_000, 4, "G2")] * 3), tie_order=[2, 0, 1])
    placement = policy(name, state, SHAPES).place(pod, 1024)  # type: ignore[arg-type]
    assert placement is not None and placement.node == 0 and state.names[0] == "n2"


def test_dotprod_prefers_the_smallest_dot_product() -> None:
    state = cluster(node_table((64_000, 2, "T4"), (16_000, 1, "P100")))
    scores = DotProdPolicy(PolicyContext(state, SHAPES, None, np.random.default_rng())).scores(WHOLE, np.ones(2, bool))  # type: ignore[arg-type]
    # n0: 1 - (0.5*0.0625 + 0.25*0.125)/2 = 0.96875; n1: 1 - (0.125*0.0625 + 0.125*0.125)/2 = 0.98828
    assert scores.tolist() == [96, 98]
    assert policy("dotprod", state, SHAPES).place(WHOLE, 0).node == 1  # type: ignore[union-attr]


def test_clustering_keeps_classes_together() -> None:
    state = cluster(node_table(*[(64_000, 2, "T4")] * 4))
    chooser = ClusteringPolicy(PolicyContext(state, SHAPES, None, np.random.default_rng()))  # type: ignore[arg-type]
    for node, pods in ((0, [SHARE]), (1, [SHARE, WHOLE]), (3, [WHOLE])):
        for pod in pods:
            gpus = (0,) if pod is SHARE else (1,)
            state.bind(node, gpus, pod.cpu, 0, pod.gpu_milli)
            chooser.bound(Placement(node, gpus), pod)
    free = [1500, 500, 2000, 1000]
    fullness = [25 * (8000 - f) // 8000 for f in free]
    assert chooser.scores(SHARE, np.ones(4, bool)).tolist() == [
        fullness[0] + 75,
        fullness[1] + 50,
        fullness[2] + 25,
        fullness[3],
    ]
    assert chooser.place(CPU_ONLY, 0).node == 0  # type: ignore[union-attr]  # CPU-only: 0 everywhere, first feasible


def test_packing_prefers_shared_gpus_then_used_nodes_then_small_idle_nodes() -> None:
    state = cluster(node_table((96_000, 8, "G2"), (64_000, 2, "T4"), (64_000, 2, "T4"), (64_000, 2, "T4")))
    set_gpus(state, 2, [1000, 400])
    set_gpus(state, 3, [600, 1000])
    chooser = PackingPolicy(PolicyContext(state, SHAPES, None, np.random.default_rng()))  # type: ignore[arg-type]
    # idle 8-GPU: max(33-8, 8) = 25; idle 2-GPU: 31; n2 must open its free GPU: 49; n3 shares its 600: 100 - 6 = 94
    assert chooser.scores(SHARE, np.ones(4, bool)).tolist() == [25, 31, 49, 94]
    assert chooser.scores(WHOLE, np.ones(4, bool)).tolist() == [25, 31, 49, 49]
    assert chooser.place(SHARE, 0) == (3, (0,))


def test_bestfit_min_max_normalises_and_truncates() -> None:
    state = cluster(node_table((128_000, 8, "G2"), (64_000, 2, "T4"), (16_000, 1, "P100")))
    chooser = BestFitPolicy(PolicyContext(state, SHAPES, None, np.random.default_rng()))  # type: ignore[arg-type]
    # raw = ⌊100 (1 - leftover)⌋: n0 (120k CPU, 7 GPUs) 9, n1 (56k, 1) 71, n2 (8k, 0) 96
    assert chooser.scores(WHOLE, np.ones(3, bool)).tolist() == [0, (71 - 9) * 100 // 87, 100]
    assert chooser.place(WHOLE, 0) == (2, (0,))


def test_fgd_scores_the_fragment_change_and_picks_the_best_gpu() -> None:
    # target workload (helpers.DEFAULT_TYPICAL): 500-milli task w2, whole-GPU task w1, CPU-only task w1
    state = cluster(node_table((32_000, 4, "G2"), (32_000, 4, "G2"), (32_000, 4, "G2")))
    set_gpus(state, 1, [500, 1000, 1000, 1000])
    set_gpus(state, 2, [1000, 600, 1000, 600])
    fgd = FgdPolicy(PolicyContext(state, SHAPES, DEFAULT_TYPICAL, np.random.default_rng()))
    # n1: GPU0 500 -> 0 drops F from 2*0+500+3500 to 0+0+3000: Δ = 1000/4 = 250 milli -> ⌊100 σ(0.25)⌋ = 56
    # n2: a 600 -> 100 drops F from 4400 to 3600: Δ = 200 milli -> 54 (the first 600 is GPU 1); n0: Δ = 0 -> 50
    assert fgd.scorer.node_scores(SHARE).tolist() == [50, 56, 54]
    assert fgd.place(SHARE, 0) == (1, (0,))
    assert fgd.gpus_for(2, SHARE) == (1,)


def test_gpu_index_rules() -> None:
    state = cluster(node_table((64_000, 4, "G2")))
    set_gpus(state, 0, [1000, 300, 700, 300])
    for name in ("dotprod", "clustering", "packing", "best-fit"):
        chooser = policy(name, state, SHAPES)
        assert chooser.place(shape(1000, 250, 1), 0) == (0, (1,)), name  # least free that fits, lowest index
        assert chooser.place(PAIR, 0) is None, name  # only one whole GPU left
        assert chooser.place(WHOLE, 0) == (0, (0,)), name
    state = cluster(node_table((64_000, 4, "G2")))
    set_gpus(state, 0, [500, 1000, 1000, 1000])
    for name in DETERMINISTIC:
        assert policy(name, state, SHAPES).place(PAIR, 0) == (0, (1, 2)), name  # lowest-indexed whole GPUs


def test_random_draws_among_feasible_nodes_and_fitting_gpus() -> None:
    state = cluster(node_table(*[(64_000, 4, "G2")] * 4, (1000, 4, "G2")))
    set_gpus(state, 1, [1000, 200, 600, 100])
    chooser = policy("random", state, SHAPES, seed=3)
    nodes, gpus = Counter(), Counter()
    for _ in range(400):
        placement = chooser.place(SHARE, 0)
        nodes[placement.node] += 1  # type: ignore[union-attr]
        if placement.node == 1:  # type: ignore[union-attr]
            gpus[placement.gpus] += 1  # type: ignore[union-attr]
    assert set(nodes) == {0, 1, 2, 3} and min(nodes.values()) > 60  # node 4 lacks CPU
    assert set(gpus) == {(0,), (2,)}


def test_sigmoid_thresholds_equal_the_direct_formula() -> None:
    weight = 7766
    thresholds = score_thresholds(weight)
    deltas = np.random.default_rng(0).integers(-9000 * weight, 9000 * weight, 5000)
    deltas = np.concatenate([deltas, thresholds, thresholds - 1, [0, -1, 1]])
    fast = np.searchsorted(thresholds, deltas, side="right")
    assert fast.tolist() == [sigmoid_score(int(d), weight) for d in deltas]
    assert sigmoid_score(0, weight) == 50


def slice_of_trace(workload: Workload, every: int) -> NodeTable:
    nodes = workload.trace.nodes
    keep = np.arange(0, len(nodes.names), every)
    return NodeTable(
        names=tuple(nodes.names[i] for i in keep),
        cpu=nodes.cpu[keep],
        memory=nodes.memory[keep],
        gpus=nodes.gpus[keep],
        model=nodes.model[keep],
        models=nodes.models,
    )


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_fast_policies_match_the_literal_definitions(default_workload: Workload, name: str) -> None:
    nodes = slice_of_trace(default_workload, 41)  # 30 nodes of every kind, about 150 GPUs
    tie_order = np.random.default_rng(5).permutation(len(nodes.names))
    state = OpenbCluster(nodes, tie_order, default_workload.tasks)
    shapes = default_workload.shapes.shapes
    fast = make_policy(name, PolicyContext(state, shapes, default_workload.typical, np.random.default_rng(0)))
    plan = plan_arrivals(default_workload.trace.pods, 1213, 6212, 42)
    classes: list[set[str]] = [set() for _ in range(state.n)]
    placed = failed = 0
    for pod in plan.order[:450].tolist():
        pod_shape = shapes[int(default_workload.shapes.pod_shape[pod])]
        memory = int(default_workload.trace.pods.memory[pod])
        expected = oracle.choose(name, state, pod_shape, memory, default_workload.typical, classes)
        got = fast.place(pod_shape, memory)
        assert (None if got is None else (got.node, got.gpus)) == expected, (pod, pod_shape)
        if got is None:
            failed += 1
            continue
        state.bind(got.node, got.gpus, pod_shape.cpu, memory, pod_shape.gpu_milli)
        fast.bound(got, pod_shape)
        if pod_shape.num_gpu:
            classes[got.node].add(pod_shape.cluster_class)
        placed += 1
    assert placed > 60 and failed > 10  # the slice saturates: both branches are exercised


def test_every_policy_is_registered() -> None:
    assert set(FACTORIES) == {"random", *DETERMINISTIC}
