"""Fragmentation measures: the worked example of every task-fragment case and the vectorised sums."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuslice.fgd.frag import TaskArrays, node_fragment, node_fragment_weighted, task_fragment
from gpuslice.fgd.state import StateTable
from tests.fgd.helpers import MODELS, cluster, node_table, set_gpus, shape, typical

G2 = MODELS.index("G2")
FREE = [1000, 600, 200, 0]  # 1800 milli free on a G2 node with 8 CPUs left


@pytest.mark.parametrize(
    ("case", "task", "fragment"),
    [
        ("Q3 satisfied: only GPUs too small count", shape(4000, 500, 1), 200),
        ("Q3 with a whole GPU: 600 and 200 are too small", shape(4000, 1000, 1), 800),
        ("Q4 lack CPU", shape(10_000, 500, 1), 1800),
        ("Q2 lack GPU: one whole GPU for a 2-GPU task", shape(2000, 1000, 2), 1800),
        ("Q1 lack both", shape(10_000, 1000, 2), 1800),
        ("CPU-only task can never use GPUs", shape(2000, 0, 0), 1800),
        ("no access: model not allowed", shape(1000, 100, 1, "T4"), 1800),
        ("small task fits everywhere but the empty GPU", shape(1000, 100, 1), 0),
    ],
)
def test_task_fragment_cases(case: str, task: object, fragment: int) -> None:
    assert task_fragment(8000, FREE, G2, task) == fragment, case  # type: ignore[arg-type]


def test_node_fragment_is_the_popularity_weighted_sum() -> None:
    tasks = typical((shape(4000, 500, 1), 3), (shape(2000, 0, 0), 1))
    assert node_fragment_weighted(8000, FREE, G2, tasks) == 3 * 200 + 1 * 1800
    assert node_fragment(8000, FREE, G2, tasks) == pytest.approx((3 * 200 + 1800) / 4)


def test_cluster_fragment_sums_nodes() -> None:
    tasks = typical((shape(4000, 500, 1), 3), (shape(2000, 0, 0), 1))
    state = cluster(node_table((8000, 4, "G2"), (3000, 2, "T4")), tasks=tasks)
    set_gpus(state, 0, FREE)
    set_gpus(state, 1, [700, 1000])
    g2_node = 3 * 200 + 1 * 1800
    t4_node = 3 * 1700 + 1 * 1700  # 3 000 CPU < 4 000: the GPU task lacks CPU there (Q4)
    assert state.fragment_weighted() == g2_node + t4_node
    assert state.fragment_milli() == pytest.approx((g2_node + t4_node) / 4)


task_strategy = st.tuples(
    st.sampled_from([0, 1000, 2000, 4000, 9000, 20_000]),
    st.sampled_from([(0, 0), (150, 1), (470, 1), (810, 1), (1000, 1), (1000, 2), (1000, 4)]),
    st.sampled_from(["", "T4", "G2|P100"]),
    st.integers(1, 50),
)


@settings(max_examples=40, deadline=None)
@given(
    tasks=st.lists(task_strategy, min_size=1, max_size=6),
    states=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 30_000), st.lists(st.integers(0, 1000), min_size=4, max_size=4)),
        min_size=1,
        max_size=6,
    ),
)
def test_vectorised_sums_equal_the_scalar_definition(
    tasks: list[tuple[int, tuple[int, int], str, int]], states: list[tuple[int, int, list[int]]]
) -> None:
    workload = typical(*((shape(c, u, k, spec), w) for c, (u, k), spec, w in tasks))
    table = StateTable(TaskArrays.build(workload, len(MODELS)), slots=4)
    sids = [table.intern(m, c, tuple(sorted(g, reverse=True))) for m, c, g in states]
    vector = table.frag(np.array(sids, dtype=np.int64))
    assert vector.tolist() == [node_fragment_weighted(c, g, m, workload) for m, c, g in states]
