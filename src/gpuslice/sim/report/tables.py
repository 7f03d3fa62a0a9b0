"""Presenting a comparison: the rich table, the JSON file, the matplotlib figure and the progress bar."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpuslice.fsutil.atomic import atomic_write_text
from gpuslice.plotting import figure_file
from gpuslice.sim.core.metrics import FloatArray, SimResult
from gpuslice.sim.core.sections import format_duration
from gpuslice.sim.experiments.compare import Comparison, ComparisonProgress
from gpuslice.sim.experiments.seeds import SeedSweep, Spread

if TYPE_CHECKING:
    from matplotlib.axes import Axes

_LINE_STYLES = ("-", "--", "-.", ":")
LONG_RUN_JOBS = 100_000  # jobs x policies above which a progress bar is worth drawing without a TTY


NO_START = "no job started"
NO_DONE = "no job done"


@dataclass(frozen=True)
class Column:
    """One column of the comparison table: its header, the figure it shows, how one value is written, and
    the text shown instead when the figure has no value in a run (None: it always has one)."""

    header: str
    figure: Callable[[SimResult], float]
    text: Callable[[float], str]
    absent: Callable[[SimResult], str | None] = lambda result: None


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


_count = "{:g}".format  # one formatter object for every count column: `_cell` gives their spreads two decimals


def _spread_text(column: Column, mean: float, sd: float) -> str:
    """`mean ± sd` with one precision and one unit for both (not `78.35 ± 13.8062` or `8.0 h ± 0 s`)."""
    if column.text is _count:
        if float(mean).is_integer() and float(sd).is_integer():
            return f"{mean:.0f} ± {sd:.0f}"
        return f"{mean:.2f} ± {sd:.2f}"
    if column.text is format_duration:
        unit, scale, digits = ("s", 1.0, 0) if mean < 120 else ("min", 60.0, 1) if mean < 7200 else ("h", 3600.0, 1)
        return f"{mean / scale:.{digits}f} ± {sd / scale:.{digits}f} {unit}"
    if column.text is _percent:
        return f"{100 * mean:.1f} ± {100 * sd:.1f} %"
    return f"{column.text(mean)} ± {column.text(sd)}"


def _no_start(result: SimResult) -> str | None:
    return NO_START if result.jobs_started == 0 else None


def _no_done(result: SimResult) -> str | None:
    return NO_DONE if result.jobs_completed == 0 else None


TABLE_COLUMNS = (
    Column("GPU util", lambda r: r.gpu_utilization, _percent),
    Column("goodput", lambda r: r.gpu_goodput, _percent),
    Column("wait p50", lambda r: r.wait_p50, format_duration, _no_start),
    Column("wait p99", lambda r: r.wait_p99, format_duration, _no_start),
    Column("stranded GPUs", lambda r: r.stranded_gpus, "{:.2f}".format),
    Column("stranded peak", lambda r: r.stranded_gpus_peak, _count),
    Column("deadlocks", lambda r: r.partial_allocation_deadlocks, _count),
    Column("completed", lambda r: r.jobs_completed, _count),
    Column("rejected", lambda r: r.jobs_rejected, _count),
    Column("unfinished", lambda r: r.jobs_unfinished, _count),
    Column("makespan", lambda r: r.makespan, format_duration, _no_done),
    Column("mean JCT", lambda r: r.jct_mean, format_duration, _no_done),
    Column("cross-island", lambda r: r.cross_island_jobs, _count),
)
HEADERS = ("policy", *(column.header for column in TABLE_COLUMNS))


def _title(sweep: SeedSweep) -> str:
    comparison = sweep.first
    trace = comparison.trace
    cluster = trace.cluster_text or trace.cluster.description
    seeds = f"seed {comparison.seed}" if len(sweep.comparisons) == 1 else f"seeds {_seed_text(sweep.seeds)}, mean ± sd"
    return f"{trace.name}: {len(trace.jobs)} jobs on {trace.cluster.total_gpus} GPUs ({cluster}), {seeds}"


def _seed_text(seeds: Sequence[int]) -> str:
    if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def _cell(column: Column, results: Sequence[SimResult]) -> str:
    """One value; over several seeds `mean ± sd` of the runs that have a value, or the absent text if none has."""
    present = [result for result in results if column.absent(result) is None]
    if not present:
        return column.absent(results[0]) or "-"
    if column.header == "completed" and len(results) == 1:
        return f"{results[0].jobs_completed}/{results[0].jobs_total}"
    spread = Spread.of([column.figure(result) for result in present])
    if len(results) == 1:
        return column.text(spread.mean)
    note = "" if len(present) == len(results) else f" ({len(present)} of {len(results)} seeds)"
    return f"{_spread_text(column, spread.mean, spread.sd)}{note}"


def _rows(sweep: SeedSweep) -> list[list[str]]:
    rows = []
    for position, policy in enumerate(sweep.policies()):
        results = [comparison.results[position] for comparison in sweep.comparisons]
        rows.append([policy, *(_cell(column, results) for column in TABLE_COLUMNS)])
    return rows


def sweep_table(sweep: SeedSweep) -> Table:
    """The comparison table; over several seeds every figure is `mean ± sd`."""
    table = Table(title=_title(sweep), title_justify="left")
    for header in HEADERS:
        table.add_column(header, justify="left" if header == "policy" else "right")
    for row in _rows(sweep):
        table.add_row(*row)
    return table


def comparison_table(comparison: Comparison) -> Table:
    return sweep_table(SeedSweep([comparison]))


def _wait_sizes(comparison: Comparison) -> list[str]:
    return sorted({size for r in comparison.results for size in r.wait_by_gpus}, key=float)


def _wait_cells(result: SimResult, sizes: list[str]) -> list[str]:
    return [format_duration(result.wait_by_gpus[s]["p99"]) if s in result.wait_by_gpus else "-" for s in sizes]


def wait_by_size_table(comparison: Comparison) -> Table:
    """p99 wait per job size (GPUs): where fragmentation hurts, the big jobs wait."""
    sizes = _wait_sizes(comparison)
    table = Table(title="wait p99 by job size (GPUs per job)", title_justify="left")
    table.add_column("policy")
    for size in sizes:
        table.add_column(size, justify="right")
    for result in comparison.results:
        table.add_row(result.policy, *_wait_cells(result, sizes))
    return table


def markdown_tables(comparison: Comparison, by_size: bool) -> str:
    """The same tables as GitHub markdown, for documents."""
    return sweep_markdown(SeedSweep([comparison]), by_size)


def sweep_markdown(sweep: SeedSweep, by_size: bool) -> str:
    """The comparison table (and the first seed's wait-by-size table) as GitHub markdown."""
    comparison = sweep.first
    lines = [f"**{_title(sweep)}**", "", _md_row(HEADERS), _md_row(["---"] * len(HEADERS))]
    lines += [_md_row(row) for row in _rows(sweep)]
    if by_size:
        sizes = _wait_sizes(comparison)
        header = ["wait p99 by job size (GPUs)", *sizes]
        lines += ["", _md_row(header), _md_row(["---"] * len(header))]
        lines += [_md_row([result.policy, *_wait_cells(result, sizes)]) for result in comparison.results]
    return "\n".join(lines) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def write_json(comparison: Comparison, target: str, stdout: TextIO | None = None) -> None:
    """Write the comparison JSON to the file `target`, or to stdout when `target` is '-'."""
    write_sweep_json(SeedSweep([comparison]), target, stdout)


def write_sweep_json(sweep: SeedSweep, target: str, stdout: TextIO | None = None) -> None:
    """The sweep's JSON (one seed: the comparison's own shape) to the file `target`, or stdout for '-'."""
    text = json.dumps(sweep.to_json(), indent=2) + "\n"
    if target == "-":
        (stdout or sys.stdout).write(text)
    else:
        atomic_write_text(target, text)


def binned_utilization(result: SimResult, bins: int = 400) -> tuple[FloatArray, FloatArray]:
    """Time-weighted mean utilization in equal time bins (exact for the step series): (bin centres, values)."""
    return binned_series(result.times, result.utilization_series, bins)


def binned_series(times: FloatArray, values: FloatArray, bins: int = 400) -> tuple[FloatArray, FloatArray]:
    """Time-weighted means of a step series (each value holds until the next time) in equal time bins."""
    if len(times) < 2:
        return times, values
    start, end = float(times[0]), float(times[-1])
    integral = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(times))))
    edges = np.linspace(start, end, bins + 1)
    means = np.diff(np.interp(edges, times, integral)) / np.diff(edges)
    return (edges[:-1] + edges[1:]) / 2, means


