"""Kueue-style admission: quota, the pods-ready timeout, exponential backoff, limits, and the two-gang comparison."""

from __future__ import annotations

import pytest

from gpuslice.sim.core.engine import Engine
from gpuslice.sim.core.metrics import SimResult
from gpuslice.sim.core.model import JobSpec
from gpuslice.sim.core.runs import JobStatus
from gpuslice.sim.experiments.compare import compare
from gpuslice.sim.extensions.kueue import Kueue, KueueConfig
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import two_gang
from tests.sim.helpers import job


@pytest.mark.parametrize(
    ("requeues", "seconds"),
    [(1, 60), (2, 120), (3, 240), (4, 480), (5, 960), (6, 1920), (7, 3600), (8, 3600), (100, 3600)],
)
def test_backoff_doubles_from_60_s_up_to_an_hour(requeues: int, seconds: float) -> None:
    assert KueueConfig().backoff(requeues) == seconds


def test_backoff_jitter_is_tiny_and_never_exceeds_the_cap() -> None:
    config = KueueConfig()
    assert 60 < config.backoff(1, 0.999) < 60.01
    assert config.backoff(7, 0.999) == 3600
    with pytest.raises(ValueError, match="starts at 1"):
        config.backoff(0)


@pytest.mark.parametrize(
    "bad",
    [
        {"timeout": 0},
        {"backoff_base": 0},
        {"backoff_base": 100, "backoff_max": 50},
        {"backoff_limit": -1},
        {"quota_gpus": 0},
    ],
)
def test_bad_config_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        KueueConfig(**bad)  # type: ignore[arg-type]


def run(jobs: list[JobSpec], config: KueueConfig, nodes: int = 8) -> tuple[Engine, Kueue, SimResult]:
    trace = two_gang(nodes)
    kueue = Kueue(config)
    engine = Engine(trace.cluster, jobs or trace.jobs, make_policy("first-fit"), listeners=[kueue])
    return engine, kueue, engine.run()


def test_quota_that_matches_the_cluster_admits_one_gang_at_a_time() -> None:
    engine, kueue, result = run([], KueueConfig())
    a, b = engine.runs
    assert (a.start_time, b.start_time) == (0, 3600)
    assert result.partial_allocation_deadlocks == 0 and kueue.timeouts == 0


def test_an_overcommitted_quota_deadlocks_and_the_timeout_breaks_it() -> None:
    engine, kueue, result = run([], KueueConfig(quota_gpus=128))
    a, b = engine.runs
    # Both admitted at 0, both half-placed: deadlock. At 300 s both time out and are evicted; requeued after
    # 60 s (plus a different jitter each), the first back takes five nodes and runs; the other waits.
    assert result.partial_allocation_deadlocks == 1
    assert kueue.timeouts >= 2 and result.evictions == kueue.timeouts
    first = min(a.start_time or 0, b.start_time or 0)
    assert 360 <= first < 361
    assert result.jobs_completed == 2
    assert result.extras["requeues"] == kueue.timeouts


def test_block_admission_admits_the_next_only_once_the_first_is_ready() -> None:
    engine, _, result = run([], KueueConfig(quota_gpus=128, block_admission=True))
    assert result.partial_allocation_deadlocks == 0
    assert engine.runs[0].start_time == 0 and result.jobs_completed == 2


def test_the_backoff_limit_deactivates_the_workload() -> None:
    # One gang that can never get its pods ready: 6 pods on 8 nodes, but another job holds 4 nodes for 5 h.
    holder = JobSpec("holder", 0.0, 5 * 3600.0, two_gang(8).jobs[0].pods[:4], gang=True)
    stuck = JobSpec("stuck", 1.0, 3600.0, two_gang(8).jobs[0].pods[:1] * 6, gang=True)
    engine, kueue, result = run([holder, stuck], KueueConfig(quota_gpus=128, backoff_limit=2))
    assert kueue.timeouts == 3 and kueue.deactivated == 1
    assert engine.runs[1].status is JobStatus.REJECTED
    assert result.extras["deactivated"] == 1


def test_a_short_timeout_evicts_sooner() -> None:
    _, kueue_short, _ = run([], KueueConfig(quota_gpus=128, timeout=60))
    _, kueue_long, _ = run([], KueueConfig(quota_gpus=128, timeout=1800))
    assert kueue_short.timeouts > kueue_long.timeouts


def test_kueue_against_strict_gangs_on_the_two_gang_trace() -> None:
    policies = ["first-fit", "gang", "kueue", "kueue:overcommit=2", "kueue:overcommit=2:block=1"]
    records = {r["policy"]: r for r in compare(two_gang(8), policies).to_json()["results"]}
    assert records["first-fit"]["jobs_completed"] == 0
    assert records["gang"]["makespan"] == records["kueue"]["makespan"] == 7200
    over = records["kueue:overcommit=2"]
    assert over["jobs_completed"] == 2 and over["pods_ready_timeouts"] >= 2 and over["makespan"] > 7200
    assert records["kueue:overcommit=2:block=1"]["partial_allocation_deadlocks"] == 0


def test_bad_kueue_options_name_the_option() -> None:
    with pytest.raises(ValueError, match="timeout must be a number"):
        compare(two_gang(8), ["kueue:timeout=soon"])
    with pytest.raises(ValueError, match="unknown option"):
        compare(two_gang(8), ["kueue:colour=blue"])


def test_jobs_without_gangs_pass_through() -> None:
    jobs = [job("a", 8, duration=100), job("b", 8, duration=100)]
    engine, kueue, result = run(jobs, KueueConfig())
    assert [r.start_time for r in engine.runs] == [0, 0] and kueue.timeouts == 0
    assert result.jobs_completed == 2
