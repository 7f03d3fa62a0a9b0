"""Report sections: an extension's table of per-run cells, declared by the extension that owns the metrics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Record = dict[str, Any]  # one run's JSON record (SimResult.summary())
Cell = Callable[[Record], str]


def format_duration(seconds: float) -> str:
    """Seconds as the tables show them: "45 s", "12.5 min" or "3.2 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def lookup(record: Record, *path: str) -> Any:
    """record[path[0]][path[1]]...; None where a key is missing."""
    value: Any = record
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def number(*path: str, fmt: str = "{:g}") -> Cell:
    def cell(record: Record) -> str:
        value = lookup(record, *path)
        return "-" if value is None else fmt.format(value)

    return cell


def duration(*path: str) -> Cell:
    def cell(record: Record) -> str:
        value = lookup(record, *path)
        return "-" if value is None else format_duration(float(value))

    return cell


@dataclass(frozen=True)
class ReportSection:
    """A table the report prints when some run of a comparison carries this section (one row per run).

    `figure` names the extension figure drawn for `sim compare --plot` (see sim.report.extension_plots),
    or is None when the extension has no figure of its own.
    """

    title: str
    columns: tuple[tuple[str, Cell], ...]
    figure: str | None = None
