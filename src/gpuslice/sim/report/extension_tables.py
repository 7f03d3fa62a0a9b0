"""Tables and plots of the extension metrics: each extension declares its section; the runs carry them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from gpuslice.sim.core.sections import ReportSection
from gpuslice.sim.experiments.compare import Comparison


def comparison_sections(comparison: Comparison) -> list[ReportSection]:
    """The sections of the extensions attached to any run of the comparison, in first-seen order."""
    return list(dict.fromkeys(section for result in comparison.results for section in result.sections))


def extension_rows(comparison: Comparison) -> list[tuple[ReportSection, list[list[str]]]]:
    """For each section some result has metrics for: its rows (policy first), one per result."""
    records = [result.summary() for result in comparison.results]
    return [
        (section, [[record["policy"], *(cell(record) for _, cell in section.columns)] for record in records])
        for section in comparison_sections(comparison)
    ]


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


def extension_figure(comparison: Comparison) -> str | None:
    """The figure of the first attached extension that has one (see extension_plots.FIGURES), or None."""
    return next((s.figure for s in comparison_sections(comparison) if s.figure is not None), None)


def has_extension_plot(comparison: Comparison) -> bool:
    return extension_figure(comparison) is not None


def plot_extension(comparison: Comparison, path: str | Path) -> None:
    """The figure for an extension trace (see extension_plots)."""
    from gpuslice.sim.report.extension_plots import plot_records

    figure = extension_figure(comparison)
    if figure is None:
        raise ValueError(f"no extension figure for trace {comparison.trace.name!r}")
    plot_records(figure, [result.summary() for result in comparison.results], path)
