"""`sim openb --out DIR`: pods.csv, timeline.csv and summary.json read back, on a two-GPU trace."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli

NODES = "sn,cpu_milli,memory_mib,gpu,model\nnode-a,8000,65536,1,V100\nnode-b,8000,65536,1,V100\n"
HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)
# 2 GPUs; the pods ask 1 + 0.5 + 0.5 = 2 GPUs: at --ratio 1.0 no pod is cloned or removed and all fit.
PODS = HEADER + (
    "pod-a,1000,1024,1,1000,,LS,Running,0,100,0\n"
    "pod-b,1000,1024,1,500,,LS,Running,10,50,10\n"
    "pod-c,1000,1024,1,500,,LS,Running,20,30,20\n"
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_two.csv").write_text(PODS)
    return tmp_path


def run(folder: Path, out: Path, ratio: str, policies: str = "best-fit") -> None:
    result = CliRunner().invoke(
        cli, ["sim", "openb", "--workload", "two", "--policies", policies, "--seeds", "1,2", "--ratio", ratio,
              "--trace-dir", str(folder), "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as stream:
        return list(csv.DictReader(stream))


def test_every_pod_is_placed_when_demand_equals_capacity(folder: Path, tmp_path: Path) -> None:
    run(folder, tmp_path / "o", "1.0")
    pods = read(tmp_path / "o" / "pods.csv")
    for seed in ("1", "2"):
        mine = [row for row in pods if row["seed"] == seed]
        assert sorted(row["pod"] for row in mine) == ["pod-a", "pod-b", "pod-c"]
        assert [row["arrival_index"] for row in mine] == ["1", "2", "3"]
        assert {row["status"] for row in mine} == {"placed"} and {row["clone"] for row in mine} == {"false"}
        assert (mine[-1]["arrived_gpus"], mine[-1]["allocated_gpus"]) == ("2", "2")
        by_pod = {row["pod"]: row for row in mine}
        # the two halves share the GPU the whole pod does not take
        assert by_pod["pod-b"]["node"] == by_pod["pod-c"]["node"] != by_pod["pod-a"]["node"]
        assert {by_pod[p]["gpus"] for p in by_pod} == {"0"}
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [(r["seed"], r["pods"], r["failed_pods"]) for r in summary] == [(1, 3, 0), (2, 3, 0)]


@pytest.mark.parametrize("policy", ["best-fit", "fgd", "random"])
def test_an_inflated_run_accounts_for_every_pod_and_never_overfills(folder: Path, tmp_path: Path, policy: str) -> None:
    run(folder, tmp_path / "o", "1.5", policy)
    pods = read(tmp_path / "o" / "pods.csv")
    summary = {r["seed"]: r for r in json.loads((tmp_path / "o" / "summary.json").read_text())}
    for seed, record in summary.items():
        mine = [row for row in pods if row["seed"] == str(seed)]
        assert [int(row["arrival_index"]) for row in mine] == list(range(1, record["pods"] + 1))
        assert sum(row["status"] == "failed" for row in mine) == record["failed_pods"] > 0
        assert sum(row["clone"] == "true" for row in mine) == record["clones"]
        assert all((row["node"] == "") == (row["status"] == "failed") for row in mine)
        placed = sum(int(row["gpu_milli"]) * int(row["num_gpu"]) for row in mine if row["status"] == "placed")
        assert float(mine[-1]["allocated_gpus"]) == placed / 1000 <= 2
        assert all(float(row["allocated_gpus"]) <= min(2, float(row["arrived_gpus"])) for row in mine)
    samples = read(tmp_path / "o" / "timeline.csv")
    assert {row["policy"] for row in samples} == {policy} and samples
    for row in samples:
        allocated, unallocated = float(row["allocated_gpus"]), float(row["unallocated_gpus"])
        assert 0 <= allocated <= 2 and allocated + unallocated == pytest.approx(2, abs=0.01)
        assert 0 <= float(row["fragmented_gpus"]) <= unallocated + 1e-9
        assert 0 <= int(row["arrived_pct"]) <= 150


@pytest.mark.parametrize("policy", ["fgd", "random"])
def test_the_placement_log_agrees_with_the_engine_on_openb(default_workload, policy: str) -> None:  # type: ignore[no-untyped-def]
    from gpuslice.fgd.engine import simulate
    from gpuslice.fgd.outputs import placement_rows

    result = simulate(default_workload, policy, 42, ratio=1.0)
    rows = list(placement_rows(default_workload, policy, 42, 1.0))
    assert len(rows) == result.pods
    assert sum(row[8] == "failed" for row in rows) == result.failed
    assert [float(row[12]) for row in rows[-100:]] == pytest.approx(result.allocated_milli[-100:] / 1000, abs=1e-3)
