"""The event engine: ordering, lifecycles, penalties, rejection, evictions, timers, determinism."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from gpuslice.sim.core.engine import Engine, SimConfig
from gpuslice.sim.core.model import JobSpec
from gpuslice.sim.core.queue import FifoOrder, SortKey, Unit
from gpuslice.sim.core.runs import JobStatus
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import resolve_trace
from tests.sim.helpers import cluster, job, pod, simulate


def test_a_job_waits_for_capacity_and_starts_when_it_is_released() -> None:
    engine, result = simulate(cluster("1xdgx-h100"), [job("a", 8, duration=100), job("b", 4, submit=10)], "best-fit")
    a, b = engine.runs
    assert (a.start_time, a.end_time) == (0, 100)
    assert (b.start_time, b.end_time) == (100, 110)
    assert b.wait == 90
    assert result.makespan == 110
    assert result.jobs_completed == 2


def test_same_time_ties_follow_submission_order() -> None:
    jobs = [job(name, 8, duration=5) for name in ("first", "second", "third")]
    engine, _ = simulate(cluster("1xdgx-h100"), jobs, "first-fit")
    assert [run.start_time for run in engine.runs] == [0, 5, 10]


def test_priority_order_overtakes_and_fifo_does_not() -> None:
    jobs = [job("hog", 8, duration=5), job("low", 8, submit=1), job("high", 8, submit=2, priority=5)]
    by_priority = Engine(cluster("1xdgx-h100"), jobs, make_policy("first-fit"))
    by_priority.run()
    assert [run.start_time for run in by_priority.runs] == [0, 15, 5]
    fifo = Engine(cluster("1xdgx-h100"), jobs, make_policy("first-fit"), FifoOrder())
    fifo.run()
    assert [run.start_time for run in fifo.runs] == [0, 5, 15]


def test_small_jobs_backfill_around_a_big_one() -> None:
    # The 8-GPU job is first in the queue but cannot fit; the 1-GPU job behind it still runs.
    jobs = [job("half", 4, duration=50), job("big", 8, submit=1), job("small", 1, submit=2, duration=5)]
    engine, _ = simulate(cluster("1xdgx-h100"), jobs, "best-fit")
    assert [run.start_time for run in engine.runs] == [0, 50, 2]


def test_gang_pods_start_together_and_non_gang_pods_start_alone() -> None:
    spec = cluster("2xdgx-h100;island=2")
    jobs = [job("hog", 8, duration=30), job("gang", 8, submit=1, pods=2, gang=True), job("loose", 8, submit=1, pods=2)]
    engine, result = simulate(spec, jobs, "first-fit")
    gang, loose = engine.runs[1], engine.runs[2]
    # Queue at t=1: gang pod 0, loose pod 0, gang pod 1, loose pod 1 (pods of simultaneous jobs interleave).
    # Gang pod 0 takes node 1 and holds it idle; at 30 loose pod 0 gets node 0 and runs alone until 40;
    # then gang pod 1 joins and both gang pods start together; loose pod 1 runs last.
    assert gang.start_time == 40 and gang.end_time == 50
    assert loose.start_time == 50 and loose.end_time == 60
    # Node 1 was held but idle over [1, 40): allocation exceeds utilization by 8 GPUs x 39 s / (16 GPUs x 60 s).
    assert result.gpu_allocation - result.gpu_utilization == pytest.approx(8 * 39 / (16 * 60))


def test_a_gang_spread_over_islands_runs_slower_by_the_penalty() -> None:
    spec = cluster("2xdgx-h100;island=1")  # every node its own island
    engine, result = simulate(spec, [job("g", 8, pods=2, gang=True, duration=100)], "gang", penalty=0.5)
    assert engine.runs[0].end_time == 150
    assert result.cross_island_jobs == 1
    assert result.gpu_goodput == pytest.approx(result.gpu_utilization / 1.5)
    same_island = simulate(cluster("2xdgx-h100;island=2"), [job("g", 8, pods=2, gang=True, duration=100)], "gang")
    assert same_island[0].runs[0].end_time == 100


def test_jobs_that_can_never_fit_are_rejected() -> None:
    jobs = [job("too-wide", 16), job("too-many", 8, pods=3, gang=True), job("ok", 8, pods=2, gang=True)]
    engine, result = simulate(cluster("2xdgx-h100"), jobs, "first-fit")
    assert [run.status for run in engine.runs] == [JobStatus.REJECTED, JobStatus.REJECTED, JobStatus.DONE]
    assert result.jobs_rejected == 2


def test_evict_requeues_a_running_job_and_releases_its_gpus() -> None:
    spec = cluster("1xdgx-h100")
    engine = Engine(
        spec, [job("victim", 8, duration=100), job("vip", 8, submit=10, duration=5, priority=9)], make_policy("gang")
    )

    def preempt(e: Engine) -> None:
        e.evict(e.runs[0])

    engine.schedule_timer(10, preempt)
    result = engine.run()
    victim, vip = engine.runs
    assert (vip.start_time, vip.end_time) == (10, 15)
    assert (victim.start_time, victim.end_time, victim.evictions) == (15, 115, 1)
    assert result.evictions == 1 and result.jobs_completed == 2


def test_evicting_a_finished_job_is_refused() -> None:
    engine = Engine(cluster("1xdgx-h100"), [job("a", 1)], make_policy("gang"))
    engine.run()
    with pytest.raises(ValueError, match="only live jobs"):
        engine.evict(engine.runs[0])


def test_runs_are_reproducible_from_the_seed() -> None:
    def once(seed: int) -> dict[str, object]:
        trace = resolve_trace("synthetic:jobs=400,nodes=8,load=0.9", seed)
        return Engine(trace.cluster, trace.jobs, make_policy("first-fit"), config=SimConfig(seed=seed)).run().summary()

    assert once(3) == once(3)
    assert once(3) != once(4)


def test_time_weighted_utilization_by_hand() -> None:
    # 8 GPUs: 4 busy over [0, 10), 8 busy over [10, 20), 0 after; window [0, 20] -> (4*10 + 8*10) / (8*20).
    jobs = [JobSpec("a", 0, 20, (pod(4),)), JobSpec("b", 10, 10, (pod(4),))]
    _, result = simulate(cluster("1xdgx-h100"), jobs, "best-fit")
    assert result.gpu_utilization == pytest.approx(0.75)
    assert result.makespan == 20


class FewestGpusFirst:
    """A dynamic order for the test: the tenant holding the fewest GPUs goes next (DRF's shape, one resource)."""

    name = "fewest-gpus"
    dynamic = True

    def attach(self, engine: Engine) -> None:
        self.engine = engine

    def key(self, unit: Unit) -> SortKey:
        return (unit.job.submit, unit.pod_indices[0], unit.seq)

    def bucket(self, job: JobSpec) -> Hashable:
        return job.tenant

    def rank(self, unit: Unit) -> SortKey:
        return (self.engine.tenant_usage.get(unit.job.tenant, [0])[0], *self.key(unit))


def test_a_dynamic_order_sees_tenant_usage_as_the_pass_places_pods() -> None:
    jobs = [JobSpec(f"a{i}", 0, 10, (pod(1),), tenant="a") for i in range(8)]
    jobs += [JobSpec(f"b{i}", 0, 10, (pod(1),), tenant="b") for i in range(4)]
    fair = Engine(cluster("1xdgx-h100"), jobs, make_policy("best-fit"), FewestGpusFirst())
    fair.run()
    starts = [run.start_time for run in fair.runs]
    assert starts[8:] == [0, 0, 0, 0]  # b gets half the node at once
    assert starts[:8] == [0, 0, 0, 0, 10, 10, 10, 10]
    assert fair.tenant_usage == {"a": [0, 0, 0], "b": [0, 0, 0]}  # everything given back at the end
    fifo = Engine(cluster("1xdgx-h100"), jobs, make_policy("best-fit"))
    fifo.run()
    assert [run.start_time for run in fifo.runs][8:] == [10, 10, 10, 10]


def test_an_evicted_job_can_be_requeued_later() -> None:
    engine = Engine(cluster("1xdgx-h100"), [job("victim", 8, duration=100)], make_policy("gang"))
    engine.schedule_timer(10, lambda e: e.evict(e.runs[0], requeue_after=50))
    engine.run()
    assert (engine.runs[0].start_time, engine.runs[0].end_time) == (60, 160)
