"""ResourceSlices from the node model: valid for the API server, NVIDIA's names, counters that forbid overlaps."""

from __future__ import annotations

import copy
import re
from itertools import combinations
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from gpuslice.cli.dra_cmd import dra
from gpuslice.dra import PoolSpec, build_slices
from gpuslice.dra.slices import devices_of
from tests.dra.specs import DYNAMIC_CONFIG, MIXED_CONFIG, TIME_SLICING_CONFIG, one_h100_dynamic, write

KUBERNETES_VERSIONS = ("1.34.0", "1.37.0")  # DRA is GA from 1.34; the newest kubernetes-validate knows
SINGLE_CONFIG = "version: v1\nflags:\n  migStrategy: single\n"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def print_slices(args: list[str]) -> list[dict[str, Any]]:
    result = CliRunner().invoke(dra, ["--backend", "fake", "--print-resource-slices", *args])
    assert result.exit_code == 0, result.output
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


CASES = {
    "h100x4": ["--node-spec", "preset:h100x4"],
    "h100x4-mig-none": ["--node-spec", "preset:h100x4-mig"],
    "h100x4-mig-single": ["--node-spec", "preset:h100x4-mig", "--config", "single"],
    "h100x4-mig-mixed": ["--node-spec", "preset:h100x4-mig", "--config", "mixed"],
    "dgx-h100-time-slicing": ["--node-spec", "preset:dgx-h100", "--config", "time-slicing"],
    "a100x8": ["--node-spec", "preset:a100x8"],
    "dynamic": ["--node-spec", "dynamic", "--config", "dynamic"],
    "dynamic-v1beta1": ["--node-spec", "dynamic", "--config", "dynamic", "--resource-api-version", "v1beta1"],
    "dynamic-v1beta2": ["--node-spec", "dynamic", "--config", "dynamic", "--resource-api-version", "v1beta2"],
    "nvidia-driver-name": ["--node-spec", "preset:h100x4", "--driver-name", "gpu.nvidia.com"],
    "dynamic-split": ["--node-spec", "dynamic", "--config", "dynamic", "--counter-layout", "split"],
}
CONFIGS = {
    "single": SINGLE_CONFIG,
    "mixed": MIXED_CONFIG,
    "time-slicing": TIME_SLICING_CONFIG,
    "dynamic": DYNAMIC_CONFIG,
}


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    directory = tmp_path_factory.mktemp("dra-specs")
    out = {}
    for case, args in CASES.items():
        resolved = []
        for position, arg in enumerate(args):
            before = args[position - 1] if position else ""
            if before == "--config":
                resolved[-1] = "--config-file"
                arg = write(directory, f"config-{arg}.yaml", CONFIGS[arg])
            elif before == "--node-spec" and arg == "dynamic":
                arg = write(directory, "node-dynamic.yaml", one_h100_dynamic())
            resolved.append(arg)
        out[case] = print_slices(resolved)
    return out


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_printed_slices_validate_strictly(printed: dict[str, list[dict[str, Any]]], case: str, version: str) -> None:
    assert printed[case], "no slice printed"
    for obj in printed[case]:
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_validator_knows_resource_slices(printed: dict[str, list[dict[str, Any]]]) -> None:
    broken = copy.deepcopy(printed["h100x4"][0])
    broken["spec"]["devices"][0]["attributes"]["type"] = {"text": "gpu"}  # not a DeviceAttribute field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[0], strict=True)


@pytest.mark.parametrize("case", CASES)
def test_one_pool_per_node_with_consistent_counts(printed: dict[str, list[dict[str, Any]]], case: str) -> None:
    slices = printed[case]
    pools = {
        (s["spec"]["pool"]["name"], s["spec"]["pool"]["generation"], s["spec"]["pool"]["resourceSliceCount"])
        for s in slices
    }
    assert len(pools) == 1
    (name, _, count), *_ = pools
    assert count == len(slices)
    assert all(s["spec"]["nodeName"] == name for s in slices)
    names = [device["name"] for s in slices for device in devices_of(s)]
    assert len(names) == len(set(names)), "device names must be unique in the pool"
    for s in slices:
        for device in devices_of(s):
            assert DNS_LABEL.fullmatch(device["name"]), device["name"]
            assert len(device["attributes"]) + len(device["capacity"]) <= 32


