"""CSV text that spreadsheets cannot run: cells starting with = + - @ tab or CR get a leading `'` (OWASP)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """Numbers pass as they are (a negative number is data, not a formula); text that a spreadsheet would
    read as a formula gets a `'` in front, which spreadsheets show as text and do not evaluate."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class SafeCsvWriter:
    """csv.writer over `stream` with every cell through safe_cell (`\n` line ends)."""

    def __init__(self, stream: TextIO) -> None:
        self._writer = csv.writer(stream, lineterminator="\n")

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([safe_cell(cell) for cell in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The whole file as text, every cell through safe_cell, `\\n` line ends."""
    stream = io.StringIO()
    writer = SafeCsvWriter(stream)
    writer.writerow(header)
    writer.writerows(rows)
    return stream.getvalue()
