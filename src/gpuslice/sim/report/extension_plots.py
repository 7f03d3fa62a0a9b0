"""Figures for the extension traces: the checkpoint trade-off, tenant shares, NVLink slowdowns, sharing tiers."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuslice.plotting import figure_file

if TYPE_CHECKING:
    from matplotlib.axes import Axes

Record = dict[str, Any]


def plot_records(figure: str, records: Sequence[Record], path: str | Path) -> None:
    """Draw the named extension figure (a key of FIGURES) of a comparison's records into `path`."""
    if figure not in FIGURES:
        raise ValueError(f"no extension figure {figure!r}; known: {', '.join(FIGURES)}")
    columns, size, draw = FIGURES[figure]
    with figure_file(path, columns, size) as (_, axes):
        draw(records, axes)


def _interval(policy: str) -> tuple[float | None, bool] | None:
    """(checkpoint interval in s or None for never, drain?) of a `preempt:...` variant; None for other rows."""
    if not policy.startswith("preempt"):
        return None
    options = dict(part.split("=", 1) for part in policy.split(":")[1:] if "=" in part)
    ckpt = options.get("ckpt", "none")
    interval = None if ckpt in ("none", "never", "0") else float(ckpt)
    return interval, options.get("grace", "0") not in ("0", "0.0")


def _top(record: Record, key: str) -> float:
    classes = record["wait_by_priority"]
    return float(classes[max(classes, key=int)][key])


def _preemption(records: Sequence[Record], axes_row: list[Axes]) -> None:
    left, right = axes_row
    series: dict[bool, list[tuple[float, Record]]] = {False: [], True: []}
    never: Record | None = None
    for record in records:
        parsed = _interval(record["policy"])
        if parsed is None:
            left.axhline(
                _top(record, "wait_mean") / 60, color="grey", linestyle=":", label=f"{record['policy']} (no preemption)"
            )
            continue
        interval, drain = parsed
        if interval is None:
            never = record
        else:
            series[drain].append((interval / 60, record))
    for drain, points in series.items():
        if not points:
            continue
        points.sort(key=lambda item: item[0])
        xs = [x for x, _ in points]
        label = "drain to next save" if drain else "kill at once"
        left.plot(xs, [_top(r, "wait_mean") / 60 for _, r in points], marker="o", label=label)
        right.plot(xs, [r["wasted_gpu_hours"] for _, r in points], marker="o", label=f"{label}: lost + restore")
        right.plot(
            xs, [r["overhead_gpu_hours"] for _, r in points], marker="s", linestyle="--", label=f"{label}: + saves"
        )
    if never is not None:
        right.axhline(never["wasted_gpu_hours"], color="red", linestyle=":", label="never checkpoint (kill)")
    left.set(xlabel="checkpoint interval (min)", ylabel="mean wait, top priority (min)", title="High-priority wait")
    right.set(xlabel="checkpoint interval (min)", ylabel="GPU-hours", title="GPU time wasted by preemption")
    for axes in (left, right):
        axes.set_xscale("log")
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")


def _tenants(records: Sequence[Record], axes_row: list[Axes]) -> None:
    left, right = axes_row
    tenants = sorted({t for r in records for t in r.get("tenants", {})})
    width = 0.8 / max(len(tenants), 1)
    xs = np.arange(len(records))
    for position, tenant in enumerate(tenants):
        shares = [r["tenants"].get(tenant, {}).get("mean_dominant_share", 0.0) for r in records]
        left.bar(xs + position * width, shares, width, label=tenant)
        waits = [r["tenants"].get(tenant, {}).get("wait_mean", 0.0) / 3600 for r in records]
        right.bar(xs + position * width, waits, width, label=tenant)
    for axes, title, label in (
        (left, "Mean dominant share while contended", "dominant share"),
        (right, "Mean queue wait", "hours"),
    ):
        axes.set_xticks(xs + width * (len(tenants) - 1) / 2)
        axes.set_xticklabels([f"{r['policy']}\nJain {r['jain_index']:.2f}" for r in records])
        axes.set(title=title, ylabel=label)
        axes.grid(alpha=0.3, axis="y")
        _legend_above_bars(axes, len(tenants))


