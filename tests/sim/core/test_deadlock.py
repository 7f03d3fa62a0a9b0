"""Partial-allocation deadlocks: the two-gang trace, and the detection rule on smaller cases."""

from __future__ import annotations

import pytest

from gpuslice.sim.core.cluster import ClusterState
from gpuslice.sim.core.deadlock import find_deadlocked
from gpuslice.sim.core.engine import Engine
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.core.runs import JobRun, JobStatus
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import two_gang
from tests.sim.helpers import cluster, job, simulate


@pytest.mark.parametrize("policy", ["first-fit", "best-fit"])
def test_pod_by_pod_placement_deadlocks_on_two_gangs(policy: str) -> None:
    trace = two_gang(nodes=8)
    engine = Engine(trace.cluster, trace.jobs, make_policy(policy))
    result = engine.run()
    assert result.partial_allocation_deadlocks == 1
    assert result.jobs_deadlocked == 2 and result.jobs_completed == 0
    # Each gang holds half of the nodes: four 8-GPU pods bound, one missing, none running.
    assert [run.bound_count for run in engine.runs] == [4, 4]
    assert all(run.status is JobStatus.DEADLOCKED and run.deadlocked_at == 0 for run in engine.runs)
    assert engine.held_milli == 64_000 and engine.busy_milli == 0


@pytest.mark.parametrize("policy", ["gang", "topology-aware"])
def test_all_or_nothing_runs_one_gang_then_the_other(policy: str) -> None:
    trace = two_gang(nodes=8)
    bound_while_first_runs: list[int] = []

    def watch(engine: Engine) -> None:
        first, second = engine.runs
        if first.status is JobStatus.RUNNING:
            bound_while_first_runs.append(second.bound_count)

    engine = Engine(trace.cluster, trace.jobs, make_policy(policy), observer=watch)
    result = engine.run()
    assert result.partial_allocation_deadlocks == 0
    assert result.jobs_completed == 2
    first, second = engine.runs
    assert (first.start_time, second.start_time) == (0, 3600)
    assert bound_while_first_runs and set(bound_while_first_runs) == {0}  # nothing of the second gang is bound


def holder(spec_job: object, seq: int, bound_nodes: list[int], state: ClusterState) -> JobRun:
    run = JobRun.new(spec_job, seq)  # type: ignore[arg-type]
    for position, node in enumerate(bound_nodes):
        run.bound[position] = state.bind(run.spec.pods[position], node)
    return run


def test_a_holder_that_can_finish_once_another_finishes_is_not_deadlocked() -> None:
    # 3 nodes. A (gang of 2) holds node 0 and needs one more node; B (gang of 2) holds node 1 and node 2 is
    # free: B's missing pod fits node 2, so B can finish, give back node 1, and then A can finish too.
    state = ClusterState(cluster("3xdgx-h100"))
    a = holder(job("a", 8, pods=2, gang=True), 0, [0], state)
    b = holder(job("b", 8, pods=2, gang=True), 1, [1], state)
    assert find_deadlocked(state, [a, b], make_policy("first-fit")) == []


def test_holders_that_wait_on_each_other_are_deadlocked() -> None:
    state = ClusterState(cluster("2xdgx-h100"))
    a = holder(job("a", 8, pods=2, gang=True), 0, [0], state)
    b = holder(job("b", 8, pods=2, gang=True), 1, [1], state)
    assert find_deadlocked(state, [a, b], make_policy("first-fit")) == [a, b]


def test_running_jobs_count_as_capacity_that_will_come_back() -> None:
    # The only free capacity is taken by a running (non-gang) job; it will end, so the holder is fine.
    state = ClusterState(cluster("2xdgx-h100"))
    a = holder(job("a", 8, pods=2, gang=True), 0, [0], state)
    state.bind(job("running", 8).pods[0], 1)
    assert find_deadlocked(state, [a], make_policy("best-fit")) == []


def test_each_new_deadlock_is_counted_once() -> None:
    # Four H100 nodes and two A100 nodes. Gangs a and b (3 x 8-GPU H100 pods) interleave at t=0 and hold
    # two H100 nodes each: deadlock 1. Gangs c and d (2 x 8-GPU A100 pods) do the same at t=100 on the
    # A100 nodes: deadlock 2, detected while a and b are still (and already known to be) deadlocked.
    h100, a100 = PodSpec.of(8, gpu_model="H100"), PodSpec.of(8, gpu_model="A100")
    jobs = [
        JobSpec("a", 0, 50, (h100,) * 3, gang=True),
        JobSpec("b", 0, 50, (h100,) * 3, gang=True),
        JobSpec("c", 100, 50, (a100,) * 2, gang=True),
        JobSpec("d", 100, 50, (a100,) * 2, gang=True),
        JobSpec("tick", 200, 5, (PodSpec.of(0),)),  # something still happens after the deadlocks
    ]
    engine, result = simulate(cluster("4xdgx-h100+2xa100x8;island=6"), jobs, "first-fit")
    assert result.partial_allocation_deadlocks == 2
    assert result.jobs_deadlocked == 4
    assert [run.deadlocked_at for run in engine.runs[:4]] == [0, 0, 100, 100]
    assert [run.bound_count for run in engine.runs[:4]] == [2, 2, 1, 1]
    assert engine.runs[4].status is JobStatus.DONE
    # 48 GPUs held idle from their deadlock to the end of the run (t = 205).
    assert result.gpu_utilization < 0.01 < result.gpu_allocation
