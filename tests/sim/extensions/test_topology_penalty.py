"""NVLink rings and islands inside nodes, the slowdown of split jobs, and the nvlink-aware policy."""

from __future__ import annotations

import pytest

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.experiments.compare import compare
from gpuslice.sim.extensions.nvlink import Penalties, choose_gpu_set, has_nvlink_ring, placement_slowdown
from gpuslice.sim.policies import NvlinkAware
from gpuslice.sim.traces import resolve_trace
from gpuslice.sim.traces.topology import topology_cluster
from gpuslice.topology import preset_topology

DGX1 = preset_topology("dgx1-v100")
_, QUADS_TOPOLOGIES = topology_cluster("quads", 1, 1)
QUADS = QUADS_TOPOLOGIES[0]


@pytest.mark.parametrize(
    ("gpus", "ring"),
    [
        ((0,), True),
        ((0, 1), True),  # one NVLink
        ((0, 5), False),  # no NVLink between them
        ((0, 1, 2, 3), True),  # a fully connected quad
        ((0, 1, 4, 5), True),  # 0-1-5-4-0 over the cross links
        ((2, 3, 4, 5), False),  # GPU 3 reaches neither 4 nor 5
        ((0, 2, 5, 7), False),
        (tuple(range(8)), True),  # the cube-mesh has an 8-GPU ring
    ],
)
def test_nvlink_rings_on_the_dgx1_cube_mesh(gpus: tuple[int, ...], ring: bool) -> None:
    assert has_nvlink_ring(DGX1, gpus) is ring


@pytest.mark.parametrize(
    ("gpus", "ring"),
    [((0, 1, 2, 3), True), ((4, 5, 6, 7), True), ((2, 3, 4, 5), False), ((3, 4), False), (tuple(range(8)), False)],
)
def test_two_nvlink_islands_per_node(gpus: tuple[int, ...], ring: bool) -> None:
    assert QUADS.nvlink_islands() == (frozenset({0, 1, 2, 3}), frozenset({4, 5, 6, 7}))
    assert has_nvlink_ring(QUADS, gpus) is ring


def test_every_subset_is_a_ring_behind_an_nvswitch() -> None:
    h100 = preset_topology("dgx-h100")
    assert has_nvlink_ring(h100, (0, 3, 5, 6)) and has_nvlink_ring(h100, (1, 7))


@pytest.mark.parametrize(
    ("bindings", "slowdown"),
    [
        ([Binding(0, (0, 1, 2, 3))], 1.0),
        ([Binding(0, (2, 3, 4, 5))], 1.3),  # one node, no NVLink ring: split penalty
        ([Binding(0, (0, 1)), Binding(0, (2, 3))], 1.0),  # a gang on one node is judged as one GPU set
        ([Binding(0, (0, 1, 2, 3)), Binding(1, (0, 1, 2, 3))], 1.4),  # two nodes, one node island
        ([Binding(0, (0, 1, 2, 3)), Binding(2, (0, 1, 2, 3))], 1.4 + 0.3),  # and across node islands
    ],
)
def test_placement_slowdown(bindings: list[Binding], slowdown: float) -> None:
    cluster, topologies = topology_cluster("dgx1-v100", 4, 2)
    state = ClusterState(cluster)
    assert placement_slowdown(state, topologies, bindings, Penalties(0.3, 0.4), 0.3) == pytest.approx(slowdown)


@pytest.mark.parametrize(
    ("free", "size", "chosen"),
    [
        ((0, 1, 2, 3, 4, 5, 6, 7), 4, True),
        ((2, 3, 4, 5, 6, 7), 4, True),  # {4, 5, 6, 7} is a ring; the lowest four are not
        ((2, 3, 4, 5), 4, False),  # nothing better exists
        ((0, 5), 2, False),
    ],
)
def test_choose_gpu_set_finds_a_ring_when_one_exists(free: tuple[int, ...], size: int, chosen: bool) -> None:
    gpus, ring = choose_gpu_set(DGX1, free, size)
    assert len(gpus) == size and set(gpus) <= set(free)
    assert ring is chosen and has_nvlink_ring(DGX1, gpus) is chosen


def test_nvlink_aware_keeps_a_4_gpu_pod_on_a_ring_where_best_fit_would_not() -> None:
    cluster, topologies = topology_cluster("dgx1-v100", 1, 1)
    state = ClusterState(cluster)
    state.apply(Binding(0, (0, 1)), PodSpec.of(2))  # GPUs 2..7 free: lowest-index 4 would be 2, 3, 4, 5
    pod = PodSpec.of(4)
    assert state.choose_gpus(pod, 0) == (2, 3, 4, 5) and not has_nvlink_ring(DGX1, (2, 3, 4, 5))
    bindings = NvlinkAware(topologies).place([pod], JobSpec("j", 0, 1, (pod,)), state)
    assert bindings is not None and has_nvlink_ring(DGX1, bindings[0].gpus)


def test_nvlink_aware_puts_a_gang_on_one_node_when_one_can_hold_it() -> None:
    cluster, topologies = topology_cluster("dgx-h100", 3, 3)
    state = ClusterState(cluster)
    state.apply(Binding(0, (0, 1, 2, 3)), PodSpec.of(4))  # node 0 has 4 free: best-fit would start there
    pod = PodSpec.of(4)
    bindings = NvlinkAware(topologies).place([pod, pod], JobSpec("g", 0, 1, (pod, pod), gang=True), state)
    assert bindings is not None and bindings[0].node == bindings[1].node != 0


def test_topology_aware_placement_pays_for_4_and_8_gpu_jobs() -> None:
    trace = resolve_trace("topology:jobs=250,nodes=8,island=4")
    records = {r["policy"]: r for r in compare(trace, ["best-fit", "nvlink-aware"]).to_json()["results"]}
    blind, aware = records["best-fit"]["topology_by_gpus"], records["nvlink-aware"]["topology_by_gpus"]
    for size in ("4", "8"):
        assert aware[size]["split"] < blind[size]["split"]
        assert aware[size]["mean_slowdown"] < blind[size]["mean_slowdown"]
    assert records["nvlink-aware"]["split_jobs"] < records["best-fit"]["split_jobs"]
    assert blind["1"]["split"] == aware["1"]["split"] == 0


def test_the_topology_trace_rejects_an_unknown_node_kind() -> None:
    with pytest.raises(ValueError, match="node must be one of"):
        resolve_trace("topology:node=dgx-9000")
