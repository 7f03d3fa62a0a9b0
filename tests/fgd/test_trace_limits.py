"""Hostile openb files: bad bytes, short rows, absurd numbers and runaway row counts, refused by file:line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.fgd import trace as openb
from gpuslice.fgd.trace import MAX_VALUE, NODE_FILE, OpenbTraceError, load_nodes, load_pods

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,V100M32\n"
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,1000,1024,1,500,\n"

NODE_CASES = [
    (
        "bad-bytes",
        NODES.encode() + b"n\xc0,1,1,0,\n",
        "invalid openb trace {path}: not UTF-8 text (byte 0xc0 at offset 61)",
    ),
    ("short-row", (NODES + "n2,1000\n").encode(), f"{NODE_FILE}:3: column gpu = '' is not an integer"),
    (
        "huge-number",
        (NODES + f"n2,{10**30},1,0,\n").encode(),
        f"{NODE_FILE}:3: column cpu_milli = {10**30} is over the limit of {MAX_VALUE}",
    ),
    ("random-bytes", bytes(range(256)) * 4, "missing column(s)"),  # streamed: the first problem met is named
    ("carriage-return", (NODES + "n2,1\r0,1,0,\n").encode(), f"{NODE_FILE}:3: not CSV"),
]


@pytest.mark.parametrize(("data", "message"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_hostile_node_lists(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / NODE_FILE
    path.write_bytes(data)
    with pytest.raises(OpenbTraceError) as caught:
        load_nodes(path)
    assert message.format(path=path) in str(caught.value)


def test_pod_rows_over_the_cap_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openb, "MAX_PODS", 2)
    path = tmp_path / "openb_pod_list_default.csv"
    path.write_text(PODS + "p2,1000,1024,1,500,\np3,1000,1024,1,500,\n")
    with pytest.raises(
        OpenbTraceError, match=r"openb_pod_list_default.csv:4: more than 2 rows, the limit of this file"
    ):
        load_pods(path)


def test_sim_openb_exits_2_on_a_bad_file(tmp_path: Path) -> None:
    (tmp_path / NODE_FILE).write_bytes(NODES.encode() + b"\xff\n")
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS)
    result = CliRunner().invoke(
        cli, ["sim", "openb", "--trace-dir", str(tmp_path), "--policies", "random", "--seeds", "1"]
    )
    assert result.exit_code == 2, result.output
    assert "not UTF-8 text (byte 0xff" in result.stderr and "Traceback" not in result.stderr
