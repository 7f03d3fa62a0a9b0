"""Tables and plots of the extension metrics (preemption, tenants, topology, sharing tiers, Kueue)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from gpuslice.sim.compare import Comparison
from gpuslice.sim.report import format_duration

Record = dict[str, Any]
Cell = Callable[[Record], str]


def _get(record: Record, *path: str) -> Any:
    value: Any = record
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _num(*path: str, fmt: str = "{:g}") -> Cell:
    def cell(record: Record) -> str:
        value = _get(record, *path)
        return "-" if value is None else fmt.format(value)

    return cell


def _time(*path: str) -> Cell:
    def cell(record: Record) -> str:
        value = _get(record, *path)
        return "-" if value is None else format_duration(float(value))

    return cell


def _top_priority(record: Record) -> str | None:
    classes = record.get("wait_by_priority") or {}
    return max(classes, key=int) if classes else None


def _by_top(key: str, time: bool = True) -> Cell:
    def cell(record: Record) -> str:
        top = _top_priority(record)
        value = None if top is None else record["wait_by_priority"][top].get(key)
        if value is None:
            return "-"
        return format_duration(float(value)) if time else f"{value:g}"

    return cell


def _by_low(key: str) -> Cell:
    def cell(record: Record) -> str:
        classes = record.get("wait_by_priority") or {}
        if not classes:
            return "-"
        return format_duration(float(classes[min(classes, key=int)][key]))

    return cell


@dataclass(frozen=True)
class Section:
    title: str
    marker: str  # a key whose presence in a record selects this section
    columns: tuple[tuple[str, Cell], ...]


SECTIONS: tuple[Section, ...] = (
    Section(
        "preemption and checkpoints (GPU-hours; waits by priority class)",
        "wait_by_priority",
        (
            ("preemptions", _num("preemptions")),
            ("top-priority wait mean", _by_top("wait_mean")),
            ("top-priority wait p99", _by_top("wait_p99")),
            ("lowest-priority JCT mean", _by_low("jct_mean")),
            ("lost", _num("lost_gpu_hours", fmt="{:.1f}")),
            ("restore", _num("restore_gpu_hours", fmt="{:.1f}")),
            ("wasted", _num("wasted_gpu_hours", fmt="{:.1f}")),
            ("checkpoint saves", _num("checkpoint_gpu_hours", fmt="{:.1f}")),
            ("all overhead", _num("overhead_gpu_hours", fmt="{:.1f}")),
        ),
    ),
    Section(
        "fairness between tenants (dominant shares while at least two tenants have work)",
        "jain_index",
        (
            ("Jain index", _num("jain_index", fmt="{:.3f}")),
            ("Jain (weighted)", _num("jain_index_weighted", fmt="{:.3f}")),
            ("largest gap", _num("max_share_gap", fmt="{:.3f}")),
            ("GPU util", _num("gpu_utilization", fmt="{:.1%}")),
        ),
    ),
    Section(
        "NVLink topology (jobs without an NVLink ring or across nodes run slower)",
        "topology_by_gpus",
        (
            ("split jobs", _num("split_jobs")),
            *(
                (f"{size}-GPU {label}", cell)
                for size in ("4", "8")
                for label, cell in (
                    ("split", _num("topology_by_gpus", size, "split")),
                    ("slowdown", _num("topology_by_gpus", size, "mean_slowdown", fmt="{:.3f}")),
                    ("JCT", _time("topology_by_gpus", size, "jct_mean")),
                )
            ),
            ("goodput", _num("gpu_goodput", fmt="{:.1%}")),
        ),
    ),
    Section(
        "sharing tiers (fault domains: mean jobs per domain, seen from each fractional job)",
        "by_kind",
        (
            ("GPU util", _num("gpu_utilization", fmt="{:.1%}")),
            ("GPUs held", _num("gpu_allocation", fmt="{:.1%}")),
            ("jobs per shared GPU", _num("jobs_per_shared_gpu", fmt="{:.2f}")),
            ("GPU-fault domain", _num("gpu_fault_domain_jobs", fmt="{:.2f}")),
            ("crash domain", _num("crash_domain_jobs", fmt="{:.2f}")),
            ("memory domain", _num("memory_domain_jobs", fmt="{:.2f}")),
            ("mem over-commit GPU-h", _num("memory_overcommit_gpu_hours", fmt="{:.1f}")),
            ("OOM-exposed jobs", _num("oom_exposed_jobs")),
            ("inference wait p99", _time("by_kind", "inference", "wait_p99")),
            ("inference stretch", _num("by_kind", "inference", "run_time_stretch", fmt="{:.3f}")),
            ("training wait p99", _time("by_kind", "training", "wait_p99")),
        ),
    ),
    Section(
        "Kueue admission (waitForPodsReady)",
        "admissions",
        (
            ("admissions", _num("admissions")),
            ("pods-ready timeouts", _num("pods_ready_timeouts")),
            ("requeues", _num("requeues")),
            ("deactivated", _num("deactivated")),
            ("GPUs held", _num("gpu_allocation", fmt="{:.1%}")),
            ("makespan", _time("makespan")),
        ),
    ),
)


def extension_rows(comparison: Comparison) -> list[tuple[Section, list[list[str]]]]:
    """For each section some result has metrics for: its rows (policy first), one per result."""
    records = [result.summary() for result in comparison.results]
    found = []
    for section in SECTIONS:
        if any(section.marker in record for record in records):
            rows = [[record["policy"], *(cell(record) for _, cell in section.columns)] for record in records]
            found.append((section, rows))
    return found


def extension_tables(comparison: Comparison) -> list[Table]:
    tables = []
    for section, rows in extension_rows(comparison):
        table = Table(title=section.title, title_justify="left")
        table.add_column("policy")
        for header, _ in section.columns:
            table.add_column(header, justify="right")
        for row in rows:
            table.add_row(*row)
        tables.append(table)
    return tables


def extension_markdown(comparison: Comparison) -> str:
    lines: list[str] = []
    for section, rows in extension_rows(comparison):
        headers = ["policy", *(header for header, _ in section.columns)]
        lines += ["", f"*{section.title}*", "", _md(headers), _md(["---"] * len(headers))]
        lines += [_md(row) for row in rows]
    return "\n".join(lines) + "\n" if lines else ""


def _md(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def has_extension_plot(comparison: Comparison) -> bool:
    records = [result.summary() for result in comparison.results]
    return any(
        marker in record
        for record in records
        for marker in ("wait_by_priority", "jain_index", "topology_by_gpus", "by_kind")
    )


def plot_extension(comparison: Comparison, path: str | Path) -> None:
    """The figure for an extension trace (see ext_plots)."""
    from gpuslice.sim.ext_plots import plot_records

    plot_records(comparison.trace.name, [result.summary() for result in comparison.results], path)
