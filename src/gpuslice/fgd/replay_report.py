"""The real-time replay's table (rich or markdown) and its figure: allocated and fragmented GPUs over time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from gpuslice.fgd.replay import ReplayResult
from gpuslice.fsutil.atomic import atomic_text_writer, atomic_write_text
from gpuslice.fsutil.csvsafe import SafeCsvWriter
from gpuslice.plotting import figure_file

REPLAY_HEADERS = (
    "workload",
    "policy",
    "GPUs",
    "placed",
    "never placed",
    "wait p50",
    "wait p99",
    "GPU allocation",
    "unallocated GPUs",
    "fragmented GPUs",
    "mean queue",
    "replay s",
)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def replay_cells(result: ReplayResult) -> list[str]:
    none_placed = result.placed == 0
    return [
        result.workload,
        result.policy,
        str(result.total_gpus),
        f"{result.placed}/{result.pods}",
        f"{result.never_placed} ({result.withdrawn} withdrawn)",
        "no pod placed" if none_placed else _duration(result.wait_p50),
        "no pod placed" if none_placed else _duration(result.wait_p99),
        f"{100 * result.gpu_allocation:.2f} %",
        f"{result.unallocated_gpus:.1f}",
        f"{result.fragmented_gpus:.1f}",
        f"{result.queue_mean:.2f}",
        f"{result.seconds:.1f}",
    ]


def replay_table(results: Sequence[ReplayResult], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for header in REPLAY_HEADERS:
        table.add_column(header, justify="left" if header in ("workload", "policy") else "right")
    for result in results:
        table.add_row(*replay_cells(result))
    return table


def replay_markdown(results: Sequence[ReplayResult], title: str) -> str:
    lines = [f"**{title}**", "", _row(REPLAY_HEADERS), _row(["---"] * len(REPLAY_HEADERS))]
    lines += [_row(replay_cells(result)) for result in results]
    return "\n".join(lines) + "\n"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def plot_replay(results: Sequence[ReplayResult], path: str | Path) -> None:
    """Allocated and fragmented GPUs and the queue over the arrival window (hours; the drain after the last arrival
    is left out, as in the table's means), one line per policy of the first workload."""
    chosen = [result for result in results if result.workload == results[0].workload]
    with figure_file(path, 3, size=(16, 5.0), bottom=0.1) as (figure, (allocated, fragmented, queued)):
        for position, result in enumerate(chosen):
            start, end = result.window
            inside = (result.times >= start) & (result.times <= end)
            hours = (result.times[inside] - start) / 3600
            color = f"C{position % 10}"
            allocated.step(
                hours, result.allocated[inside], where="post", color=color, linewidth=1.0, label=result.policy
            )
            fragmented.step(hours, result.fragmented[inside], where="post", color=color, linewidth=1.0)
            queued.step(hours, result.queued[inside], where="post", color=color, linewidth=1.0)
        allocated.set(xlabel="hours after the first arrival", ylabel="GPUs allocated", title="Allocated GPUs")
        fragmented.set(xlabel="hours after the first arrival", ylabel="GPUs (F_N(M))", title="Fragmented GPUs")
        queued.set(xlabel="hours after the first arrival", ylabel="pods waiting", title="Queue length")
        for axes in (allocated, fragmented, queued):
            axes.grid(alpha=0.3)
            axes.set_ylim(bottom=0)
        first = chosen[0]
        figure.legend(loc="lower center", ncol=min(len(chosen), 8), fontsize="small", frameon=False)
        figure.suptitle(
            f"openb {first.workload} replayed in time on {first.total_gpus} GPUs "
            f"(arrivals compressed {first.compress:g}x, seed {first.seed})"
        )


POD_COLUMNS_OUT = (
    "workload",
    "policy",
    "seed",
    "pod",
    "gpu_milli",
    "num_gpu",
    "arrival",
    "start",
    "end",
    "wait",
    "status",
    "node",
    "gpus",
)
TIMELINE_COLUMNS_OUT = ("workload", "policy", "seed", "time", "allocated_gpus", "fragmented_gpus", "queued_pods")


def write_replay_outputs(results: Sequence[ReplayResult], folder: str | Path) -> list[Path]:
    """pods.csv (one row per pod), timeline.csv (every sample: after each instant's events) and summary.json."""
    target = Path(folder)
    pods, timeline, summary = target / "pods.csv", target / "timeline.csv", target / "summary.json"
    # temp file and rename per file (a planted link is replaced, not followed); formula cells neutralised
    with atomic_text_writer(pods) as stream:
        writer = SafeCsvWriter(stream)
        writer.writerow(POD_COLUMNS_OUT)
        for result in results:
            for name, milli, count, arrival, start, end, status, node, gpus in result.pod_rows:
                wait = "" if start is None else _seconds(start - arrival)
                writer.writerow(
                    (result.workload, result.policy, result.seed, name, milli, count, _seconds(arrival),
                     _optional(start), _optional(end), wait, status, node, gpus)
                )  # fmt: skip
    with atomic_text_writer(timeline) as stream:
        writer = SafeCsvWriter(stream)
        writer.writerow(TIMELINE_COLUMNS_OUT)
        for result in results:
            for at, allocated, fragmented, queued in zip(
                result.times.tolist(),
                result.allocated.tolist(),
                result.fragmented.tolist(),
                result.queued.tolist(),
                strict=True,
            ):
                writer.writerow((result.workload, result.policy, result.seed, _seconds(at), round(allocated, 3),
                                 round(fragmented, 3), queued))  # fmt: skip
    atomic_write_text(summary, json.dumps([result.record() for result in results], indent=1) + "\n")
    return [pods, timeline, summary]


def _seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") or "0"


def _optional(value: float | None) -> str:
    return "" if value is None else _seconds(value)
