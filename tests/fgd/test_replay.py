"""`sim openb-replay`: openb replayed in real time, with hand-checked answers on a one-GPU cluster."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.fgd.engine import Workload
from gpuslice.fgd.replay import replay, sample_nodes
from gpuslice.fgd.trace import OpenbTraceError, load_trace

NODES = "sn,cpu_milli,memory_mib,gpu,model\nnode-a,8000,65536,1,V100\n"
HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)
# a runs 0-100 on the only GPU. b (traced run time 40 s) arrives at 10 and waits for a: 100-140, wait 90.
# c was never scheduled in the trace and is deleted at 30 while it still waits: withdrawn.
PODS = HEADER + (
    "pod-a,1000,1024,1,1000,,LS,Running,0,100,0\n"
    "pod-b,1000,1024,1,1000,,LS,Running,10,50,10\n"
    "pod-c,1000,1024,1,1000,,BE,Pending,20,30,\n"
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_tiny.csv").write_text(PODS)
    return tmp_path


@pytest.mark.parametrize("policy", ["random", "best-fit", "fgd", "clustering", "packing", "dotprod", "fgd-cpu"])
def test_a_tiny_replay_has_the_hand_checked_answer(folder: Path, policy: str) -> None:
    result = replay(Workload.from_trace(load_trace("tiny", folder)), policy, seed=1)
    assert (result.placed, result.never_placed, result.withdrawn) == (2, 1, 1)
    assert (result.wait_p50, result.wait_p99) == (45.0, pytest.approx(89.1))
    # Over the arrival window [0, 20]: the GPU is allocated throughout; b waits from 10 (c joins it at 20-30).
    assert result.gpu_allocation == 1.0 and result.unallocated_gpus == 0.0
    assert result.queue_mean == 0.5 and result.queue_peak == 2
    assert result.times[-1] == 140.0 and result.allocated[-1] == 0.0  # all released at the end


def test_compressing_arrivals_keeps_run_times(folder: Path) -> None:
    result = replay(Workload.from_trace(load_trace("tiny", folder)), "best-fit", seed=1, compress=2.0)
    # Arrivals at 0, 5, 10; c leaves at 10 + its 10 s; b starts when a ends at 100: wait 95, ends at 140.
    assert (result.wait_p50, result.withdrawn, result.times[-1]) == (47.5, 1, 140.0)


def test_the_command_writes_records_and_a_plot(folder: Path, tmp_path: Path) -> None:
    plot = tmp_path / "r.png"
    result = CliRunner().invoke(
        cli, ["sim", "openb-replay", "--workload", "tiny", "--policies", "best-fit,fgd", "--trace-dir", str(folder),
              "--json", "-", "--plot", str(plot), "--markdown"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    records = json.loads(result.stdout)
    assert [(r["policy"], r["placed"], r["withdrawn"]) for r in records] == [("best-fit", 2, 1), ("fgd", 2, 1)]
    assert "| tiny | best-fit | 1 | 2/3 | 1 (1 withdrawn) | 45 s | 89 s | 100.00 % |" in result.stderr
    assert plot.stat().st_size > 10_000


def test_a_pod_list_without_times_is_a_clear_error(folder: Path) -> None:
    (folder / "openb_pod_list_notimes.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,1,1000\n"
    )
    with pytest.raises(OpenbTraceError, match="missing column"):
        replay(Workload.from_trace(load_trace("notimes", folder)), "best-fit", seed=1)


def test_a_bad_time_names_the_file_line_and_column(folder: Path) -> None:
    (folder / "openb_pod_list_bad.csv").write_text(HEADER + "pod-a,1000,1024,1,1000,,LS,Running,0,soon,0\n")
    with pytest.raises(OpenbTraceError, match=r"openb_pod_list_bad.csv:2: deletion_time: not a whole number"):
        replay(Workload.from_trace(load_trace("bad", folder)), "best-fit", seed=1)


def test_a_node_sample_is_seeded_and_sized(folder: Path) -> None:
    nodes = load_trace("tiny", folder).nodes
    assert sample_nodes(nodes, 1.0, 3) is nodes
    assert len(sample_nodes(nodes, 0.01, 3).names) == 1  # at least one node
    with pytest.raises(ValueError, match="node fraction"):
        sample_nodes(nodes, 0.0, 3)


def test_out_dir_accounts_for_every_pod_once(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = CliRunner().invoke(
        cli, ["sim", "openb-replay", "--workload", "tiny", "--policies", "best-fit", "--trace-dir", str(folder),
              "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    with (out / "pods.csv").open(newline="") as stream:
        pods = {row["pod"]: row for row in csv.DictReader(stream)}
    assert [(r["status"], r["start"], r["end"], r["wait"], r["node"]) for r in pods.values()] == [
        ("placed", "0", "100", "0", "node-a"),
        ("placed", "100", "140", "90", "node-a"),
        ("withdrawn", "", "", "", ""),
    ]
    with (out / "timeline.csv").open(newline="") as stream:
        samples = list(csv.DictReader(stream))
    assert all(0 <= float(row["allocated_gpus"]) <= 1 and int(row["queued_pods"]) >= 0 for row in samples)
    assert json.loads((out / "summary.json").read_text())[0]["placed"] == 2
