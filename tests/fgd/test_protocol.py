"""The inflation protocol: seeded shuffle, clones up to 1.3 x capacity (or removals), the node tie order."""

from __future__ import annotations

import numpy as np

from gpuslice.fgd.engine import Workload
from gpuslice.fgd.protocol import plan_arrivals
from gpuslice.fgd.trace import PodTable


def test_arrived_demand_is_inflated_to_130_percent(default_workload: Workload) -> None:
    pods = default_workload.trace.pods
    capacity = default_workload.total_gpus * 1000
    plan = plan_arrivals(pods, 1213, default_workload.total_gpus, 42)
    originals = len(pods)
    assert sorted(plan.order[:originals].tolist()) == list(range(originals))  # shuffled originals first
    assert plan.order[:originals].tolist() != list(range(originals))
    assert plan.clones == len(plan.order) - originals and 2500 < plan.clones < 2800
    demand = int(pods.gpu_request[plan.order].sum())
    # stop rule: the next draw would push total + its per-GPU milli over the target, so we end within 1 GPU
    assert 1.3 * capacity - 1000 < demand <= 1.3 * capacity
    assert 10_750 <= len(plan.order) <= 10_930
    assert sorted(plan.node_prefix.tolist()) == list(range(1213))


def test_a_seed_fixes_the_whole_plan(default_workload: Workload) -> None:
    pods, gpus = default_workload.trace.pods, default_workload.total_gpus
    first, again, other = (plan_arrivals(pods, 1213, gpus, s) for s in (42, 42, 43))
    assert np.array_equal(first.order, again.order) and np.array_equal(first.node_prefix, again.node_prefix)
    assert first.rng.integers(1 << 30) == again.rng.integers(1 << 30)  # the Random policy's stream too
    assert not np.array_equal(first.order[:100], other.order[:100])
    assert not np.array_equal(first.node_prefix, other.node_prefix)


def tiny_pods(requests: list[int]) -> PodTable:
    count = len(requests)
    return PodTable(
        names=tuple(f"p{i}" for i in range(count)),
        cpu=np.ones(count, dtype=np.int64),
        memory=np.ones(count, dtype=np.int64),
        num_gpu=np.array([r // 1000 if r >= 1000 else 1 for r in requests], dtype=np.int64),
        gpu_milli=np.array([1000 if r >= 1000 else r for r in requests], dtype=np.int64),
        spec=("",) * count,
    )


def test_a_trace_above_the_target_loses_random_pods_until_it_fits() -> None:
    pods = tiny_pods([8000] * 10)  # 80 GPUs requested on a 20-GPU cluster: target 26 GPUs
    plan = plan_arrivals(pods, 4, 20, 7)
    assert plan.clones == 0 and plan.removed == 7
    assert len(set(plan.order.tolist())) == 3 and int(pods.gpu_request[plan.order].sum()) <= 26_000


def test_the_stop_test_uses_the_drawn_pods_per_gpu_milli() -> None:
    # reference quirk: a 4 x 1000 pod passes the test when total + 1000 <= target, then adds 4000
    pods = tiny_pods([4000])
    plan = plan_arrivals(pods, 1, 10, 1)
    assert int(pods.gpu_request[plan.order].sum()) == 16_000  # 13 000 target, 12 000 + 1000 still passes


def test_ratio_zero_keeps_the_trace_as_it_is() -> None:
    pods = tiny_pods([500, 1000, 2000])
    plan = plan_arrivals(pods, 2, 4, 3, ratio=0)
    assert sorted(plan.order.tolist()) == [0, 1, 2] and plan.clones == plan.removed == 0
