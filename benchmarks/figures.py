"""One figure of `make bench` beside its goal, and the summary table every benchmark's figures end up in."""

from __future__ import annotations

import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

PYCACHE = Path(tempfile.gettempdir()) / "gpuslice-bench-pycache"


def bytecode_env() -> dict[str, str]:
    """The environment for a timed child process, with bytecode caching on (into a private folder): the image
    runs compiled bytecode, so a start that compiles every module measures the wrong thing."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


@dataclass(frozen=True)
class Figure:
    """A measured value; `goal` is the bound it must stay within (at most, or at least when `higher_is_better`)."""

    name: str
    value: float
    unit: str
    goal: float | None = None
    higher_is_better: bool = False
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.goal is None:
            return ""
        met = self.value >= self.goal if self.higher_is_better else self.value <= self.goal
        return "meets" if met else "MISSES"

    @property
    def goal_text(self) -> str:
        if self.goal is None:
            return "-"
        return f"{'>=' if self.higher_is_better else '<='} {_number(self.goal)} {self.unit}".rstrip()


def _number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2f}"


def percentile(samples: list[float], fraction: float) -> float:
    """The inclusive-method percentile (0 < fraction < 1) of at least two samples."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[round(fraction * 100) - 1]


def table(figures: list[Figure]) -> str:
    """Plain-text table: figure, value, goal, verdict, note."""
    rows = [(f.name, f"{_number(f.value)} {f.unit}".rstrip(), f.goal_text, f.verdict, f.note) for f in figures]
    header = ("figure", "measured", "goal", "", "")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    lines = []
    for row in [header, *rows]:
        right = (cell.rjust(width) for cell, width in zip(row[1:4], widths[1:], strict=True))
        cells = [row[0].ljust(widths[0]), *right]
        lines.append("  ".join(cells) + (f"  {row[4]}" if row[4] else ""))
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(line.rstrip() for line in lines)
