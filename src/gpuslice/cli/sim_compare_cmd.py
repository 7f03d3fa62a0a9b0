"""`gpuslice sim compare`: run placement policies on one trace and compare them."""

from __future__ import annotations

import click
from rich.console import Console

from gpuslice.sim.compare import DEFAULT_POLICIES
from gpuslice.sim.compare import compare as run_comparison
from gpuslice.sim.engine import SimConfig
from gpuslice.sim.model import SimModelError
from gpuslice.sim.policies import POLICIES
from gpuslice.sim.queue import ORDERS
from gpuslice.sim.report import (
    comparison_table,
    markdown_tables,
    plot_comparison,
    progress_bar,
    wait_by_size_table,
    write_json,
)
from gpuslice.sim.traces import TRACES, TraceError, resolve_trace


@click.command()
@click.option(
    "--trace",
    "trace_ref",
    required=True,
    metavar="NAME|FILE",
    help=f"A built-in trace ({', '.join(TRACES)}), optionally NAME:key=value,..., or a trace CSV file.",
)
@click.option(
    "--policies",
    default=",".join(DEFAULT_POLICIES),
    show_default=True,
    help=f"Comma-separated policies out of {', '.join(POLICIES)}.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the trace generator and the engine.")
@click.option("--json", "json_target", metavar="FILE|-", help="Write the results as JSON ('-' for stdout).")
@click.option("--plot", "plot_path", metavar="FILE.png", help="Draw utilization over time and the wait distribution.")
@click.option(
    "--cross-island-penalty",
    type=click.FloatRange(min=0),
    default=SimConfig.cross_island_penalty,
    show_default=True,
    help="A gang spread over several NVLink islands runs this much longer (0.3 = 30 %).",
)
@click.option("--queue-order", type=click.Choice(sorted(ORDERS)), default="priority", show_default=True)
@click.option("--by-size", is_flag=True, help="Also print the p99 wait per job size.")
@click.option("--markdown", is_flag=True, help="Print the tables as GitHub markdown instead.")
def compare(
    trace_ref: str,
    policies: str,
    seed: int,
    json_target: str | None,
    plot_path: str | None,
    cross_island_penalty: float,
    queue_order: str,
    by_size: bool,
    markdown: bool,
) -> None:
    """Compare placement policies on a trace: utilization, waits, stranded GPUs, deadlocks."""
    names = [name.strip() for name in policies.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if not names or unknown:
        raise click.BadParameter(f"unknown policy {unknown[0] if unknown else '(none)'}; known: {', '.join(POLICIES)}")
    try:
        trace = resolve_trace(trace_ref, seed)
    except (TraceError, SimModelError) as exc:
        raise click.BadParameter(str(exc), param_hint="--trace") from exc
    # Keep stdout clean for JSON when it goes there: the table then goes to stderr.
    console = Console(stderr=json_target == "-")
    if not console.is_terminal:
        console.width = max(console.width, 160)  # logs and pipes: do not fold the table
    status = Console(stderr=True)
    config = SimConfig(cross_island_penalty=cross_island_penalty, seed=seed)
    with progress_bar(status, len(trace.jobs), len(names)) as progress:
        comparison = run_comparison(trace, names, config, queue_order, progress)
    if markdown:
        console.print(markdown_tables(comparison, by_size), markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(comparison_table(comparison))
        if by_size:
            console.print(wait_by_size_table(comparison))
    if json_target:
        write_json(comparison, json_target)
    if plot_path:
        plot_comparison(comparison, plot_path)
        status.print(f"plot written to {plot_path}")
