"""Presenting a comparison: the rich table, the JSON file, the matplotlib figure and the progress bar."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpuslice.plotting import figure_file
from gpuslice.sim.core.metrics import FloatArray, SimResult
from gpuslice.sim.core.sections import format_duration
from gpuslice.sim.experiments.compare import Comparison, ComparisonProgress

if TYPE_CHECKING:
    from matplotlib.axes import Axes

_LINE_STYLES = ("-", "--", "-.", ":")
LONG_RUN_JOBS = 100_000  # jobs x policies above which a progress bar is worth drawing without a TTY


HEADERS = (
    "policy",
    "GPU util",
    "goodput",
    "wait p50",
    "wait p99",
    "stranded GPUs",
    "stranded peak",
    "deadlocks",
    "completed",
    "makespan",
    "mean JCT",
    "cross-island",
)


def _title(comparison: Comparison) -> str:
    trace = comparison.trace
    cluster = trace.cluster_text or trace.cluster.description
    return (
        f"{trace.name}: {len(trace.jobs)} jobs on {trace.cluster.total_gpus} GPUs ({cluster}), seed {comparison.seed}"
    )


def _cells(result: SimResult) -> list[str]:
    return [
        result.policy,
        f"{100 * result.gpu_utilization:.1f} %",
        f"{100 * result.gpu_goodput:.1f} %",
        format_duration(result.wait_p50),
        format_duration(result.wait_p99),
        f"{result.stranded_gpus:.2f}",
        f"{result.stranded_gpus_peak:g}",
        str(result.partial_allocation_deadlocks),
        f"{result.jobs_completed}/{result.jobs_total}",
        format_duration(result.makespan),
        format_duration(result.jct_mean),
        str(result.cross_island_jobs),
    ]


def comparison_table(comparison: Comparison) -> Table:
    table = Table(title=_title(comparison), title_justify="left")
    for header in HEADERS:
        table.add_column(header, justify="left" if header == "policy" else "right")
    for result in comparison.results:
        table.add_row(*_cells(result))
    return table


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
    lines = [f"**{_title(comparison)}**", "", _md_row(HEADERS), _md_row(["---"] * len(HEADERS))]
    lines += [_md_row(_cells(result)) for result in comparison.results]
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
    text = json.dumps(comparison.to_json(), indent=2) + "\n"
    if target == "-":
        (stdout or sys.stdout).write(text)
    else:
        Path(target).write_text(text)


def binned_utilization(result: SimResult, bins: int = 400) -> tuple[FloatArray, FloatArray]:
    """Time-weighted mean utilization in equal time bins (exact for the step series): (bin centres, values)."""
    times, values = result.times, result.utilization_series
    if len(times) < 2:
        return times, values
    start, end = float(times[0]), float(times[-1])
    integral = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(times))))
    edges = np.linspace(start, end, bins + 1)
    means = np.diff(np.interp(edges, times, integral)) / np.diff(edges)
    return (edges[:-1] + edges[1:]) / 2, means


def plot_comparison(comparison: Comparison, path: str | Path) -> None:
    """Utilization over time per policy (left) and the distribution of queue waits (right), as a PNG."""
    with figure_file(path, 2) as (figure, (left, right)):
        for position, result in enumerate(comparison.results):
            style = _LINE_STYLES[position % len(_LINE_STYLES)]  # policies with equal results still show
            centres, means = binned_utilization(result)
            left.plot(centres / 3600, 100 * means, style, label=result.policy, linewidth=1.4)
            _wait_ecdf(right, result, style)
        left.set(xlabel="time (h)", ylabel="GPUs busy (%)", title="GPU utilization over time", ylim=(0, 105))
        right.set(xlabel="queue wait (min, symlog)", ylabel="jobs waiting at most this long (%)", title="Queue wait")
        right.set_xscale("symlog", linthresh=1.0)
        for axes in (left, right):
            axes.grid(alpha=0.3)
            axes.legend(loc="lower right", fontsize="small")
        trace = comparison.trace
        title = f"{trace.name}: {len(trace.jobs)} jobs, {trace.cluster.total_gpus} GPUs, seed {comparison.seed}"
        figure.suptitle(title)


def _wait_ecdf(axes: Axes, result: SimResult, style: str) -> None:
    waits = np.sort(result.waits) / 60
    if len(waits) == 0:
        return
    fraction = 100 * np.arange(1, len(waits) + 1) / len(waits)
    axes.step(waits, fraction, style, where="post", label=result.policy, linewidth=1.4)


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
