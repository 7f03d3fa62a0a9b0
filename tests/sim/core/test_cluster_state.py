"""The numpy capacity arrays: feasibility, GPU choice inside a node, bind and release."""

from __future__ import annotations

import numpy as np

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.model import PodSpec
from tests.sim.helpers import cluster, pod


def state(text: str = "2xdgx-h100;island=1") -> ClusterState:
    return ClusterState(cluster(text))


def test_whole_gpus_take_the_lowest_free_indices() -> None:
    s = state()
    s.apply(Binding(0, (1, 3)), pod(2))
    assert s.choose_gpus(pod(3), 0) == (0, 2, 4)
    assert int(s.full_free[0]) == 6


def test_a_fraction_goes_to_the_fullest_gpu_that_still_fits() -> None:
    s = state()
    s.apply(Binding(0, (2,)), pod(0.5))  # GPU 2: 500 free
    s.apply(Binding(0, (5,)), pod(0.75))  # GPU 5: 250 free
    assert s.choose_gpus(pod(0.25), 0) == (5,)
    assert s.choose_gpus(pod(0.5), 0) == (2,)
    assert s.choose_gpus(pod(0.75), 0) == (0,)


def test_fit_mask_checks_gpus_cpu_memory_and_model() -> None:
    s = state("1xdgx-h100+1xa100x8;island=1")
    assert s.fit_mask(pod(8)).tolist() == [True, True]
    assert s.fit_mask(PodSpec.of(1, gpu_model="A100")).tolist() == [False, True]
    assert s.fit_mask(PodSpec.of(1, cpu_milli=200_000)).tolist() == [False, False]
    s.apply(Binding(0, (0,)), pod(0.5))
    assert s.fit_mask(pod(8)).tolist() == [False, True]
    assert s.fit_mask(pod(0.5)).tolist() == [True, True]
    assert [s.fits_node(pod(8), node) for node in (0, 1)] == [False, True]


def test_bind_then_release_restores_every_array() -> None:
    s = state()
    before = s.copy()
    bindings = [(s.bind(p, 0), p) for p in (pod(3), pod(0.25), pod(0.5), PodSpec.of(0, cpu_milli=5000))]
    assert int(s.free_milli[0]) == 8000 - 3750
    assert int(s.max_free[0]) == 1000
    for binding, p in reversed(bindings):
        s.release(binding, p)
    for name in ("gpu_free", "full_free", "max_free", "free_milli", "cpu_free", "memory_free"):
        assert np.array_equal(getattr(s, name), getattr(before, name)), name


def test_fresh_and_copy_do_not_share_free_capacity() -> None:
    s = state()
    twin = s.copy()
    s.bind(pod(8), 0)
    assert int(twin.full_free[0]) == 8
    assert int(s.fresh().full_free[0]) == 8