def run_label(result: SimResult) -> str:
    """The legend text of a run: its policy, and what went wrong when something did."""
    notes = []
    if result.jobs_deadlocked:
        notes.append(f"DEADLOCKED: {result.jobs_deadlocked} jobs")
    if result.jobs_rejected:
        notes.append(f"{result.jobs_rejected} rejected")
    if result.jobs_started == 0:
        notes.append(NO_START)
    return f"{result.policy} ({', '.join(notes)})" if notes else result.policy


def plot_comparison(comparison: Comparison, path: str | Path) -> None:
    """Utilization and stranded GPUs over time per policy and the distribution of queue waits, as a PNG.

    The legend sits below the panels, off the data. A run with a deadlock is named so in the legend and
    marked with an X at the moment it deadlocked and the share of GPUs then held, so a run that ended at
    once still shows.
    """
    with figure_file(path, 3, size=(16, 5.4), bottom=0.1) as (figure, (busy, stranded, waits)):
        for position, result in enumerate(comparison.results):
            style = _LINE_STYLES[position % len(_LINE_STYLES)]  # policies with equal results still show
            color = f"C{position % 10}"
            centres, means = binned_utilization(result)
            busy.plot(centres / 3600, 100 * means, style, color=color, label=run_label(result), linewidth=1.4)
            times = np.asarray(result.timeline.times, dtype=np.float64)
            stranded_at = np.asarray(result.timeline.stranded, dtype=np.float64)
            centres, means = binned_series(times, stranded_at)
            stranded.plot(centres / 3600, means, style, color=color, linewidth=1.4)
            _wait_ecdf(waits, result, style, color)
            _mark_deadlock(busy, result, color)
        busy.set(xlabel="time (h)", ylabel="GPUs busy (%)", title="GPU utilization over time", ylim=(0, 105))
        stranded.set(xlabel="time (h)", ylabel="stranded GPUs", title="Stranded GPUs over time")
        stranded.set_ylim(bottom=0)
        waits.set(xlabel="queue wait (min, symlog)", ylabel="jobs waiting at most this long (%)", title="Queue wait")
        waits.set_xscale("symlog", linthresh=1.0)
        for axes in (busy, stranded, waits):
            axes.grid(alpha=0.3)
        columns = min(len(comparison.results), 4)
        figure.legend(loc="lower center", ncol=max(columns, 1), fontsize="small", frameon=False)
        trace = comparison.trace
        title = f"{trace.name}: {len(trace.jobs)} jobs, {trace.cluster.total_gpus} GPUs, seed {comparison.seed}"
        figure.suptitle(title)


