"""docs/simulator.md quotes the extension tables as the CLI prints them today (seed 0, default policies)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.experiments.compare import compare
from gpuslice.sim.experiments.variants import default_policies
from gpuslice.sim.report.extension_tables import extension_markdown
from gpuslice.sim.report.tables import markdown_tables
from gpuslice.sim.traces import resolve_trace

DOC = (Path(__file__).resolve().parents[3] / "docs" / "simulator.md").read_text()


@pytest.mark.parametrize("trace_name", ["preemption", "tenants", "topology", "sharing", "two-gang"])
def test_the_documented_tables_are_current(trace_name: str) -> None:
    trace = resolve_trace(trace_name, seed=0)
    comparison = compare(trace, default_policies(trace_name) or (), SimConfig(seed=0))
    printed = markdown_tables(comparison, by_size=False) + extension_markdown(comparison)
    rows = [line for line in printed.splitlines() if line.startswith("| ") and "---" not in line]
    missing = [row for row in rows if row not in DOC]
    assert not missing, f"docs/simulator.md is out of date for {trace_name}; first stale row: {missing[0]}"
