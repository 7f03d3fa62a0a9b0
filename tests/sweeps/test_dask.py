"""Sweeps on Dask (a LocalCluster in this process) give the same results as the local runs, seed by seed."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.executors import ExecutorError, ExecutorSpec, dask_executor, parse_executor
from gpuslice.fgd.sweep import ReplayJob, execute, run_replay_job, run_sweep
from gpuslice.sim.experiments.seeds import run_seeds

pytest.importorskip("dask.distributed")


@pytest.fixture(scope="module")
def dask_pool() -> Iterator[Executor]:
    with dask_executor(ExecutorSpec("dask"), workers=2, processes=False) as executor:
        yield executor


def _without_timing(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in record.items() if k not in ("placement_seconds", "seconds")} for record in records]


def test_openb_on_dask_equals_one_process(small_openb: Path, dask_pool: Executor) -> None:
    arguments: dict[str, Any] = {"ratio": 1.3, "trace_dir": small_openb}
    local = run_sweep(["small"], ["best-fit", "fgd", "random"], [42, 43, 44], jobs=1, **arguments)
    on_dask = run_sweep(["small"], ["best-fit", "fgd", "random"], [42, 43, 44], executor=dask_pool, **arguments)
    assert len(local) == 9
    assert _without_timing(on_dask) == _without_timing(local)


def test_openb_replay_on_dask_equals_one_process(small_openb: Path, dask_pool: Executor) -> None:
    todo = [ReplayJob("small", policy, 7, 2.0, 1.0, small_openb) for policy in ("best-fit", "fgd")]
    local = execute(run_replay_job, todo, range(len(todo)), 1, None, None)
    on_dask = execute(run_replay_job, todo, range(len(todo)), 1, dask_pool, None)
    assert _without_timing([r.record() for r in on_dask]) == _without_timing([r.record() for r in local])
    assert [r.pod_rows for r in on_dask] == [r.pod_rows for r in local]


def test_compare_seeds_on_dask_equal_one_process(dask_pool: Executor) -> None:
    local = run_seeds("adversarial", ["first-fit", "best-fit"], [0, 1, 2])
    on_dask = run_seeds("adversarial", ["first-fit", "best-fit"], [0, 1, 2], executor=dask_pool)
    assert on_dask.seeds == [0, 1, 2]
    assert on_dask.to_json() == local.to_json()


def test_the_command_runs_openb_on_a_dask_cluster(small_openb: Path) -> None:
    runner = CliRunner()
    base = [
        "sim",
        "openb",
        "--trace-dir",
        str(small_openb),
        "--workload",
        "small",
        "--policies",
        "best-fit",
        "--seeds",
        "1,2",
    ]
    one = runner.invoke(cli, [*base, "--json", "-"])
    dask = runner.invoke(cli, [*base, "--json", "-", "--executor", "dask", "-j", "2"])
    assert one.exit_code == 0 and dask.exit_code == 0, dask.output
    import json

    first_line = lambda out: _without_timing(json.loads(out.splitlines()[0]))  # noqa: E731
    assert first_line(dask.stdout) == first_line(one.stdout)


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("local", ExecutorSpec("local")),
        ("dask", ExecutorSpec("dask")),
        ("dask://scheduler.example:8786", ExecutorSpec("dask", "tcp://scheduler.example:8786")),
        ("dask://10.0.0.5:8786", ExecutorSpec("dask", "tcp://10.0.0.5:8786")),
    ],
)
def test_executor_forms(text: str, spec: ExecutorSpec) -> None:
    assert parse_executor(text) == spec


@pytest.mark.parametrize("text", ["ray", "dask://", "dask://host", "dask://host:0", "dask://host:99999", "tcp://h:1"])
def test_bad_executor_forms(text: str) -> None:
    with pytest.raises(ExecutorError, match="local, dask or dask://HOST:PORT"):
        parse_executor(text)


def test_a_bad_executor_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["sim", "openb", "--executor", "ray"])
    assert result.exit_code == 2 and "--executor" in result.output and "Usage:" in result.output
