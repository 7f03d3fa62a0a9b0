"""Sharing tiers: mapping fractional jobs to each mechanism, MIG placement rules, speeds, exposure, the comparison."""

from __future__ import annotations

import pytest

from gpuslice.gpu import catalogue_for
from gpuslice.sim.core.model import JobSpec, PodSpec, SimModelError
from gpuslice.sim.experiments.compare import compare
from gpuslice.sim.extensions.tiers import (
    GpuSlot,
    Mechanism,
    ShareDemand,
    TierEngine,
    TierParams,
    balanced_layout,
    plan_for,
)
from gpuslice.sim.traces import resolve_trace
from tests.sim.helpers import cluster

GIB = 1024
H100 = cluster("1xdgx-h100").nodes[0].gpus[0]  # NVIDIA H100 80GB HBM3, 81559 MiB
H100_MIG = catalogue_for(H100.product_name, H100.memory_mib)


def slot(mechanism: Mechanism, **params: object) -> GpuSlot:
    return GpuSlot.build(H100, mechanism, TierParams(**params))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("compute", "gib", "mig", "mps_replicas"),
    [
        (0.10, 6, "1g.10gb", 1),
        (0.10, 10, "1g.20gb", 1),  # a full 10 GiB does not fit 1g.10gb's 9.96 GiB
        (0.25, 16, "2g.20gb", 1),  # 1/7 of the SMs is not a quarter: 2g
        (0.40, 30, "3g.40gb", 2),
        (0.50, 36, "4g.40gb", 2),  # 3/7 < 1/2: the only "half" with enough SMs is 4g
        (0.90, 70, "7g.80gb", 4),
    ],
)
def test_a_demand_maps_to_each_mechanism(compute: float, gib: int, mig: str, mps_replicas: int) -> None:
    demand = ShareDemand(compute, gib * GIB)
    assert slot(Mechanism.MIG).fit(1, demand).profile == mig  # type: ignore[union-attr]
    assert slot(Mechanism.MPS).fit(1, demand).replicas == mps_replicas  # type: ignore[union-attr]
    assert slot(Mechanism.TIME_SLICING).fit(1, demand).replicas == 1  # type: ignore[union-attr]
    assert slot(Mechanism.WHOLE).fit(1, demand) is not None


@pytest.mark.parametrize(
    ("mechanism", "demands", "fits"),
    [
        (Mechanism.WHOLE, [(0.1, 1), (0.1, 1)], [True, False]),  # one job per GPU
        (Mechanism.TIME_SLICING, [(0.5, 60)] * 5, [True, True, True, True, False]),  # 4 replicas, memory unchecked
        (Mechanism.MPS, [(0.5, 36)] * 3, [True, True, False]),  # 2 + 2 replicas of 4
        (Mechanism.MPS, [(0.1, 6)] * 5, [True, True, True, True, False]),
        (Mechanism.MIG, [(0.4, 30), (0.4, 30), (0.1, 6)], [True, True, False]),  # 3g + 3g fill all 8 slices
        (Mechanism.MIG, [(0.5, 36), (0.4, 30)], [True, True]),  # 4g + 3g
        (Mechanism.MIG, [(0.5, 36), (0.5, 36)], [True, False]),  # one 4g placement only
        (
            Mechanism.MIG,
            [(0.5, 36), (0.25, 16), (0.1, 6), (0.1, 6)],
            [True, True, True, False],
        ),  # slice 7 is no 1g start
        (Mechanism.MIG, [(0.1, 6)] * 8, [True] * 7 + [False]),
    ],
)
def test_how_many_fit_on_one_gpu(mechanism: Mechanism, demands: list[tuple[float, int]], fits: list[bool]) -> None:
    gpu = slot(mechanism)
    got = []
    for job, (compute, gib) in enumerate(demands):
        share = gpu.fit(job, ShareDemand(compute, gib * GIB))
        got.append(share is not None)
        if share is not None:
            gpu.add(share)
    assert got == fits


