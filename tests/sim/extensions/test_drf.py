"""Dominant Resource Fairness: the paper's example, weights, Jain's index, the DRF queue order, the tenants trace."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuslice.sim.core.engine import Engine
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.experiments.compare import compare
from gpuslice.sim.extensions.drf import DrfOrder, dominant_share, jain_index, largest_gap, progressive_filling
from gpuslice.sim.extensions.orders import ORDERS
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import resolve_trace
from tests.sim.helpers import cluster

# Ghodsi et al. section 4: 9 CPUs, 18 GB; A's tasks <1 CPU, 4 GB>, B's <3 CPU, 1 GB>.
CAPACITY = (9, 18)
DEMANDS = {"A": (1, 4), "B": (3, 1)}

# The progressive-filling trace of scheduling.md section 8, first tie broken toward B: (pick, s_A, s_B, CPU, GB).
PAPER_TRACE = [
    ("B", Fraction(0), Fraction(1, 3), 3, 1),
    ("A", Fraction(2, 9), Fraction(1, 3), 4, 5),
    ("A", Fraction(4, 9), Fraction(1, 3), 5, 9),
    ("B", Fraction(4, 9), Fraction(2, 3), 8, 10),
    ("A", Fraction(2, 3), Fraction(2, 3), 9, 14),
    (None, Fraction(2, 3), Fraction(2, 3), 9, 14),  # the next task of either user does not fit: stop
]


def test_the_papers_example_gives_three_and_two_tasks_at_two_thirds() -> None:
    result = progressive_filling(CAPACITY, DEMANDS, tie_break=["B", "A"])
    assert result.tasks == {"A": 3, "B": 2}
    assert result.shares == {"A": Fraction(2, 3), "B": Fraction(2, 3)}
    assert result.consumed == (9, 14)  # all 9 CPUs, 14 of 18 GB


@pytest.mark.parametrize(("step", "expected"), list(enumerate(PAPER_TRACE)))
def test_the_papers_progressive_filling_trace(
    step: int, expected: tuple[str | None, Fraction, Fraction, int, int]
) -> None:
    row = progressive_filling(CAPACITY, DEMANDS, tie_break=["B", "A"]).steps[step]
    assert (row.user, row.shares["A"], row.shares["B"], *row.consumed) == expected


def test_breaking_the_first_tie_toward_a_ends_the_same() -> None:
    result = progressive_filling(CAPACITY, DEMANDS, tie_break=["A", "B"])
    assert result.tasks == {"A": 3, "B": 2}
    assert result.steps[0].user == "A"


@pytest.mark.parametrize(
    ("weights", "tasks"),
    [
        ({"A": 1, "B": 1}, {"A": 5, "B": 4}),  # alternating from A: 9 CPUs run out after 5 + 4
        ({"A": 2, "B": 1}, {"A": 6, "B": 3}),  # weighted shares equal: A holds twice B's share
        ({"A": 1, "B": 2}, {"A": 3, "B": 6}),
        ({"A": 1, "B": 8}, {"A": 1, "B": 8}),
    ],
)
def test_weighted_drf(weights: dict[str, int], tasks: dict[str, int]) -> None:
    same = {"A": (1, 1), "B": (1, 1)}  # identical <1 CPU, 1 GB> tasks on 9 CPUs, 18 GB
    assert progressive_filling(CAPACITY, same, weights, tie_break=["A", "B"]).tasks == tasks


def test_work_conserving_filling_continues_with_those_whose_task_still_fits() -> None:
    # The paper's rule stops at the first task that does not fit; skipping B lets A use the 4 spare GB.
    plain = progressive_filling((10, 18), DEMANDS, tie_break=["B", "A"])
    conserving = progressive_filling((10, 18), DEMANDS, tie_break=["B", "A"], work_conserving=True)
    assert conserving.tasks["A"] > plain.tasks["A"]
    assert conserving.tasks["B"] == plain.tasks["B"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"capacity": (9,), "demands": DEMANDS}, "resources"),
        ({"capacity": CAPACITY, "demands": {"A": (0, 0)}}, "must demand"),
        ({"capacity": CAPACITY, "demands": DEMANDS, "weights": {"A": 0}}, "positive"),
        ({"capacity": CAPACITY, "demands": DEMANDS, "tie_break": ["A"]}, "every user"),
    ],
)
def test_bad_filling_input(bad: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        progressive_filling(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("values", "jain", "gap"),
    [
        ([0.5, 0.5], 1.0, 0.0),
        ([1.0, 0.0], 0.5, 1.0),
        ([1.0, 0.0, 0.0, 0.0], 0.25, 1.0),
        ([], 1.0, 0.0),
        ([0.0, 0.0], 1.0, 0.0),
    ],
)
def test_jain_index_and_largest_gap(values: list[float], jain: float, gap: float) -> None:
    assert jain_index(values) == pytest.approx(jain)
    assert largest_gap(values) == pytest.approx(gap)


@pytest.mark.parametrize(
    ("usage", "capacity", "weight", "share"),
    [
        ((3, 12), (9, 18), 1.0, 2 / 3),
        ((6, 2), (9, 18), 1.0, 2 / 3),
        ((6, 2), (9, 18), 2.0, 1 / 3),
        ((1, 1), (0, 2), 1, 0.5),
    ],
)
def test_dominant_share(usage: tuple[int, int], capacity: tuple[int, int], weight: float, share: float) -> None:
    assert dominant_share(usage, capacity, weight) == pytest.approx(share)


def _tenant_jobs() -> list[JobSpec]:
    # "big" queues eight 1-GPU jobs first; "small" queues four a moment later. One 8-GPU node.
    one = PodSpec.of(1, cpu_milli=1000, memory_mib=1024)
    jobs = [JobSpec("hog", 0.0, 50.0, (PodSpec.of(8),), tenant="big")]  # holds the node until 50
    jobs += [JobSpec(f"big-{i}", 0.0, 100.0, (one,), tenant="big") for i in range(8)]
    jobs += [JobSpec(f"small-{i}", 1.0, 100.0, (one,), tenant="small") for i in range(4)]
    return jobs


@pytest.mark.parametrize(
    ("order", "small_first_wave"),
    [("fifo", 0), ("drf", 4)],  # at t = 50 FIFO gives all 8 GPUs to "big"; DRF alternates: 4 each
)
def test_the_drf_order_serves_the_tenant_with_the_lowest_share(order: str, small_first_wave: int) -> None:
    engine = Engine(cluster("1xdgx-h100"), _tenant_jobs(), make_policy("best-fit"), ORDERS[order]())
    engine.run()
    started_at_50 = [r.spec.tenant for r in engine.runs if r.start_time == 50]
    assert started_at_50.count("small") == small_first_wave
    assert len(started_at_50) == 8


def test_weighted_drf_order_gives_the_heavier_tenant_more() -> None:
    engine = Engine(cluster("1xdgx-h100"), _tenant_jobs(), make_policy("best-fit"), DrfOrder({"big": 3.0}))
    engine.run()
    started_at_50 = [r.spec.tenant for r in engine.runs if r.start_time == 50]
    assert started_at_50.count("big") == 6 and started_at_50.count("small") == 2


def test_on_the_tenants_trace_drf_is_fairest() -> None:
    trace = resolve_trace("tenants:hours=4,nodes=4,burst=12")
    records = {r["policy"]: r for r in compare(trace, ["fifo", "priority", "drf", "wdrf"]).to_json()["results"]}
    assert all(0 < r["jain_index"] <= 1 for r in records.values())
    jain = {name: r["jain_index"] for name, r in records.items()}
    assert jain["drf"] > jain["fifo"] and jain["drf"] > jain["priority"]
    assert records["drf"]["max_share_gap"] < records["fifo"]["max_share_gap"]
    # Weighted DRF aims at equal weighted shares, and gets closer to them than plain DRF.
    assert records["wdrf"]["jain_index_weighted"] > records["drf"]["jain_index_weighted"]
    assert set(records["drf"]["tenants"]) == {"etl", "nlp", "vision"}
