"""Priority preemption with checkpoint cost: timings, victims, draining, accounting, and the preemption trace."""

from __future__ import annotations

import math

import pytest

from gpuslice.sim.core.engine import Engine, Listener
from gpuslice.sim.core.metrics import SimResult
from gpuslice.sim.core.model import JobSpec
from gpuslice.sim.experiments.compare import compare
from gpuslice.sim.extensions.checkpoint import Checkpointing
from gpuslice.sim.extensions.preemption import Checkpoints, PreemptionConfig, Preemptor, parse_grace
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import resolve_trace
from tests.sim.helpers import cluster, job

EVERY_100 = Checkpointing(interval=100, save=10, restore=20)
HOUR = 3600.0


def run(
    jobs: list[JobSpec],
    checkpoints: dict[str, Checkpointing],
    grace: float | None = 0.0,
    spec: str = "1xdgx-h100",
) -> tuple[Engine, SimResult]:
    """grace None: no preemption at all (checkpoints are still taken)."""
    ckpt = Checkpoints(checkpoints)
    listeners: list[Listener] = [ckpt]
    if grace is not None:
        listeners.append(Preemptor(ckpt, PreemptionConfig(grace=grace)))
    engine = Engine(cluster(spec), jobs, make_policy("gang"), listeners=listeners)
    return engine, engine.run()


def times(engine: Engine) -> dict[str, tuple[float | None, float | None]]:
    return {r.spec.job_id: (r.start_time, r.end_time) for r in engine.runs}


TRAIN_AND_URGENT = [job("train", 8, duration=1000), job("urgent", 8, submit=250, duration=100, priority=10)]


@pytest.mark.parametrize(
    ("grace", "urgent", "train_end", "lost_s", "saves"),
    [
        # killed at 250: saves at 110 and 220 kept 200 s of work, 30 s lost; restart at 350 restores (20 s),
        # does the other 800 s with 7 saves: 350 + 20 + 800 + 70 = 1240.
        (0.0, (250, 350), 1240, 30, 2 + 7),
        # drained: runs to its third save (330), loses nothing; restart at 430: 20 + 700 + 60 -> 1210.
        (math.inf, (330, 430), 1210, 0, 3 + 6),
        # grace 50 s < 80 s to the next save: cut at 300 with 80 s lost; restart at 400 -> 400 + 890 = 1290.
        (50.0, (300, 400), 1290, 80, 2 + 7),
    ],
)
def test_a_victim_pays_its_lost_work_saves_and_restore(
    grace: float, urgent: tuple[float, float], train_end: float, lost_s: float, saves: int
) -> None:
    engine, result = run(TRAIN_AND_URGENT, {"train": EVERY_100}, grace)
    assert times(engine)["urgent"] == urgent
    assert times(engine)["train"][1] == pytest.approx(train_end)
    extras = result.extras
    assert extras["preemptions"] == 1
    assert extras["lost_gpu_hours"] == pytest.approx(round(lost_s * 8 / HOUR, 3))
    assert extras["restore_gpu_hours"] == pytest.approx(round(20 * 8 / HOUR, 3))
    assert extras["checkpoint_gpu_hours"] == pytest.approx(round(saves * 10 * 8 / HOUR, 3))
    assert extras["wasted_gpu_hours"] == pytest.approx(extras["lost_gpu_hours"] + extras["restore_gpu_hours"], abs=1e-3)


def test_without_preemption_the_urgent_job_waits_and_saves_still_cost_time() -> None:
    engine, result = run(TRAIN_AND_URGENT, {"train": EVERY_100}, grace=None)
    assert times(engine) == {"train": (0, 1090), "urgent": (1090, 1190)}
    assert result.extras["preemptions"] == 0
    assert result.extras["wait_by_priority"]["10"]["wait_p50"] == 1090 - 250


def test_a_job_that_never_checkpoints_starts_over() -> None:
    engine, result = run(TRAIN_AND_URGENT, {"train": Checkpointing(None, 10, 20)})
    assert times(engine)["train"] == (350, 1350)  # all 250 s lost, no restore: 350 + 1000
    assert result.extras["lost_gpu_hours"] == pytest.approx(round(250 * 8 / HOUR, 3))
    assert result.extras["restore_gpu_hours"] == 0