def _mark_deadlock(axes: Axes, result: SimResult, color: str) -> None:
    """An X at the first deadlock, at the share of GPUs then bound (held idle by the stuck gangs among them)."""
    moments = [run.deadlocked_at for run in result.runs if run.deadlocked_at is not None]
    if not moments or not result.total_gpus:
        return
    at = min(moments)
    timeline = result.timeline
    index = max(int(np.searchsorted(np.asarray(timeline.times), at, side="right")) - 1, 0)
    held = 100 * timeline.held[index] / result.total_gpus if timeline.times else 0.0
    axes.plot([at / 3600], [held], "X", color=color, markersize=12)
    earlier = len(axes.texts)  # runs that deadlocked at the same moment: their labels stack, not overlap
    axes.annotate(
        f"{result.policy} deadlocked",
        (at / 3600, held),
        textcoords="offset points",
        xytext=(8, -14 - 12 * earlier),
        color=color,
        fontsize="small",
    )


def _wait_ecdf(axes: Axes, result: SimResult, style: str, color: str) -> None:
    waits = np.sort(result.waits) / 60
    if len(waits) == 0:
        return
    fraction = 100 * np.arange(1, len(waits) + 1) / len(waits)
    axes.step(waits, fraction, style, where="post", color=color, linewidth=1.4)


@contextmanager
def progress_bar(console: Console, total_jobs: int, policies: int) -> Iterator[ComparisonProgress | None]:
    """A rich progress bar per policy, shown on a terminal or for long runs; otherwise None."""
    if not (console.is_terminal or total_jobs * policies >= LONG_RUN_JOBS):
        yield None
        return
    columns: list[Any] = [TextColumn("{task.description:>16}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=console.is_terminal) as progress:
        tasks: dict[str, Any] = {}

        def update(policy: str, done: int, total: int) -> None:
            if policy not in tasks:
                tasks[policy] = progress.add_task(policy, total=total)
            progress.update(tasks[policy], completed=done)

        yield update
