"""The trace's topology column (same-node, nvlink constraints) and `# topology:` header on user traces."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.sim.core.cluster import ClusterState
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.extensions.constraints import ConstrainedPlacement
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import TraceError, parse_trace, trace_to_text
from gpuslice.sim.traces.topology import topology_cluster

# `filler` takes 2 of node-0000's 4 GPUs; `pair` (2 pods x 2 GPUs) then fits on node-0000 + node-0001 by
# first-fit, or only on node-0001 when it must stay on one node.
PAIR = """# cluster: 2xh100x4
job_id,submit,duration,pods,gpu,topology
filler,0,1000,1,2,
pair,1,100,2,2,{constraint}
"""
# One 2-GPU job on a PCIe-only node: no NVLink ring, so it runs (1 + split penalty) x 100 s.
PCIE = """# cluster: 1xh100x4
{headers}job_id,submit,duration,pods,gpu,topology
two,0,100,1,2,{constraint}
one,0,100,1,1,{constraint}
"""


def jobs_csv(tmp_path: Path, text: str, policy: str = "first-fit") -> dict[str, dict[str, str]]:
    path = tmp_path / "t.csv"
    path.write_text(text)
    result = CliRunner().invoke(cli, ["sim", "compare", "--trace", str(path), "--policies", policy,
                                      "--out", str(tmp_path / "o")])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    with (tmp_path / "o" / "jobs.csv").open(newline="") as stream:
        return {row["job_id"]: row for row in csv.DictReader(stream)}


@pytest.mark.parametrize(
    ("constraint", "nodes"), [("", "node-0000 node-0001"), ("any", "node-0000 node-0001"), ("same-node", "node-0001")]
)
@pytest.mark.parametrize("policy", ["first-fit", "best-fit", "gang"])
def test_same_node_keeps_every_pod_of_the_job_on_one_node(
    tmp_path: Path, constraint: str, nodes: str, policy: str
) -> None:
    rows = jobs_csv(tmp_path, PAIR.format(constraint=constraint), policy)
    assert (rows["pair"]["status"], rows["pair"]["nodes"], rows["pair"]["start"]) == ("done", nodes, "1")


@pytest.mark.parametrize(
    ("headers", "constraint", "two_end", "two_status"),
    [
        ("", "", "100", "done"),  # no header: no NVLink model
        ("# topology: pcie-2socket\n", "", "130", "done"),  # the default split penalty 0.3
        ("# topology: pcie-2socket\n# split_penalty: 0.5\n", "", "150", "done"),
        ("# topology: auto\n", "", "130", "done"),  # a 4-GPU H100 node has no DGX board: PCIe only
        ("# topology: pcie-2socket\n", "nvlink", "", "rejected"),  # no island holds 2 GPUs: it never can run
    ],
)
def test_the_topology_header_runs_the_nvlink_model_on_a_user_trace(
    tmp_path: Path, headers: str, constraint: str, two_end: str, two_status: str
) -> None:
    rows = jobs_csv(tmp_path, PCIE.format(headers=headers, constraint=constraint))
    assert (rows["two"]["end"], rows["two"]["status"]) == (two_end, two_status)
    assert (rows["one"]["end"], rows["one"]["status"]) == ("100", "done")  # one GPU is its own island


def test_nvlink_moves_a_job_into_one_island() -> None:
    cluster, topologies = topology_cluster("quads", 1, 1)  # GPUs 0-3 and 4-7 are two NVLink islands
    state = ClusterState(cluster)
    state.bind(PodSpec.of(2), 0)  # GPUs 0, 1
    policy = ConstrainedPlacement(make_policy("first-fit"), topologies)
    four = (PodSpec.of(4),)
    assert [tuple(b.gpus) for b in policy.place(four, JobSpec("free", 0, 1, four), state.copy()) or []] == [
        (2, 3, 4, 5)
    ]
    placed = policy.place(four, JobSpec("ring", 0, 1, four, topology="nvlink"), state)
    assert [tuple(b.gpus) for b in placed or []] == [(4, 5, 6, 7)]
    assert policy.place(four, JobSpec("late", 0, 1, four, topology="nvlink"), state) is None  # 2 + 0 free
    assert state.full_free[0] == 2  # the refused job left nothing bound


def test_topology_round_trips_through_the_file_format() -> None:
    trace = parse_trace(PCIE.format(headers="# topology: pcie-2socket\n# split_penalty: 0.5\n", constraint="nvlink"))
    again = parse_trace(trace_to_text(trace))
    assert [job.topology for job in again.jobs] == ["nvlink", "nvlink"] and again.jobs == trace.jobs
    assert again.physics.nvlink is not None and trace.physics.nvlink is not None
    assert (again.physics.nvlink.preset, again.physics.nvlink.penalties) == (
        "pcie-2socket",
        trace.physics.nvlink.penalties,
    )
    assert "topology" not in trace_to_text(parse_trace(PAIR.format(constraint=""))).splitlines()[-3]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (PAIR.format(constraint="ring"), r"t\.csv:4: topology: must be one of any, same-node, nvlink, got 'ring'"),
        (
            PAIR.format(constraint="nvlink") + "pair,1,100,1,1,same-node\n",
            r"t\.csv:5: job 'pair' already began on line 4",
        ),
        (PCIE.format(headers="# topology: torus\n", constraint=""), r"t\.csv: header topology: 'torus' is not auto"),
        (
            PCIE.format(headers="# topology: dgx-h100\n", constraint=""),
            r"t\.csv: header topology: dgx-h100 describes 8",
        ),
        (
            PCIE.format(headers="# topology: auto\n# node_penalty: -1\n", constraint=""),
            r"header node_penalty: must be 0 to 100",
        ),
        (
            "# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu,gpu_memory_mib,topology\na,0,1,1,0.5,100,same-node\n",
            r"t\.csv: topology constraints and the NVLink model do not run on the sharing tiers",
        ),
    ],
)
def test_bad_topology_values_name_the_file_line_and_column(text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse_trace(text, "t.csv")