def test_a_3g_instance_leaves_three_1g_starts_as_nvidia_smi_shows() -> None:
    gpu = slot(Mechanism.MIG)
    gpu.add(gpu.fit(0, ShareDemand(0.4, 30 * GIB)))  # type: ignore[arg-type]
    placed = []
    for job in range(1, 5):
        share = gpu.fit(job, ShareDemand(0.1, 6 * GIB))
        if share is not None:
            gpu.add(share)
            placed.append(share.placement)
    assert placed == [(4, 1), (5, 1), (6, 1)]


def test_the_static_balanced_layout() -> None:
    assert H100_MIG is not None
    layout = balanced_layout(H100_MIG)
    assert layout == ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")
    gpu = slot(Mechanism.MIG, mig_layout=layout)
    assert not gpu.takes_whole_jobs
    assert gpu.fit(0, ShareDemand(0.5, 36 * GIB)) is None  # no 4g in the layout
    profiles = []
    for job in range(4):
        share = gpu.fit(job, ShareDemand(0.1, 6 * GIB))
        if share is not None:
            gpu.add(share)
            profiles.append(share.profile)
    assert profiles == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]  # the smallest free instance each time


@pytest.mark.parametrize(
    ("mechanism", "computes", "speed"),
    [
        (Mechanism.TIME_SLICING, [0.5], 1.0),
        (Mechanism.TIME_SLICING, [0.1, 0.1], 1.0),  # 10 % switching overhead still leaves enough
        (Mechanism.TIME_SLICING, [0.5, 0.5], 0.9),  # wants 1.0, 0.9 is left
        (Mechanism.TIME_SLICING, [0.5, 0.5, 0.5, 0.5], 0.45),
        (Mechanism.MPS, [0.1, 0.1, 0.1], 1 / 1.1),  # 5 % per neighbour
        (Mechanism.MIG, [0.1, 0.1, 0.1], 1.0),
    ],
)
def test_speeds(mechanism: Mechanism, computes: list[float], speed: float) -> None:
    gpu = slot(mechanism)
    for job, compute in enumerate(computes):
        gpu.add(gpu.fit(job, ShareDemand(compute, 1 * GIB)))  # type: ignore[arg-type]
    assert gpu.speed() == pytest.approx(speed)


@pytest.mark.parametrize(
    ("mechanism", "crash", "memory"),
    [(Mechanism.TIME_SLICING, 1, 3), (Mechanism.MPS, 3, 1), (Mechanism.MIG, 1, 1)],
)
def test_fault_and_memory_domains(mechanism: Mechanism, crash: int, memory: int) -> None:
    gpu = slot(mechanism)
    for job in range(3):
        gpu.add(gpu.fit(job, ShareDemand(0.1, 6 * GIB)))  # type: ignore[arg-type]
    assert (gpu.crash_domain(), gpu.memory_domain(), gpu.jobs) == (crash, memory, 3)


def test_time_slicing_over_commits_memory_and_nothing_else_does() -> None:
    for mechanism, over in ((Mechanism.TIME_SLICING, True), (Mechanism.MPS, False), (Mechanism.MIG, False)):
        gpu = slot(mechanism)
        for job in range(4):
            share = gpu.fit(job, ShareDemand(0.5, 36 * GIB))
            if share is not None:
                gpu.add(share)
        assert gpu.memory_overcommitted() is over


def _jobs(*specs: tuple[str, float, float, float]) -> list[JobSpec]:
    return [JobSpec(name, submit, duration, (PodSpec.of(gpu),)) for name, submit, duration, gpu in specs]


@pytest.mark.parametrize(
    ("plan", "ends"),
    [
        ("time-slicing", [100 / 0.9, 100 / 0.9]),  # packed on one GPU, each slowed to 0.9
        ("mps", [105.0, 105.0]),  # packed, 5 % interference
        ("mig", [100.0, 100.0]),  # two 4g.40gb cannot share a GPU: two GPUs, full speed
        ("whole", [100.0, 100.0]),
    ],
)
def test_two_halves_under_each_plan(plan: str, ends: list[float]) -> None:
    spec = cluster("1xdgx-h100")
    engine = TierEngine(spec, _jobs(("a", 0, 100, 0.5), ("b", 0, 100, 0.5)), plan_for(plan, {}, spec))
    engine.run()
    assert [job.run.end_time for job in engine.jobs] == pytest.approx(ends)


