"""The pod list's bulk reading gives exactly what the row-by-row reading gives, and leaves every file it
does not take (odd rows, bad values) to that reading, whose errors name the line."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from gpuslice.fgd import trace
from gpuslice.fgd.trace import OpenbTraceError, PodTable, load_pods

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
GOOD = "p2,4000,100,1,500,G2|T4\np1,0,0,0,0,\np3,8000,16,2,1000,\n"


def same(a: PodTable, b: PodTable) -> bool:
    return all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) for f in fields(PodTable))


def outcome(path: Path) -> PodTable | str:
    try:
        return load_pods(path)
    except OpenbTraceError as error:
        return f"error: {error}"


def row_by_row(path: Path, monkeypatch: pytest.MonkeyPatch) -> PodTable | str:
    with monkeypatch.context() as patched:
        patched.setattr(trace, "_load_plain_pods", lambda _: None)
        return outcome(path)


@pytest.mark.parametrize(
    ("text", "bulk_takes_it"),
    [
        (HEADER + GOOD, True),
        ("\ufeff" + HEADER + GOOD + "\n\n", True),  # a byte-order mark and blank lines
        (HEADER.replace(",gpu_spec", "") + "a, 1 ,2,0,0\n", True),  # no gpu_spec column; spaces round a number
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,extra\na,1,2,0,0,,x\nb,1_0,2,0,0,,\n", True),
        (HEADER + "a,1,2,0,0\n", False),  # a short row: the spec is read as empty
        (HEADER + "a,1,2,0,0,,extra\n", False),  # a long row
        (HEADER + "a,x,2,0,0,\n", False),
        (HEADER + "a,-1,2,0,0,\n", False),
        (HEADER + "a,1,2,0,0,\na,1,2,0,0,\n", False),
        (HEADER + "a,1,2,1,1001,\n", False),
        (HEADER + "a,1,2,1,0,\n", False),
        (HEADER + "a,1,2,2,500,\n", False),
        (HEADER + f"a,{10**12 + 1},2,0,0,\n", False),
        (HEADER + f"a,{10**30},2,0,0,\n", False),
        (HEADER, False),
        ("name,name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,b,1,2,0,0\n", False),
        ("name,cpu_milli\na,1\n", False),
        (HEADER + "a" * 70_000 + ",1,2,0,0,\n", False),  # a line over the limit
        ("", False),
    ],
)
def test_the_bulk_path_answers_as_the_row_by_row_path(
    text: str, bulk_takes_it: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "openb_pod_list_x.csv"
    path.write_text(text, encoding="utf-8")
    assert (trace._load_plain_pods(path) is not None) == bulk_takes_it
    ours, theirs = outcome(path), row_by_row(path, monkeypatch)
    assert ours == theirs if isinstance(theirs, str) else isinstance(ours, PodTable) and same(ours, theirs)


def test_the_real_trace_is_read_in_bulk_with_the_same_table(trace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = trace_dir / "openb_pod_list_default.csv"
    bulk, checked = trace._load_plain_pods(path), row_by_row(path, monkeypatch)
    assert bulk is not None and isinstance(checked, PodTable) and same(bulk, checked)


def test_a_missing_file_is_the_row_by_row_error(tmp_path: Path) -> None:
    with pytest.raises(OpenbTraceError, match="does not exist"):
        load_pods(tmp_path / "nothing.csv")
