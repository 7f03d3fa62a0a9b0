"""`gpuslice sim compare`: run placement policies on one trace and compare them."""

from __future__ import annotations

import click
from rich.console import Console

from gpuslice.cli.console import table_console
from gpuslice.cli.executor_option import executor_option, local_pool, open_executor
from gpuslice.cli.policy_catalogue import policies_elsewhere
from gpuslice.cli.sim_options import load_trace_option, policy_names, resolve_seeds, write_out_dir
from gpuslice.executors import ExecutorSpec
from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.core.model import SimModelError
from gpuslice.sim.experiments.compare import DEFAULT_POLICIES
from gpuslice.sim.experiments.seeds import run_seeds
from gpuslice.sim.experiments.variants import check_variant, default_policies
from gpuslice.sim.extensions.orders import ORDERS
from gpuslice.sim.policies import POLICIES
from gpuslice.sim.policies.checked import SimPolicyFailure
from gpuslice.sim.report.extension_tables import (
    extension_markdown,
    extension_tables,
    has_extension_plot,
    plot_extension,
)
from gpuslice.sim.report.tables import (
    plot_comparison,
    progress_bar,
    sweep_markdown,
    sweep_table,
    wait_by_size_table,
    write_sweep_json,
)
from gpuslice.sim.traces import TRACES


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
@click.option(
    "--policy",
    "policy_refs",
    multiple=True,
    metavar="MODULE:NAME|ENTRY",
    help="Also run your own policy class (module:Name, or an installed gpuslice.sim.policies entry point). Repeatable.",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seeds the trace and the engine."
)
@click.option("--seeds", "seed_list", metavar="LIST", help="Several seeds (0-4, 1,3,9): every figure as mean ± sd.")
@click.option("--json", "json_target", metavar="FILE|-", help="Write the results as JSON ('-' for stdout).")
@click.option(
    "--plot", "plot_path", metavar="FILE.png", help="Draw utilization and stranded GPUs over time, and waits."
)
@click.option(
    "--out",
    "out_dir",
    metavar="DIR",
    help="Write jobs.csv (per job and attempt), timeline.csv (fixed-step samples) and summary.json into DIR.",
)
@click.option(
    "--step",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Sampling step of timeline.csv in seconds [default: the run's span / 1000].",
)
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
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Dask workers (--executor dask)."
)
@executor_option
def compare(
    trace_ref: str,
    policies: str | None,
    policy_refs: tuple[str, ...],
    seed: int,
    seed_list: str | None,
    json_target: str | None,
    plot_path: str | None,
    out_dir: str | None,
    step: float | None,
    cross_island_penalty: float,
    queue_order: str,
    by_size: bool,
    markdown: bool,
    jobs: int,
    executor: ExecutorSpec,
) -> None:
    """Compare placement policies on a trace: utilization, waits, stranded GPUs, deadlocks."""
    seeds = resolve_seeds(seed, seed_list)
    trace = load_trace_option(trace_ref, seeds[0])
    names = policy_names(policies, policy_refs, default_policies(trace.name) or DEFAULT_POLICIES)
    for name in names:
        try:
            check_variant(name, trace)
        except SimModelError as exc:
            note = f" ({policies_elsewhere('compare')})" if str(exc).startswith("unknown policy") else ""
            raise click.BadParameter(f"{exc}{note}", param_hint="--policies") from exc
    # Keep stdout clean for JSON when it goes there: the table then goes to stderr.
    console = table_console(stderr=json_target == "-")
    status = Console(stderr=True)
    try:
        if executor.is_dask or (jobs > 1 and len(seeds) > 1):  # seeds on workers: no per-job progress comes back
            with open_executor(executor, jobs) as dask_pool, local_pool(jobs, dask_pool) as pool:
                sweep = run_seeds(trace_ref, names, seeds, cross_island_penalty, queue_order, None, pool, policy_refs)
        else:
            with progress_bar(status, len(trace.jobs) * len(seeds), len(names)) as progress:
                sweep = run_seeds(trace_ref, names, seeds, cross_island_penalty, queue_order, progress)
    except SimPolicyFailure as exc:  # a user policy (--policy) raised or broke the place() contract
        raise click.BadParameter(str(exc), param_hint="--policy") from None
    comparison = sweep.first
    if markdown:
        text = sweep_markdown(sweep, by_size) + extension_markdown(comparison)
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(sweep_table(sweep))
        if by_size:
            console.print(wait_by_size_table(comparison))
        for table in extension_tables(comparison):
            console.print(table)
    if len(seeds) > 1 and (by_size or extension_tables(comparison) or plot_path):
        status.print(f"the wait-by-size and extension tables and the plot are of the first seed ({seeds[0]})")
    if json_target:
        write_sweep_json(sweep, json_target)
    if plot_path:
        if has_extension_plot(comparison):
            plot_extension(comparison, plot_path)
        else:
            plot_comparison(comparison, plot_path)
        status.print(f"plot written to {plot_path}")
    if out_dir:
        write_out_dir(sweep, out_dir, step, status)