def test_a_time_sliced_job_slows_when_a_neighbour_arrives_and_speeds_up_when_it_leaves() -> None:
    spec = cluster("1xdgx-h100")
    engine = TierEngine(spec, _jobs(("a", 0, 100, 0.5), ("b", 50, 100, 0.5)), plan_for("time-slicing", {}, spec))
    engine.run()
    # a: 50 s alone, then its last 50 s of work at 0.9; b: 50 s of work at 0.9, then the rest alone.
    a_end = 50 + 50 / 0.9
    assert [job.run.end_time for job in engine.jobs] == pytest.approx([a_end, a_end + 50])


def test_whole_gpu_jobs_take_empty_gpus_and_wait_for_them() -> None:
    spec = cluster("1xdgx-h100")
    jobs = _jobs(("frac", 0, 100, 0.25), ("eight", 1, 50, 8), ("seven", 2, 50, 7))
    engine = TierEngine(spec, jobs, plan_for("mig", {}, spec))
    engine.run()
    starts = [job.run.start_time for job in engine.jobs]
    assert starts == [0, 100, 2]  # the 8-GPU job needs every GPU empty; the 7-GPU job backfills


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("shared", {}, "unknown sharing plan"),
        ("mps", {"layout": "balanced"}, "unknown option"),
        ("mig", {"layout": "odd"}, "must be 'balanced'"),
        ("tiered", {"mig": "4", "mps": "4"}, "at least one"),
        ("time-slicing", {"replicas": "many"}, "must be an integer"),
    ],
)
def test_bad_plans_are_refused(name: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(SimModelError, match=message):
        plan_for(name, options, cluster("8xdgx-h100"))


def test_the_sharing_comparison() -> None:
    trace = resolve_trace("sharing:jobs=300,nodes=4")
    plans = ["whole", "time-slicing", "mps", "mig", "tiered"]
    records = {r["policy"]: r for r in compare(trace, plans).to_json()["results"]}
    assert all(r["jobs_completed"] == 300 for r in records.values())
    whole, ts, mps, mig = (records[name] for name in plans[:4])
    assert (whole["jobs_per_shared_gpu"], whole["gpu_fault_domain_jobs"], whole["crash_domain_jobs"]) == (1, 1, 1)
    # Packing: time-slicing packs densest (replicas ignore size); every sharing plan holds fewer GPUs than whole.
    assert ts["jobs_per_shared_gpu"] > mig["jobs_per_shared_gpu"] > 1
    assert max(ts["gpu_allocation"], mps["gpu_allocation"], mig["gpu_allocation"]) < whole["gpu_allocation"]
    # Exposure: MPS shares crashes, time-slicing shares memory, MIG shares neither (only the GPU itself).
    assert mps["crash_domain_jobs"] > 1 and mps["memory_domain_jobs"] == 1
    assert ts["memory_domain_jobs"] > 1 and ts["crash_domain_jobs"] == 1 and ts["oom_exposed_jobs"] > 0
    assert mig["crash_domain_jobs"] == mig["memory_domain_jobs"] == 1 and mig["gpu_fault_domain_jobs"] > 1
    assert mig["by_kind"]["inference"]["run_time_stretch"] == 1 < ts["by_kind"]["inference"]["run_time_stretch"]


def test_sharing_plans_only_run_on_the_sharing_trace() -> None:
    with pytest.raises(ValueError, match="only on the sharing trace"):
        compare(resolve_trace("two-gang"), ["mig"])
    with pytest.raises(ValueError, match="compares sharing plans"):
        compare(resolve_trace("sharing:jobs=10"), ["best-fit"])
