"""CSV text that spreadsheets cannot run: cells starting with = + - @ tab or CR get a leading `'` (OWASP)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """Numbers pass as they are (a negative number is data, not a formula); text that a spreadsheet would
    read as a formula gets a `'` in front, which spreadsheets show as text and do not evaluate."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The whole file as text, every cell through safe_cell, `\\n` line ends."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow([safe_cell(cell) for cell in header])
    writer.writerows([safe_cell(cell) for cell in row] for row in rows)
    return stream.getvalue()
