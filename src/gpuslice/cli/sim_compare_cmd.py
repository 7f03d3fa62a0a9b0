"""`gpuslice sim compare`: run placement policies on one trace and compare them."""

from __future__ import annotations

import click
from rich.console import Console

from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.core.model import SimModelError
from gpuslice.sim.experiments.compare import DEFAULT_POLICIES
from gpuslice.sim.experiments.compare import compare as run_comparison
from gpuslice.sim.experiments.variants import check_variant, default_policies
from gpuslice.sim.extensions.orders import ORDERS
from gpuslice.sim.policies import POLICIES
from gpuslice.sim.report.extension_tables import (
    extension_markdown,
    extension_tables,
    has_extension_plot,
    plot_extension,
)
from gpuslice.sim.report.tables import (
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
    default=None,
    help=(
        f"Comma-separated policies: {', '.join(POLICIES)}, or variants such as preempt:ckpt=900, drf, wdrf, fifo, "
        "kueue:overcommit=2, whole|time-slicing|mps|mig|tiered (sharing trace). "
        f"Default: the trace's own list, else {','.join(DEFAULT_POLICIES)}."
    ),
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
    policies: str | None,
    seed: int,
    json_target: str | None,
    plot_path: str | None,
    cross_island_penalty: float,
    queue_order: str,
    by_size: bool,
    markdown: bool,
) -> None:
    """Compare placement policies on a trace: utilization, waits, stranded GPUs, deadlocks."""
    try:
        trace = resolve_trace(trace_ref, seed)
    except (TraceError, SimModelError) as exc:
        raise click.BadParameter(str(exc), param_hint="--trace") from exc
    if policies is None:
        names = list(default_policies(trace.name) or DEFAULT_POLICIES)
    else:
        names = [name.strip() for name in policies.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("no policy given", param_hint="--policies")
    for name in names:
        try:
            check_variant(name, trace)
        except SimModelError as exc:
            raise click.BadParameter(str(exc), param_hint="--policies") from exc
    # Keep stdout clean for JSON when it goes there: the table then goes to stderr.
    console = Console(stderr=json_target == "-")
    if not console.is_terminal:
        console.width = max(console.width, 160)  # logs and pipes: do not fold the table
    status = Console(stderr=True)
    config = SimConfig(cross_island_penalty=cross_island_penalty, seed=seed)
    with progress_bar(status, len(trace.jobs), len(names)) as progress:
        comparison = run_comparison(trace, names, config, queue_order, progress)
    if markdown:
        text = markdown_tables(comparison, by_size) + extension_markdown(comparison)
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(comparison_table(comparison))
        if by_size:
            console.print(wait_by_size_table(comparison))
        for table in extension_tables(comparison):
            console.print(table)
    if json_target:
        write_json(comparison, json_target)
    if plot_path:
        if has_extension_plot(comparison):
            plot_extension(comparison, plot_path)
        else:
            plot_comparison(comparison, plot_path)
        status.print(f"plot written to {plot_path}")
