"""gpuslice's sharing extensions (off unless the config asks): honorDevices, per-model/per-GPU replicas, replicas: 1."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.allocation import RequestTooLarge, validate_request
from gpuslice.allocation.mps_edits import daemon_settings
from gpuslice.config import ConfigError, parse_config_text, validate_startup
from gpuslice.discovery import load_node_spec, parse_node_spec
from gpuslice.gpu import Node
from gpuslice.sharing import SharingPlan, build_resources

H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
A100 = {"model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960, "compute_capability": "8.0"}
HONOUR = "gpuslice: {honorDevices: true}\n"


def node_of(*gpus: dict[str, Any]) -> Node:
    return parse_node_spec({"name": "ext", "gpus": list(gpus)}).node


H100X4 = load_node_spec("preset:h100x4").node
MIXED_MODELS = node_of({**H100, "count": 2}, {**A100, "count": 2})


def plan(node: Node, config: str) -> SharingPlan:
    return build_resources(node, parse_config_text(config).config)


def shape(node: Node, config: str) -> dict[str, list[int]]:
    """Resource -> replicas per physical device, in advertised order (1 = whole)."""
    return {
        r.name: [len(devices) if devices[0].replica is not None else 1 for devices in r.replicas_of.values()]
        for r in plan(node, config).resources
    }


def ts(*entries: str, extra: str = "") -> str:
    return f"{HONOUR}sharing: {{timeSlicing: {{{extra}resources: [{', '.join(entries)}]}}}}"


CASES = [
    pytest.param(
        H100X4, ts("{name: gpu, devices: [0, 1], replicas: 4}"), {"nvidia.com/gpu": [4, 4, 1, 1]}, id="share-some"
    ),
    pytest.param(
        H100X4,
        ts("{name: gpu, devices: [2, 3], rename: gpu-shared, replicas: 4}"),
        {"nvidia.com/gpu": [1, 1], "nvidia.com/gpu-shared": [4, 4]},
        id="rename-keeps-the-rest-whole",
    ),
    pytest.param(
        H100X4,
        ts("{name: gpu, devices: 1, replicas: 2}", extra="renameByDefault: true, "),
        {"nvidia.com/gpu": [1, 1, 1], "nvidia.com/gpu.shared": [2]},
        id="a-count-takes-the-first-devices",
    ),
    pytest.param(
        H100X4,
        ts("{name: gpu, devices: [0], replicas: 2}", "{name: gpu, devices: [1, 2], replicas: 6}"),
        {"nvidia.com/gpu": [2, 6, 6, 1]},
        id="per-gpu-replicas",
    ),
    pytest.param(
        MIXED_MODELS,
        ts("{name: gpu, model: '*H100*', replicas: 4}", "{name: gpu, model: '*A100*', replicas: 2}"),
        {"nvidia.com/gpu": [4, 4, 2, 2]},
        id="per-model-replicas",
    ),
    pytest.param(
        MIXED_MODELS,
        ts("{name: gpu, model: '*A100*', replicas: 3, rename: a100-shared}"),
        {"nvidia.com/gpu": [1, 1], "nvidia.com/a100-shared": [3, 3]},
        id="share-one-model-only",
    ),
    pytest.param(
        H100X4,
        ts(f"{{name: gpu, devices: ['{H100X4.gpus[3].uuid}'], replicas: 3}}"),
        {"nvidia.com/gpu": [1, 1, 1, 3]},
        id="by-uuid",
    ),
    pytest.param(
        node_of({**H100, "count": 2, "mig": ["1g.10gb", "1g.10gb"]}),
        "flags: {migStrategy: mixed}\n" + ts("{name: mig-1g.10gb, devices: [1], replicas: 2}"),
        {"nvidia.com/mig-1g.10gb": [1, 1, 2, 2]},
        id="a-gpu-reference-takes-its-mig-devices",
    ),
    pytest.param(
        node_of({**H100, "count": 2, "mig": ["1g.10gb", "1g.10gb"]}),
        "flags: {migStrategy: mixed}\n" + ts("{name: mig-1g.10gb, devices: ['0:1'], replicas: 2}"),
        {"nvidia.com/mig-1g.10gb": [1, 2, 1, 1]},
        id="a-mig-index",
    ),
]


@pytest.mark.parametrize(("node", "config", "expected"), CASES)
def test_honor_devices(node: Node, config: str, expected: dict[str, list[int]]) -> None:
    assert shape(node, config) == expected


def test_without_the_extension_the_same_file_behaves_like_nvidia() -> None:
    config = ts("{name: gpu, devices: [0, 1], rename: gpu-shared, replicas: 4}").replace(HONOUR, "")
    assert shape(H100X4, config) == {"nvidia.com/gpu": [4, 4, 4, 4]}


def test_whole_gpus_next_to_replicas_are_not_limited_by_fail_requests_greater_than_one() -> None:
    config = ts("{name: gpu, devices: [0, 1], replicas: 4}", extra="failRequestsGreaterThanOne: true, ")
    (resource,) = plan(H100X4, config).resources
    whole = [H100X4.gpus[2].uuid, H100X4.gpus[3].uuid]
    assert len(validate_request(resource, whole)) == 2
    with pytest.raises(RequestTooLarge):
        validate_request(resource, [f"{H100X4.gpus[0].uuid}::0", whole[0]])


SINGLE_MPS = "flags: {mpsRoot: /run/nvidia/mps}\nsharing: {mps: {resources: [{name: gpu, replicas: 1}]}}\n"


def test_single_replica_mps_needs_the_extension() -> None:
    with pytest.raises(ConfigError, match="number of replicas must be >= 2"):
        validate_startup(parse_config_text(SINGLE_MPS).config)
    config = parse_config_text(SINGLE_MPS + "gpuslice: {allowSingleReplica: true}").config
    validate_startup(config)
    (resource,) = build_resources(H100X4, config).resources
    assert [d.id for d in resource.devices] == [f"{gpu.uuid}::0" for gpu in H100X4.gpus]
    settings = daemon_settings(resource)
    assert settings.commands[-1] == "set_default_active_thread_percentage 100"
    assert settings.commands[0] == "set_default_device_pinned_mem_limit 0 81559M"


def test_mps_on_some_gpus_runs_its_daemon_on_those_only() -> None:
    config = (
        "flags: {mpsRoot: /m}\n"
        + HONOUR
        + "sharing: {mps: {resources: [{name: gpu, devices: [1, 3], replicas: 4, rename: gpu-mps}]}}"
    )
    resources = {r.name: r for r in plan(H100X4, config).resources}
    assert resources["nvidia.com/gpu"].sharing == "none"
    settings = daemon_settings(resources["nvidia.com/gpu-mps"])
    assert settings.gpu_uuids == (H100X4.gpus[1].uuid, H100X4.gpus[3].uuid)
    assert [index for index, _ in settings.pinned_limits] == [1, 3]
