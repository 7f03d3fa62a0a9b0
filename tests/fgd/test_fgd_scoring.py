"""FGD's scores equal the literal definition on random workloads: one-GPU, multi-GPU, model-pinned and
CPU-only typical tasks, nodes with and without GPUs, through both scoring paths (Python and numpy), and
every state derived from its parent equals one derived from scratch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuslice.fgd.frag import TaskArrays
from gpuslice.fgd.policies import PolicyContext, make_policy
from gpuslice.fgd.policies import fgd as fgd_module
from gpuslice.fgd.shapes import Shape
from gpuslice.fgd.state import OpenbCluster
from tests.fgd import oracle
from tests.fgd.helpers import MODELS, node_table, shape, typical

REQUESTS = [(0, 0), (100, 1), (250, 1), (470, 1), (810, 1), (1000, 1), (1000, 2), (1000, 4)]
task = st.tuples(
    st.sampled_from([0, 1000, 4000, 9000, 30_000]),
    st.sampled_from(REQUESTS),
    st.sampled_from(["", "T4", "G2|P100"]),
    st.integers(1, 40),
)
node = st.tuples(
    st.sampled_from([2000, 8000, 32_000, 96_000]), st.sampled_from([0, 1, 2, 4, 8]), st.sampled_from(MODELS)
)
pod = st.tuples(st.sampled_from([0, 500, 2000, 6000, 16_000]), st.sampled_from(REQUESTS), st.sampled_from(["", "T4"]))


def shapes_of(pods: list[tuple[int, tuple[int, int], str]]) -> list[Shape]:
    keys = sorted({(c, u, k, spec) for c, (u, k), spec in pods})
    return [shape(c, u, k, spec, index=i) for i, (c, u, k, spec) in enumerate(keys)]


multi_gpu_task = st.tuples(
    st.sampled_from([0, 4000]),
    st.sampled_from([(1000, 2), (1000, 4)]),
    st.sampled_from(["", "G2|P100"]),
    st.integers(1, 40),
)


@pytest.mark.parametrize("batch", [False, True], ids=["python", "numpy"])
@pytest.mark.parametrize("name", ["fgd", "fgd-cpu", "fgd-cpu-sym"])
@settings(max_examples=50, deadline=None)
@given(
    tasks=st.lists(task, min_size=1, max_size=5),
    multi=st.lists(multi_gpu_task, max_size=2),  # tasks needing several GPUs take their own path
    nodes=st.lists(node, min_size=1, max_size=6),
    pods=st.lists(pod, min_size=1, max_size=40),
)
def test_fgd_places_as_the_literal_definition(
    name: str,
    batch: bool,
    tasks: list[tuple[int, tuple[int, int], str, int]],
    multi: list[tuple[int, tuple[int, int], str, int]],
    nodes: list[tuple[int, int, str]],
    pods: list[tuple[int, tuple[int, int], str]],
) -> None:
    tasks = tasks + multi
    workload = typical(*((shape(c, u, k, spec), w) for c, (u, k), spec, w in tasks))
    if name != "fgd" and not any(k and c for c, (_, k), _, _ in tasks):
        name = "fgd"  # the literal CPU-aware variants divide by κ: they need a typical GPU task asking CPU
    table = node_table(*nodes)
    cluster = OpenbCluster(table, list(range(len(nodes))), TaskArrays.build(workload, len(MODELS)))
    shapes = shapes_of(pods)
    by_key = {(s.cpu, s.gpu_milli, s.num_gpu, s.spec): s for s in shapes}
    policy = make_policy(name, PolicyContext(cluster, shapes, workload, np.random.default_rng(0)))
    saved = fgd_module.SCALAR_UP_TO
    fgd_module.SCALAR_UP_TO = -1 if batch else 10**9  # every missing state through one path
    try:
        for cpu, (milli, count), spec in pods:
            pod_shape = by_key[(cpu, milli, count, spec)]
            expected = oracle.choose(name, cluster, pod_shape, 0, workload, [set() for _ in range(cluster.n)])
            got = policy.place(pod_shape, 0)
            assert (None if got is None else (got.node, got.gpus)) == expected, (pod_shape, cluster.gpu_rows)
            if got is not None:
                cluster.bind(got.node, got.gpus, pod_shape.cpu, 0, pod_shape.gpu_milli)
                policy.bound(got, pod_shape)
    finally:
        fgd_module.SCALAR_UP_TO = saved
    states = cluster.states
    derived = np.flatnonzero(states.ready[: states.size])
    rows = states.packed[derived]
    assert np.array_equal(states._derive(rows.copy()), rows)
