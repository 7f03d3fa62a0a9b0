"""Stranded GPUs: the definition on hand-made states, and first-fit vs best-fit on the adversarial trace."""

from __future__ import annotations

import pytest

from gpuslice.sim.core.cluster import Binding, ClusterState
from gpuslice.sim.core.metrics import PendingDemand, stranded_gpus
from gpuslice.sim.core.model import PodSpec
from gpuslice.sim.traces import adversarial
from tests.sim.helpers import cluster, pod, simulate


def two_nodes() -> ClusterState:
    """Node 0: GPUs 0-4 taken (3 whole GPUs free). Node 1: half of GPUs 0 and 1 taken, 6 whole GPUs free."""
    s = ClusterState(cluster("2xdgx-h100"))
    s.apply(Binding(0, (0, 1, 2, 3, 4)), pod(5))
    s.apply(Binding(1, (0,)), pod(0.5))
    s.apply(Binding(1, (1,)), pod(0.5))
    return s


STRANDED_CASES = [
    # pending pods -> stranded GPUs
    ([], 0.0),  # nothing waits: idle, not stranded
    ([pod(4)], 3.0),  # node 0's 3 free GPUs are too few; node 1 fits a 4-GPU pod
    ([pod(7)], 3.0 + 7.0),  # node 1 has 7 GPUs free (6 whole + 2 halves) yet no 7 whole: all stranded
    ([pod(7), pod(0.25)], 0.0),  # a small pod fits both nodes
    ([pod(7), pod(6)], 3.0),  # the 6-GPU pod fits node 1 only
]


@pytest.mark.parametrize(("pending", "expected"), STRANDED_CASES)
def test_stranded_is_free_capacity_on_nodes_where_no_pending_pod_fits(pending: list[PodSpec], expected: float) -> None:
    assert stranded_gpus(two_nodes(), PendingDemand.of([tuple(pending)])) == pytest.approx(expected)


def test_shares_spread_over_gpus_are_stranded_for_a_bigger_share() -> None:
    s = ClusterState(cluster("1xh100x4"))
    for gpu in range(4):
        s.apply(Binding(0, (gpu,)), pod(0.5))  # 4 x 0.5 free, but never 0.75 on one GPU
    assert stranded_gpus(s, PendingDemand.of([(pod(0.75),)])) == pytest.approx(2.0)
    assert stranded_gpus(s, PendingDemand.of([(pod(0.5),)])) == 0.0


def test_cpu_exhaustion_strands_gpus() -> None:
    s = ClusterState(cluster("1xdgx-h100"))
    s.apply(Binding(0, ()), PodSpec.of(0, cpu_milli=int(s.cpu_free[0])))  # a CPU job takes every core
    assert stranded_gpus(s, PendingDemand.of([(pod(1),)])) == 8.0


def test_best_fit_strands_fewer_gpus_than_first_fit_on_the_adversarial_trace() -> None:
    trace = adversarial(pairs=8)
    _, first = simulate(trace.cluster, list(trace.jobs), "first-fit")
    _, best = simulate(trace.cluster, list(trace.jobs), "best-fit")
    assert best.stranded_gpus < first.stranded_gpus
    assert (best.stranded_gpus_peak, first.stranded_gpus_peak) == (0, 8)  # first-fit: the eight 1-GPU holes
    # The stranded holes cost first-fit throughput: the 4-GPU backlog and the whole run end later.
    assert best.makespan < first.makespan
    assert best.gpu_utilization > first.gpu_utilization
    assert first.jobs_completed == best.jobs_completed == len(trace.jobs)
