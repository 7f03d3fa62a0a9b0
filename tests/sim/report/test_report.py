"""Reports: the binned utilization the plot draws, the JSON shape, and the figure itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.experiments.compare import compare
from gpuslice.sim.report.tables import binned_utilization, markdown_tables, plot_comparison, write_json
from gpuslice.sim.traces import adversarial

REQUIRED_KEYS = [
    "policy",
    "gpu_utilization",
    "wait_p50",
    "wait_p99",
    "stranded_gpus",
    "partial_allocation_deadlocks",
    "jobs_completed",
    "makespan",
]


@pytest.fixture(scope="module")
def comparison():  # type: ignore[no-untyped-def]
    return compare(adversarial(4), ["first-fit", "best-fit"], SimConfig(seed=1))


def test_binned_utilization_keeps_the_time_weighted_mean(comparison) -> None:  # type: ignore[no-untyped-def]
    result = comparison.results[0]
    centres, means = binned_utilization(result, bins=50)
    assert len(centres) == 50
    assert float(np.mean(means)) == pytest.approx(result.gpu_utilization)


def test_json_has_the_documented_shape(comparison, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "out.json"
    write_json(comparison, str(path))
    data = json.loads(path.read_text())
    assert data["trace"] == "adversarial"
    assert [r["policy"] for r in data["results"]] == ["first-fit", "best-fit"]
    for record in data["results"]:
        assert list(record)[: len(REQUIRED_KEYS)] == REQUIRED_KEYS
        assert isinstance(record["partial_allocation_deadlocks"], int) and isinstance(record["jobs_completed"], int)


def test_markdown_lists_every_policy(comparison) -> None:  # type: ignore[no-untyped-def]
    text = markdown_tables(comparison, by_size=True)
    assert text.count("| first-fit |") == 2 and text.count("| best-fit |") == 2


def test_plot_writes_a_png(comparison, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "plot.png"
    plot_comparison(comparison, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