@pytest.mark.parametrize(
    ("jobs", "evicted"),
    [
        # equal priority never preempts
        ([job("a", 8, duration=1000), job("b", 8, submit=250, duration=100)], []),
        # room elsewhere: nobody is evicted
        ([job("a", 8, duration=1000), job("b", 8, submit=250, duration=100, priority=10)], "2 nodes"),
        # the lowest priority goes first
        (
            [
                job("p5", 4, duration=1000, priority=5),
                job("p0", 4, duration=1000),
                job("u", 4, submit=250, priority=10),
            ],
            ["p0"],
        ),
        # one 2-GPU victim is enough for a 2-GPU job: the others stay
        ([*(job(f"s{i}", 2, duration=1000) for i in range(4)), job("u", 2, submit=250, priority=10)], ["s3"]),
    ],
)
def test_victim_choice(jobs: list[JobSpec], evicted: list[str] | str) -> None:
    spec = "2xdgx-h100" if evicted == "2 nodes" else "1xdgx-h100"
    engine, result = run(jobs, {j.job_id: EVERY_100 for j in jobs if j.priority < 10}, spec=spec)
    names = sorted(r.spec.job_id for r in engine.runs if r.evictions)
    assert names == ([] if evicted == "2 nodes" else evicted)
    assert result.extras["preemptions"] == len(names)


def test_the_victim_that_loses_least_goes_first() -> None:
    # At 250 "fresh" (saves every 100 s) has 30 s unsaved, "stale" (every 1000 s) all 250 s.
    jobs = [job("stale", 4, duration=2000), job("fresh", 4, duration=2000), job("u", 4, submit=250, priority=10)]
    checkpoints = {"stale": Checkpointing(1000, 10, 20), "fresh": EVERY_100}
    engine, _ = run(jobs, checkpoints)
    assert [r.spec.job_id for r in engine.runs if r.evictions] == ["fresh"]


def test_a_preemptor_that_finds_room_cancels_the_drain() -> None:
    # Node 0: a low job whose next save is far away (drain). Node 1: a top-priority job ending at 300.
    jobs = [
        job("low", 8, duration=5000),
        job("busy", 8, duration=300, priority=10),
        job("urgent", 8, submit=250, duration=100, priority=10),
    ]
    engine, result = run(jobs, {"low": Checkpointing(1000, 10, 20)}, grace=math.inf, spec="2xdgx-h100")
    assert times(engine)["urgent"] == (300, 400)
    assert result.extras["preemptions"] == 0
    assert engine.runs[0].evictions == 0


@pytest.mark.parametrize(("text", "value"), [("0", 0.0), ("600", 600.0), ("inf", math.inf), ("drain", math.inf)])
def test_grace_parsing(text: str, value: float) -> None:
    assert parse_grace(text) == value


def test_bad_grace_is_refused() -> None:
    with pytest.raises(ValueError, match="grace"):
        parse_grace("-1")


def test_the_preemption_trace_shows_the_trade_off() -> None:
    trace = resolve_trace("preemption:hours=8,nodes=4", seed=1)
    policies = ["gang", "preempt:ckpt=none", "preempt:ckpt=1800", "preempt:ckpt=1800:grace=inf", "preempt:ckpt=300"]
    records = {r["policy"]: r for r in compare(trace, policies).to_json()["results"]}
    assert all("preemptions" in record for record in records.values())

    def top_wait(name: str) -> float:
        return float(records[name]["wait_by_priority"]["100"]["wait_mean"])

    assert records["gang"]["preemptions"] == 0 and records["preempt:ckpt=1800"]["preemptions"] > 0
    # Killing serves the urgent jobs first (they wait only when urgent work alone fills the cluster);
    # draining makes them wait for the next save; without preemption they wait for training to end.
    assert top_wait("preempt:ckpt=1800") < top_wait("preempt:ckpt=1800:grace=inf") < top_wait("gang")
    # Draining wastes less than killing; never checkpointing wastes more than checkpointing.
    wasted = {name: records[name]["wasted_gpu_hours"] for name in records}
    assert wasted["preempt:ckpt=1800:grace=inf"] < wasted["preempt:ckpt=1800"] < wasted["preempt:ckpt=none"]
    # Frequent saves cost more GPU time than rare ones.
    assert records["preempt:ckpt=300"]["checkpoint_gpu_hours"] > records["preempt:ckpt=1800"]["checkpoint_gpu_hours"]
