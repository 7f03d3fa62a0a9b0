"""`gpuslice sim lab`: the four core policies on a workload trace, the comparison table and the built-in checks."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from gpuslice.cli.console import table_console
from gpuslice.cli.sim_options import load_trace_option, write_out_dir
from gpuslice.fsutil.atomic import atomic_write_text
from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.core.model import SimModelError
from gpuslice.sim.experiments.lab import DEFAULT_WORKLOAD, check_lines, run_lab
from gpuslice.sim.experiments.seeds import SeedSweep
from gpuslice.sim.report.tables import comparison_table, markdown_tables, progress_bar
from gpuslice.sim.traces import TRACES


@click.command()
@click.option(
    "--trace",
    "trace_ref",
    default=DEFAULT_WORKLOAD,
    show_default=True,
    metavar="NAME|FILE",
    help=f"The workload trace: a built-in ({', '.join(TRACES)}), NAME:key=value,..., or a trace CSV file.",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seeds traces and engine.")
@click.option(
    "--cross-island-penalty",
    type=click.FloatRange(min=0),
    default=SimConfig.cross_island_penalty,
    show_default=True,
    help="A gang spread over several NVLink islands runs this much longer.",
)
@click.option("--markdown", is_flag=True, help="Print the tables as GitHub markdown.")
@click.option(
    "--out",
    "out_dir",
    metavar="DIR",
    help="Write jobs.csv, timeline.csv, summary.json per trace into DIR/<trace>/, and the checks to DIR/checks.json.",
)
def lab(trace_ref: str, seed: int, cross_island_penalty: float, markdown: bool, out_dir: str | None) -> None:
    """Run the lab: the comparison table, then every built-in check as PASS/FAIL; exit 1 if one fails."""
    trace = load_trace_option(trace_ref, seed)
    console = table_console()
    status = Console(stderr=True)
    try:
        with progress_bar(status, len(trace.jobs), 4) as progress:
            result = run_lab(trace_ref, seed, cross_island_penalty, progress)
    except SimModelError as exc:  # e.g. a sharing-tier trace, which the core policies cannot run
        raise click.BadParameter(str(exc), param_hint="--trace") from exc
    for comparison in result.comparisons:
        if markdown:
            console.print(markdown_tables(comparison, by_size=False), markup=False, highlight=False, soft_wrap=True)
        else:
            console.print(comparison_table(comparison))
    for line in check_lines(result.checks):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    failed = sum(check.verdict.value == "FAIL" for check in result.checks)
    console.print(f"{len(result.checks) - failed} of {len(result.checks)} checks passed or skipped, {failed} failed")
    if out_dir:
        for comparison in result.comparisons:
            write_out_dir(SeedSweep([comparison]), str(Path(out_dir) / comparison.trace.name), None, status)
        checks = [
            {"claim": check.claim, "verdict": check.verdict.value, "figures": check.figures} for check in result.checks
        ]
        atomic_write_text(Path(out_dir) / "checks.json", json.dumps(checks, indent=2) + "\n")
    if failed:
        raise SystemExit(1)
