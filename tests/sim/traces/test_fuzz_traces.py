"""Fuzzing the trace loader of `sim compare --trace`: any bytes give a Trace or TraceError, nothing else."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gpuslice.sim.traces import TraceError
from gpuslice.sim.traces.csv_format import COLUMNS, load_trace
from tests.support.fuzz import mutated

VALID = (
    "# gpuslice-sim-trace: 1\n# name: t\n# cluster: 2xdgx-h100+1xh100x4;island=2\n"
    + ",".join(COLUMNS)
    + "\ntrain,0,3600,2,8,112000,1048576,0,team-a,true,\nnb,30,600,1,0.25,2000,16384,0,team-b,false,H100\n"
)
CELL = st.one_of(
    st.sampled_from(["", "0", "1", "-1", "0.5", "inf", "nan", "1e300", "true", "yes", "x", "9" * 30, '"a,b"']),
    st.text(max_size=8),
)
ROW = st.lists(CELL, min_size=len(COLUMNS) - 1, max_size=len(COLUMNS) + 1).map(",".join)


def load(data: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="gs") as folder:
        path = Path(folder) / "trace.csv"
        path.write_bytes(data)
        with contextlib.suppress(TraceError):
            load_trace(path)


@given(st.one_of(mutated(VALID.encode()), st.binary(max_size=512)))
def test_fuzz_trace_bytes(data: bytes) -> None:
    load(data)


@given(st.lists(ROW, max_size=6), st.sampled_from(["2xdgx-h100", "0xh100x4", "1xnope", "3xa100x8;island=0", "x"]))
def test_fuzz_trace_rows(rows: list[str], cluster: str) -> None:
    load(f"# cluster: {cluster}\n{','.join(COLUMNS)}\n{chr(10).join(rows)}\n".encode())
