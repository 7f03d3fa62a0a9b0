"""Where each policy puts pods, table by table."""

from __future__ import annotations

import numpy as np
import pytest

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.policies import POLICIES, UnknownPolicy, make_policy
from tests.sim.helpers import cluster, job, pod


def occupied(text: str, used: list[int]) -> ClusterState:
    """A cluster where node i already has used[i] whole GPUs taken."""
    s = ClusterState(cluster(text))
    for node, count in enumerate(used):
        if count:
            s.apply(Binding(node, tuple(range(count))), pod(count))
    return s


# used GPUs per 8-GPU node, pod size -> node chosen by first-fit, by best-fit
SINGLE_POD_CHOICES = [
    ([0, 0, 0], 1, 0, 0),
    ([4, 7, 0], 1, 0, 1),  # best-fit fills the 1-GPU hole, first-fit breaks the 4-GPU hole
    ([4, 7, 0], 4, 0, 0),
    ([6, 4, 0], 2, 0, 0),
    ([6, 4, 0], 3, 1, 1),
    ([5, 0, 2], 8, 1, 1),
    ([7, 5, 6], 2, 1, 2),  # best-fit: node 2 leaves 0
]


@pytest.mark.parametrize(("used", "size", "first", "best"), SINGLE_POD_CHOICES)
def test_single_pod_node_choice(used: list[int], size: int, first: int, best: int) -> None:
    for name, expected in (("first-fit", first), ("best-fit", best), ("gang", best), ("topology-aware", best)):
        s = occupied("3xdgx-h100;island=1", used)
        bindings = make_policy(name).place([pod(size)], job("j", size), s)
        assert bindings is not None
        assert bindings[0].node == expected, name


def test_nothing_fits_returns_none_and_leaves_state_alone() -> None:
    for name in POLICIES:
        s = occupied("2xdgx-h100;island=1", [4, 5])
        before = s.gpu_free.copy()
        assert make_policy(name).place([pod(8)], job("j", 8), s) is None
        assert np.array_equal(s.gpu_free, before)


def test_all_or_nothing_rolls_back_a_gang_that_does_not_fit() -> None:
    s = occupied("3xdgx-h100;island=1", [0, 0, 4])
    before = s.gpu_free.copy()
    pods = [pod(8)] * 3
    assert make_policy("gang").place(pods, job("g", 8, pods=3, gang=True), s) is None
    assert np.array_equal(s.gpu_free, before)
    bindings = make_policy("gang").place(pods[:2], job("g", 8, pods=2, gang=True), s)
    assert bindings is not None and sorted(b.node for b in bindings) == [0, 1]


def test_topology_aware_keeps_a_gang_inside_one_island() -> None:
    # Islands of 2 nodes: {0,1} has 8 + 4 free GPUs, {2,3} has 8 + 8. A 2 x 8-GPU gang fits only in {2,3};
    # best-fit alone would take node 0 first (as tight as any) and then spill into the other island.
    s = occupied("4xdgx-h100;island=2", [0, 4, 0, 0])
    bindings = make_policy("topology-aware").place([pod(8)] * 2, job("g", 8, pods=2, gang=True), s)
    assert bindings is not None and sorted(b.node for b in bindings) == [2, 3]
    spread = make_policy("gang").place(
        [pod(8)] * 2, job("g", 8, pods=2, gang=True), occupied("4xdgx-h100;island=2", [0, 4, 0, 0])
    )
    assert spread is not None and {int(s.island_of[b.node]) for b in spread} == {0, 1}


def test_topology_aware_prefers_the_tightest_island_that_holds_the_gang() -> None:
    s = occupied("6xdgx-h100;island=2", [0, 0, 0, 4, 0, 2])  # island free: 16, 12, 14
    bindings = make_policy("topology-aware").place([pod(4)] * 3, job("g", 4, pods=3, gang=True), s)
    assert bindings is not None and {int(s.island_of[b.node]) for b in bindings} == {1}


def test_topology_aware_spreads_when_no_island_can_hold_the_gang() -> None:
    s = occupied("4xdgx-h100;island=2", [4, 4, 4, 4])
    bindings = make_policy("topology-aware").place([pod(4)] * 3, job("g", 4, pods=3, gang=True), s)
    assert bindings is not None and len({int(s.island_of[b.node]) for b in bindings}) == 2


def test_policies_are_selected_by_name() -> None:
    assert list(POLICIES) == ["first-fit", "best-fit", "gang", "topology-aware", "nvlink-aware"]
    assert [make_policy(name).all_or_nothing for name in POLICIES] == [False, False, True, True, True]
    with pytest.raises(UnknownPolicy, match="known: first-fit, best-fit"):
        make_policy("worst-fit")
