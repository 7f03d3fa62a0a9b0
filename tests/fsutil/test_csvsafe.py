"""Spreadsheet formula cells are neutralised in every CSV we write (OWASP's rule), and nothing else changes."""

from __future__ import annotations

import csv
import io

import pytest

from gpuslice.fsutil.csvsafe import csv_text, safe_cell


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("\rcmd", "'\rcmd"),
        ("job-1", "job-1"),
        ("", ""),
        (-3, -3),  # numbers are data
        (1.5, 1.5),
    ],
)
def test_safe_cell(cell: object, written: object) -> None:
    assert safe_cell(cell) == written


def test_csv_text_round_trips_with_the_prefix() -> None:
    text = csv_text(("job_id", "gpu"), [("=cmd|' /C calc'!A0", -1), ("plain", 2)])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows == [["job_id", "gpu"], ["'=cmd|' /C calc'!A0", "-1"], ["plain", "2"]]
