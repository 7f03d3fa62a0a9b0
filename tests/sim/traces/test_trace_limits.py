"""Hostile trace files for `sim compare --trace`: bad bytes, absurd times, runaway counts, refused by file:line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.sim.core.clusters import MAX_CLUSTER_NODES
from gpuslice.sim.traces import TraceError, csv_format
from gpuslice.sim.traces.csv_format import MAX_TRACE_LINE_BYTES, MAX_TRACE_PODS, MAX_TRACE_SECONDS, load_trace

HEAD = "# cluster: 2xdgx-h100\njob_id,submit,duration,pods,gpu\n"

CASES = [
    # (id, file bytes, expected message with {path})
    (
        "bad-bytes",
        (HEAD + "a,0,60,1,1\n").encode() + b"b\xfe,0,60,1,1\n",
        "invalid trace {path}: not UTF-8 text (byte 0xfe at offset 66)",
    ),
    ("submit-inf", (HEAD + "a,inf,60,1,1\n").encode(), "{path}:3: submit: 'inf' is not a time the simulator can use"),
    ("submit-nan", (HEAD + "a,0,60,1,1\nb,nan,60,1,1\n").encode(), "{path}:4: submit: 'nan' is not a time"),
    (
        "duration-huge",
        (HEAD + "a,0,1e300,1,1\n").encode(),
        f"{{path}}:3: duration: '1e300' is not a time the simulator can use (finite, at most {MAX_TRACE_SECONDS} s",
    ),
    ("duration-negative-inf", (HEAD + "a,0,-inf,1,1\n").encode(), "{path}:3: duration: '-inf'"),
    (
        "pods",
        (HEAD + "a,0,60,100000000,1\n").encode(),
        f"{{path}}:3: pods: 100000000 pods in the trace so far, over the limit of {MAX_TRACE_PODS}",
    ),
    (
        "cluster",
        b"# cluster: 100000000xdgx-h100\njob_id,submit,duration,pods,gpu\n",
        f"100000000 nodes, over the limit of {MAX_CLUSTER_NODES}",
    ),
    (
        "cluster-digits",
        b"# cluster: " + b"9" * 5000 + b"xdgx-h100\njob_id,submit,duration,pods,gpu\n",
        "must look like <count>x<preset>",
    ),
    (
        "long-line",
        (HEAD + "a" * (MAX_TRACE_LINE_BYTES + 10) + "\n").encode(),
        f"invalid trace {{path}}:3: a line longer than the limit of {MAX_TRACE_LINE_BYTES} bytes",
    ),
    ("carriage-return", (HEAD + "a,0,60\r,1,1\n").encode(), "{path}:3: not CSV"),
    ("random-bytes", bytes(range(256)) * 4, "{path}: missing the '# cluster: <spec>' header"),
]


@pytest.mark.parametrize(("data", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_traces_are_refused_quickly_naming_file_and_line(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(data)
    started = time.perf_counter()
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    assert message.format(path=path) in str(caught.value)
    assert time.perf_counter() - started < 5.0  # generous: the soak benchmark measures the real figure


def test_rows_over_the_cap_are_refused_at_the_first_one_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csv_format, "MAX_TRACE_ROWS", 3)
    path = tmp_path / "trace.csv"
    path.write_text(HEAD + "".join(f"j{n},{n},60,1,1\n" for n in range(4)))
    with pytest.raises(TraceError, match=r"trace.csv:6: more than 3 rows, the limit of a trace"):
        load_trace(path)
    path.write_text(HEAD + "".join(f"j{n},{n},60,1,1\n" for n in range(3)))
    assert len(load_trace(path).jobs) == 3


def test_sim_compare_exits_2_with_the_message_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes((HEAD + "a,0,60,1,1\n").encode() + b"\xff\n")
    result = CliRunner().invoke(cli, ["sim", "compare", "--trace", str(path)])
    assert result.exit_code == 2, result.output
    assert f"invalid trace {path}: not UTF-8 text (byte 0xff at offset 65)" in result.stderr
    assert "Traceback" not in result.output + result.stderr