def _topology(records: Sequence[Record], axes_row: list[Axes]) -> None:
    left, right = axes_row
    sizes = sorted({s for r in records for s in r["topology_by_gpus"]}, key=float)
    width = 0.8 / max(len(records), 1)
    xs = np.arange(len(sizes))
    for position, record in enumerate(records):
        table = record["topology_by_gpus"]
        slow = [table.get(s, {}).get("mean_slowdown", math.nan) for s in sizes]
        jct = [table.get(s, {}).get("jct_mean", math.nan) / 3600 for s in sizes]
        left.bar(xs + position * width, slow, width, label=record["policy"])
        right.bar(xs + position * width, jct, width, label=record["policy"])
    for axes, title, label in ((left, "Mean run-time stretch", "x"), (right, "Mean job completion time", "hours")):
        axes.set_xticks(xs + width * (len(records) - 1) / 2)
        axes.set_xticklabels([f"{s} GPU" if s == "1" else f"{s} GPUs" for s in sizes])
        axes.set(title=title, ylabel=label)
        axes.grid(alpha=0.3, axis="y")
        axes.legend(fontsize="small")
    left.set_ylim(bottom=0.9)


def _sharing(records: Sequence[Record], axes: list[Axes]) -> None:
    names = [r["policy"] for r in records]
    xs = np.arange(len(records))
    _bars(
        axes[0],
        xs,
        names,
        {"GPU util": [r["gpu_utilization"] for r in records], "GPUs held": [r["gpu_allocation"] for r in records]},
        "share of the cluster",
        "Utilization and allocation",
    )
    _bars(
        axes[1],
        xs,
        names,
        {
            "jobs per shared GPU": [r["jobs_per_shared_gpu"] for r in records],
            "GPU-fault domain": [r["gpu_fault_domain_jobs"] for r in records],
            "crash domain": [r["crash_domain_jobs"] for r in records],
            "memory domain": [r["memory_domain_jobs"] for r in records],
        },
        "jobs",
        "Packing density and isolation exposure",
    )
    _bars(
        axes[2],
        xs,
        names,
        {
            "inference wait p99 (min)": [r["by_kind"]["inference"]["wait_p99"] / 60 for r in records],
            "training wait p99 (h)": [r["by_kind"]["training"]["wait_p99"] / 3600 for r in records],
        },
        "",
        "Queue wait, p99",
    )


def _bars(axes: Axes, xs: Any, names: list[str], series: dict[str, list[float]], ylabel: str, title: str) -> None:
    width = 0.8 / len(series)
    for position, (label, values) in enumerate(series.items()):
        axes.bar(xs + position * width, values, width, label=label)
    axes.set_xticks(xs + width * (len(series) - 1) / 2)
    axes.set_xticklabels(names, rotation=20)
    axes.set(title=title, ylabel=ylabel)
    axes.grid(alpha=0.3, axis="y")
    _legend_above_bars(axes, len(series))


def _legend_above_bars(axes: Axes, entries: int) -> None:
    """The legend in a band of its own above the tallest bar (in two columns), never over a bar: the y axis
    grows by the band's height."""
    rows = math.ceil(entries / 2)
    low, high = axes.get_ylim()
    axes.set_ylim(low, high + (high - low) * (0.08 + 0.09 * rows))
    axes.legend(fontsize="small", loc="upper center", ncol=2, frameon=False)


# figure name (ReportSection.figure) -> (columns, size in inches, draw(records, axes))
FIGURES: dict[str, tuple[int, tuple[float, float], Callable[[Sequence[Record], list[Axes]], None]]] = {
    "preemption": (2, (13, 4.8), _preemption),
    "tenants": (2, (13, 4.8), _tenants),
    "topology": (2, (13, 4.8), _topology),
    "sharing": (3, (15, 4.6), _sharing),
}
