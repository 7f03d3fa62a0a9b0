"""`sim snapshot` against an in-test API server through the real lightkube client, with hand-computed answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.fgd.trace import load_trace
from gpuslice.snapshot.build import build_snapshot
from gpuslice.snapshot.kube import LightkubeReader
from gpuslice.snapshot.render import to_json
from gpuslice.snapshot.source import ClusterObjects, MemoryReader, SnapshotError, read_cluster
from gpuslice.snapshot.whatif import what_if
from tests.snapshot.api_server import ListApi, kubeconfig_text, lightkube_client, list_api
from tests.snapshot.objects import cpu_node, dra_claim, dra_slice, gpu_node, pod, two_node_cluster


def _snapshot_json(
    objects: dict[str, list[dict[str, Any]]], policies: tuple[str, ...] = ("first-fit", "best-fit")
) -> dict[str, Any]:
    with list_api(ListApi(objects)) as url:
        read = read_cluster(LightkubeReader(lightkube_client(url), page_size=2), 20)
    return to_json(what_if(build_snapshot(read), policies))


def test_the_objects_validate_for_kubernetes() -> None:
    cluster = two_node_cluster()
    extra = [cpu_node("cpu-a"), dra_slice("gpu-c", 4), dra_claim("c1", "gpu-c", ["gpu-0"], "p7")]
    for obj in [*cluster["nodes"], *cluster["pods"], *extra]:
        kubernetes_validate.validate(obj, "1.37.0", strict=True)


def test_two_eight_gpu_nodes_as_they_are_and_re_packed() -> None:
    # Now: gpu-a holds p1 (3) + p3 (2) -> 3 free, gpu-b holds p2 (3) + p4 (1) -> 4 free: the largest
    # whole-GPU pod that fits is 4, and the pending 6-GPU pod p6 fits nowhere. The finished pod holds nothing.
    # Best-fit and first-fit, in creation order: p1, p2, p3 fill gpu-a (3+3+2), p4 goes to gpu-b (7 left),
    # p6 then fits there (1 left): largest fit 1 and every pod placed.
    answer = _snapshot_json(two_node_cluster())
    assert answer["gpus_total"] == 16
    assert answer["gpus_allocated"] == 9
    assert answer["pods"] == {"bound": 5, "pending": 1}
    assert answer["dra"] == "not served"
    now = answer["policies"]["current"]
    assert (now["largest_fit"], now["free_gpus_per_node"], now["unplaced"]) == (
        4,
        {"gpu-a": 3, "gpu-b": 4},
        ["team-a/p6"],
    )
    for policy in ("first-fit", "best-fit"):
        packed = answer["policies"][policy]
        assert (packed["largest_fit"], packed["free_gpus_per_node"], packed["unplaced"]) == (
            1,
            {"gpu-a": 0, "gpu-b": 1},
            [],
        )
        assert packed["allocated_gpus"] == 15
    assert answer["guesses"] == [] and answer["skipped"] == []


def test_pages_are_followed_and_only_lists_are_sent() -> None:
    api = ListApi(two_node_cluster())
    with list_api(api) as url:
        read = read_cluster(LightkubeReader(lightkube_client(url), page_size=2), 20)
    assert len(read.pods) == 7 and read.resource_slices is None
    assert api.pages("pods") == 4  # 7 pods, 2 a page
    assert {method for method, _, _ in api.requests} == {"GET"}
    assert all(query.get("watch") is None for _, _, query in api.requests)


def test_a_server_that_pages_forever_is_refused() -> None:
    api = ListApi(two_node_cluster(), endless={"nodes"})
    with list_api(api) as url, pytest.raises(SnapshotError, match="more than 22 pages"):
        read_cluster(LightkubeReader(lightkube_client(url), page_size=500), 30)


def test_a_slow_server_ends_at_the_total_deadline() -> None:
    api = ListApi(two_node_cluster(), delay_s=0.4)
    with list_api(api) as url, pytest.raises(SnapshotError, match=r"deadline of 0\.2 s"):
        read_cluster(LightkubeReader(lightkube_client(url)), 0.2)


def test_forbidden_names_the_cluster_role() -> None:
    api = ListApi(two_node_cluster(), status=403)
    with list_api(api) as url, pytest.raises(SnapshotError, match=r"forbidden .*ClusterRole"):
        read_cluster(LightkubeReader(lightkube_client(url)), 10)


def test_dra_gpus_and_claims_count() -> None:
    # gpu-c publishes 4 GPUs through DRA (no nvidia.com/gpu); p7's claim holds 2 of them.
    objects = {
        "nodes": [cpu_node("gpu-c")],
        "pods": [pod("p7", "gpu-c")],
        "resourceslices": [dra_slice("gpu-c", 4)],
        "resourceclaims": [dra_claim("c1", "gpu-c", ["gpu-0", "gpu-1"], "p7")],
    }
    answer = _snapshot_json(objects)
    assert answer["dra"] == "served"
    assert answer["cluster"][0]["gpus"] == 4 and answer["cluster"][0]["sharing"] == "dra"
    assert answer["policies"]["current"]["free_gpus_per_node"] == {"gpu-c": 2}
    assert answer["gpus_allocated"] == 2


def test_time_slicing_mig_and_guesses_are_reported() -> None:
    shared = gpu_node(
        "ts",
        gpus=8,
        labels={
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
            "nvidia.com/gpu.count": "2",
        },
    )
    mig = gpu_node("mig", gpus=0, labels={"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "1"})
    mig["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = "2"
    unlabelled = gpu_node("bare", gpus=2)
    del unlabelled["metadata"]["labels"]["nvidia.com/gpu.product"]
    objects = ClusterObjects(
        nodes=(shared, mig, unlabelled),
        pods=(
            pod("share", "ts", gpus=1),
            pod("slice", "mig", extra={"nvidia.com/mig-3g.40gb": "1"}),
            {"metadata": {"namespace": "x"}},
        ),
        resource_slices=None,
        resource_claims=None,
    )
    snapshot = build_snapshot(objects)
    nodes = {node.name: node for node in snapshot.nodes}
    assert (nodes["ts"].gpus, nodes["ts"].replicas, nodes["ts"].sharing) == (2, 4, "time-slicing")
    assert (nodes["mig"].gpus, nodes["mig"].mig, nodes["mig"].sharing) == (1, (("3g.40gb", 2),), "mig-mixed")
    assert nodes["bare"].gpu_model == "unknown"
    pods = {p.name: p for p in snapshot.pods}
    assert (pods["share"].num_gpu, pods["share"].gpu_milli) == (1, 250)  # one of 4 replicas
    assert (pods["slice"].num_gpu, pods["slice"].gpu_milli) == (1, 428)  # 3 of 7 compute slices
    assert any("nvidia.com/gpu.product" in line and "bare" in line for line in snapshot.guesses)
    assert any("time-sliced" in line for line in snapshot.guesses)
    assert snapshot.skipped == ("a pod without a valid metadata.name",)
    answer = to_json(what_if(snapshot, ("best-fit",)))
    assert answer["policies"]["current"]["free_gpus_per_node"] == {"bare": 2, "mig": 0, "ts": 1}


def test_the_memory_reader_pages_like_the_server() -> None:
    reader = MemoryReader({"nodes": two_node_cluster()["nodes"], "pods": two_node_cluster()["pods"]}, page_size=3)
    read = read_cluster(reader, 5)
    assert (len(read.nodes), len(read.pods), read.resource_claims) == (2, 7, None)
    assert reader.pages == {"nodes": 1, "pods": 3}


def test_the_command_prints_json_a_table_and_writes_an_openb_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()
    with list_api(ListApi(two_node_cluster())) as url:
        config = tmp_path / "kubeconfig"
        config.write_text(kubeconfig_text(url))
        as_json = runner.invoke(
            cli, ["sim", "snapshot", "--kubeconfig", str(config), "--json", "--policies", "bestfit"]
        )
        table = runner.invoke(cli, ["sim", "snapshot", "--kubeconfig", str(config), "--out", str(tmp_path / "out")])
    assert as_json.exit_code == 0, as_json.output
    answer = json.loads(as_json.stdout)
    assert answer["policies"]["best-fit"]["largest_fit"] == 1  # `bestfit` is accepted, printed as best-fit
    assert table.exit_code == 0, table.output
    assert "first-fit" in table.stdout and "fgd-cpu" in table.stdout and "gpu-a" in table.stdout
    trace = load_trace("snapshot", tmp_path / "out")
    assert trace.nodes.total_gpus == 16 and len(trace.pods) == 6
    assert (tmp_path / "out" / "snapshot-trace.csv").is_file()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["--policies", "nope"],
            "unknown policy 'nope' (known: first-fit, random, dotprod, clustering, packing, best-fit, fgd",
        ),
        (["--policies", ","], "no policy given"),
        (["--timeout", "0"], "--timeout"),
    ],
)
def test_usage_mistakes_exit_2(arguments: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["sim", "snapshot", *arguments])
    assert result.exit_code == 2
    assert message in result.output and "Usage:" in result.output


def test_no_cluster_config_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["sim", "snapshot", "--kubeconfig", str(tmp_path / "missing")])
    assert result.exit_code == 1
    assert result.output.startswith("Error: no API server configured") and "Traceback" not in result.output


def test_the_out_folder_holds_a_trace_sim_compare_runs(tmp_path: Path) -> None:
    from gpuslice.snapshot.compare_trace import compare_trace

    snapshot = build_snapshot(
        ClusterObjects(
            nodes=tuple(two_node_cluster()["nodes"]),
            pods=tuple(two_node_cluster()["pods"]),
            resource_slices=None,
            resource_claims=None,
        )
    )
    text, why_not = compare_trace(snapshot, 1800)
    assert why_not == "" and text is not None
    assert "# cluster: 2xdgx-h100;cpu=112000;memory=2097152" in text
    lines = text.splitlines()
    assert lines[5:7] == ["team-a/p1,0.0,1800,1,3,1000,8192", "team-a/p2,1.0,1800,1,3,1000,8192"]
    trace = tmp_path / "snapshot-trace.csv"
    trace.write_text(text)
    result = CliRunner().invoke(cli, ["sim", "compare", "--trace", str(trace), "--policies", "best-fit", "--json", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"][0]["jobs_completed"] == 6
    # a node no preset describes: no trace, and why
    odd = build_snapshot(
        ClusterObjects((gpu_node("l4", gpus=2, labels={"nvidia.com/gpu.product": "NVIDIA-L4"}),), (), None, None)
    )
    text, why_not = compare_trace(odd, 1800)
    assert text is None and "no preset for l4 (2x NVIDIA-L4)" in why_not
