"""Trace files, the synthetic generator, the built-in traces and the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuslice.sim.core.model import PodSpec
from gpuslice.sim.traces import (
    TRACES,
    SyntheticParams,
    TraceError,
    adversarial,
    generate,
    load_trace,
    parse_trace,
    resolve_trace,
    trace_to_text,
    two_gang,
)

GOOD = """# gpuslice-sim-trace: 1
# name: tiny
# cluster: 2xdgx-h100;island=1
# description: two jobs
job_id,submit,duration,pods,gpu,cpu_milli,memory_mib,priority,tenant,gang,gpu_model
train,0,3600,2,8,64000,524288,1,team-a,true,
train,0,3600,1,0,4000,8192,1,team-a,true,
nb,12.5,600,1,0.25,2000,16384,0,team-b,false,H100
"""


def test_a_trace_file_is_read_with_pods_grouped_per_job() -> None:
    trace = parse_trace(GOOD)
    assert (trace.name, trace.description, trace.cluster.total_gpus) == ("tiny", "two jobs", 16)
    train, notebook = trace.jobs
    assert train.pods == (PodSpec(8, 1000, 64000, 524288),) * 2 + (PodSpec(0, 0, 4000, 8192),)
    assert (train.gang, train.priority, train.tenant) == (True, 1, "team-a")
    assert notebook.pods == (PodSpec(1, 250, 2000, 16384, "H100"),)
    assert (notebook.submit, notebook.gang) == (12.5, False)


def test_optional_columns_take_their_defaults() -> None:
    trace = parse_trace("# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu\nj,0,5,1,2\n")
    (job,) = trace.jobs
    assert job.pods == (PodSpec(2, 1000, 1000, 1024),)
    assert (job.priority, job.tenant, job.gang) == (0, "default", False)


@pytest.mark.parametrize("trace", [adversarial(4), two_gang(4), generate(SyntheticParams(jobs=50, nodes=4), 3)])
def test_traces_survive_a_round_trip_through_the_file_format(trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.csv"
    path.write_text(trace_to_text(trace))
    again = load_trace(path)
    assert again.jobs == trace.jobs
    assert again.cluster == trace.cluster
    assert again.name == trace.name


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("job_id,submit,duration,pods,gpu\n", "missing the '# cluster: <spec>' header"),
        ("# cluster: 2xnope\njob_id,submit,duration,pods,gpu\n", "cluster header: .*unknown preset"),
        ("# cluster: 1xh100x4\njob_id,submit,pods,gpu\n", ":2: missing column.*duration"),
        ("# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu,colour\n", ":2: unknown column.*colour"),
        ("# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu\nj,0,5,1\n", ":3: 4 values for 5 columns"),
        ("# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu\nj,zero,5,1,1\n", ":3: submit: not a number"),
        ("# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu\nj,0,5,1,1.5\n", ":3: .*whole numbers"),
        (
            "# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu,gang\nj,0,5,1,1,maybe\n",
            ":3: gang: must be true or false",
        ),
        ("# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu\nj,0,5,0,1\n", ":3: pods: must be at least 1"),
        (
            "# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu\nj,0,5,1,1\nj,9,5,1,1\n",
            ":4: job 'j' already began on line 3",
        ),
        ("# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu\nj,0,0,1,1\n", "duration must be positive"),
        ("# gpuslice-sim-trace: 2\n# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu\n", "version '2'"),
    ],
)
def test_bad_trace_files_name_the_line_and_the_reason(text: str, reason: str) -> None:
    with pytest.raises(TraceError, match=reason):
        parse_trace(text, "t.csv")


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read trace"):
        load_trace(tmp_path / "absent.csv")


def test_the_generator_is_seeded() -> None:
    params = SyntheticParams(jobs=200, nodes=8)
    assert generate(params, 1).jobs == generate(params, 1).jobs
    assert generate(params, 1).jobs != generate(params, 2).jobs


def test_the_generator_follows_its_mix_and_duration_law() -> None:
    params = SyntheticParams(jobs=20_000, nodes=16)
    trace = generate(params, 5)
    sizes = [job.gpus for job in trace.jobs]
    for job_class in params.mix:
        share = sum(size == job_class.gpus for size in sizes) / len(sizes)
        assert abs(share - job_class.weight) < 4 * (job_class.weight * (1 - job_class.weight) / len(sizes)) ** 0.5
    durations = [job.duration for job in trace.jobs]
    assert params.duration_min <= min(durations) and max(durations) <= params.duration_max
    assert all(job.gang == (len(job.pods) > 1) for job in trace.jobs)
    assert [job.submit for job in trace.jobs] == sorted(job.submit for job in trace.jobs)


def test_registry_names_and_parameters() -> None:
    assert set(TRACES) >= {"synthetic", "adversarial", "two-gang"}
    assert len(resolve_trace("synthetic:jobs=30,nodes=2", seed=1).jobs) == 30
    assert resolve_trace("two-gang:nodes=4").cluster.total_gpus == 32
    assert len(resolve_trace("adversarial:pairs=2").cluster.nodes) == 4


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("nonesuch", "neither a known trace"),
        ("synthetic:colour=red", "unknown parameter 'colour'"),
        ("synthetic:jobs=many", "jobs must be a number"),
        ("synthetic:jobs", "must be key=value"),
        ("synthetic:load=0", "load must be positive"),
        ("two-gang:nodes=3", "even number"),
        ("adversarial:width=3", "unknown parameter"),
    ],
)
def test_bad_trace_references(ref: str, reason: str) -> None:
    with pytest.raises(TraceError, match=reason):
        resolve_trace(ref)


def test_a_trace_file_path_resolves(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text(GOOD)
    assert resolve_trace(str(path)).name == "tiny"