def _devices(slices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {device["name"]: device for s in slices for device in devices_of(s)}


def test_whole_gpus_carry_nvidias_attributes_and_strong_isolation(printed: dict[str, list[dict[str, Any]]]) -> None:
    gpu = _devices(printed["h100x4"])["gpu-0"]
    assert gpu["attributes"]["type"] == {"string": "gpu"}
    assert gpu["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert gpu["attributes"]["architecture"] == {"string": "Hopper"}
    assert gpu["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert gpu["attributes"]["isolation"] == {"string": "strong"}
    assert gpu["attributes"]["uuid"]["string"].startswith("GPU-")
    assert gpu["capacity"]["memory"] == {"value": "81559Mi"}
    assert set(gpu["attributes"]) >= {"brand", "driverVersion", "cudaDriverVersion", "index", "minor"}


def test_mig_strategy_decides_what_a_mig_gpu_offers(printed: dict[str, list[dict[str, Any]]]) -> None:
    assert set(_devices(printed["h100x4-mig-none"])) == {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}
    mixed = _devices(printed["h100x4-mig-mixed"])
    assert len(mixed) == 28 and "gpu-0" not in mixed
    mig = mixed["gpu-0-mig-1g10gb-19-0"]
    assert mig["attributes"]["type"] == {"string": "mig"}
    assert mig["attributes"]["profile"] == {"string": "1g.10gb"}
    assert mig["attributes"]["uuid"]["string"].startswith("MIG-")
    assert mig["capacity"]["memorySlice0"] == {"value": "1"}
    assert "consumesCounters" not in mig, "static MIG devices exist already: no counters"
    assert set(_devices(printed["h100x4-mig-single"])) == set(mixed)


def test_time_slicing_replicas_are_devices_without_isolation(printed: dict[str, list[dict[str, Any]]]) -> None:
    devices = _devices(printed["dgx-h100-time-slicing"])
    assert "gpu-0" not in devices
    replicas = [devices["gpu-0-ts-0"], devices["gpu-0-ts-1"]]
    assert [r["attributes"]["isolation"] for r in replicas] == [{"string": "none"}] * 2
    assert [r["attributes"]["sharing"] for r in replicas] == [{"string": "time-slicing"}] * 2


def test_v1beta1_wraps_devices_in_basic(printed: dict[str, list[dict[str, Any]]]) -> None:
    device = printed["dynamic-v1beta1"][0]["spec"]["devices"][0]
    assert set(device) == {"name", "basic"}
    assert "consumesCounters" in device["basic"]


def _consumption(device: dict[str, Any]) -> dict[str, int]:
    (entry,) = device["consumesCounters"]
    return {name: _number(counter["value"]) for name, counter in entry["counters"].items()}


def _number(text: str) -> int:
    return int(text[:-2]) * 2**20 if text.endswith("Mi") else int(text)


def test_dynamic_mig_placements_share_one_counter_set_per_gpu(printed: dict[str, list[dict[str, Any]]]) -> None:
    (slice_object,) = printed["dynamic"]
    (counter_set,) = slice_object["spec"]["sharedCounters"]
    assert counter_set["name"] == "gpu-0-counter-set"
    totals = {name: _number(counter["value"]) for name, counter in counter_set["counters"].items()}
    assert {f"memory-slice-{i}" for i in range(8)} <= set(totals)
    placements = _devices(printed["dynamic"])
    assert len(placements) == 25  # 7 + 7 + 4 + 3 + 2 + 1 + 1 placements of the seven H100 profiles

    def fits(*names: str) -> bool:
        used: dict[str, int] = {}
        for name in names:
            for counter, amount in _consumption(placements[name]).items():
                used[counter] = used.get(counter, 0) + amount
        return all(amount <= totals[counter] for counter, amount in used.items())

    assert fits("gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4")
    assert not fits("gpu-0-mig-4g40gb-5-0", "gpu-0-mig-3g40gb-9-0"), "both use memory slices 0-3"
    assert not fits("gpu-0-mig-7g80gb-0-0", "gpu-0-mig-1g10gb-19-6")
    assert not fits("gpu-0-mig-1g10gbme-20-0", "gpu-0-mig-1g10gbme-20-1"), "one +me instance per GPU"
    # Every pair of placements that do not overlap in memory slices fits together (the counters are not stricter).
    for one, other in combinations(placements.values(), 2):
        slices_one = {c for c in _consumption(one) if c.startswith("memory-slice-")}
        slices_other = {c for c in _consumption(other) if c.startswith("memory-slice-")}
        both_me = one["name"].split("-")[3].endswith("me") and other["name"].split("-")[3].endswith("me")
        if not slices_one & slices_other and not both_me:
            assert fits(one["name"], other["name"]), (one["name"], other["name"])


def test_an_empty_node_still_publishes_its_pool() -> None:
    (only,) = build_slices(PoolSpec("gpu.gpuslice.io", "node-a"), [], 3)
    assert only["spec"]["devices"] == [] and only["spec"]["pool"]["generation"] == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--driver-name", "Not_A_Domain"], "must be a lower-case DNS subdomain"),
        (["--node-spec", "preset:nope"], "unknown preset"),
    ],
)
def test_bad_flags_exit_2_naming_the_problem(args: list[str], message: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(dra, ["--backend", "fake", "--print-resource-slices", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_split_layout_keeps_counter_sets_apart_from_devices(printed: dict[str, list[dict[str, Any]]]) -> None:
    slices = printed["dynamic-split"]
    assert all(not (s["spec"].get("sharedCounters") and s["spec"].get("devices")) for s in slices)
    (counters,) = [s for s in slices if s["spec"].get("sharedCounters")]
    assert [c["name"] for c in counters["spec"]["sharedCounters"]] == ["gpu-0-counter-set"]
    assert _devices(slices).keys() == _devices(printed["dynamic"]).keys()


def test_nvidias_driver_name_is_accepted_with_nvidias_cdi_kind(printed: dict[str, list[dict[str, Any]]]) -> None:
    from gpuslice.dra.cdi import cdi_id

    assert {s["spec"]["driver"] for s in printed["nvidia-driver-name"]} == {"gpu.nvidia.com"}
    assert cdi_id("gpu.nvidia.com", "7e0c", "gpu-0") == "k8s.gpu.nvidia.com/claim=7e0c-gpu-0"
