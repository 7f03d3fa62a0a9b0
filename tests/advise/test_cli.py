"""`gpuslice advise`: the text, the JSON, the files it writes, and the errors it gives."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.config import load_config
from gpuslice.discovery import load_node_spec

MIG_ARGS = ["advise", "--latency", "sensitive", "--tenancy", "multi-tenant", "--memory-gib", "35", "--per-gpu", "2"]


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args)
    return result.exit_code, result.output


def test_text_names_the_mechanism_the_isolation_and_prints_the_files() -> None:
    code, out = _run(MIG_ARGS)
    assert code == 0, out
    assert "Recommendation: MIG, 2 x 3g.40gb per GPU" in out
    assert "pods request: nvidia.com/mig-3g.40gb: 1" in out
    assert "Isolation: strong (node label gpuslice.io/mig-3g.40gb.isolation=mig)" in out
    assert "not given:" in out and "never an exact half" in out
    assert "nvidia-smi mig -i 0 -cgi 3g.40gb:0,3g.40gb:4 -C" in out
    config_text = out.split("--- config.yaml ---\n")[1].split("\n\n--- node spec")[0]
    assert yaml.safe_load(config_text) == {"version": "v1", "flags": {"migStrategy": "mixed"}}


def test_json_carries_the_same_advice() -> None:
    code, out = _run([*MIG_ARGS, "--json"])
    assert code == 0, out
    data = json.loads(out)
    assert (data["mechanism"], data["rule"], data["workloads_per_gpu"]) == ("mig", "multi-tenant-mig", 2)
    assert data["mig"]["layout"] == ["3g.40gb", "3g.40gb"] and data["mig"]["starts"] == [0, 4]
    assert data["isolation"]["verdict"] == "strong" and data["mps"] is None


def test_written_files_load_with_the_plugins_own_loaders(tmp_path: Path) -> None:
    config, spec = tmp_path / "config.yaml", tmp_path / "node.yaml"
    code, out = _run([*MIG_ARGS, "--config-out", str(config), "--node-spec-out", str(spec)])
    assert code == 0, out
    assert load_config(config).config.flags.mig_strategy == "mixed"
    gpus = load_node_spec(str(spec)).node.gpus
    assert [m.profile for m in gpus[0].mig_instances] == ["3g.40gb", "3g.40gb"]


def test_mps_advice_prints_the_limits() -> None:
    args = ["advise", "--latency", "sensitive", "--tenancy", "trusted", "--memory-gib", "6", "--per-gpu", "3"]
    code, out = _run([*args, "--gpu-model", "NVIDIA L4", "--gpu-memory-mib", "23034"])
    assert code == 0, out
    assert "MPS, 3 clients per GPU, each capped at 7678 MiB and 33% of the SMs" in out
    assert "23034 MiB (given)" in out and "mpsRoot: /run/nvidia/mps" in out


def test_errors_are_usage_errors_that_say_why(tmp_path: Path) -> None:
    base = ["advise", "--latency", "batch", "--tenancy", "trusted", "--per-gpu", "2"]
    code, out = _run([*base, "--memory-gib", "0"])
    assert code == 2 and "positive number of GiB" in out
    code, out = _run([*base, "--memory-gib", "4", "--gpu-model", "Mystery Accelerator"])
    assert code == 2 and "give --gpu-memory-mib" in out
    code, out = _run([*base, "--memory-gib", "4", "--node-spec-out", str(tmp_path / "x.yaml")])
    assert code == 2 and "time-slicing, which has no MIG layout" in out
    code, out = _run([*base, "--memory-gib", "4", "--compute-capability", "nine"])
    assert code == 2 and "compute capability" in out


BIG = ["advise", "--latency", "batch", "--tenancy", "trusted", "--per-gpu", "1", "--json", "--memory-gib"]


def test_a_workload_bigger_than_a_node_is_split_into_pods_and_said() -> None:
    # 800 GiB on 79.6 GiB H100s: 11 GPUs, more than an 8-GPU node holds: 2 pods of 6 GPUs, with a warning
    code, out = _run([*BIG, "800"])
    assert code == 0, out
    advice = json.loads(out)
    assert (advice["gpus_per_workload"], advice["pods_per_workload"], advice["gpus_per_pod"]) == (11, 2, 6)
    assert any("more than one node has (8" in warning for warning in advice["warnings"])
    # 500 GiB: 7 GPUs, one node holds them: one pod, no warning
    advice = json.loads(_run([*BIG, "500"])[1])
    assert (advice["gpus_per_workload"], advice["pods_per_workload"], advice["warnings"]) == (7, 1, [])
    # the same 500 GiB on 4-GPU nodes: 2 pods of 4
    advice = json.loads(_run([*BIG, "500", "--gpus-per-node", "4"])[1])
    assert (advice["pods_per_workload"], advice["gpus_per_pod"]) == (2, 4)
    code, out = _run([*BIG, "500", "--gpus-per-node", "0"])
    assert code == 2 and "--gpus-per-node" in out
