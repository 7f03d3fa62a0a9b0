"""Allocate parity with NVIDIA's plugin: repeated IDs count once, an empty ID list is answered."""

from __future__ import annotations

import pytest

from gpuslice.allocation import AllocateOptions, allocate_container, nvidia_answer
from gpuslice.config import Config, parse_config_text
from tests.support.resources import TIME_SLICED, resource_for

NODE, WHOLE = resource_for("h100x4")
_, SHARED = resource_for("h100x4", TIME_SLICED)
G0, G1 = NODE.gpus[0].uuid, NODE.gpus[1].uuid
NVIDIA = "flags: {plugin: {passDeviceSpecs: false}}"
CDI_IMEX_MOFED = "flags: {mofedEnabled: true, plugin: {passDeviceSpecs: false, deviceListStrategy: [envvar, cdi-cri]}}"


def nvidia_options(config: Config, imex_channels: tuple[int, ...] = ()) -> AllocateOptions:
    """NVIDIA's whole answer, as `gpuslice plugin` builds it (channels that passed the start-up check)."""
    return AllocateOptions.from_config(config, imex_channels=imex_channels, pipeline=(nvidia_answer,))


# (id, config, shared resource?, requested IDs, expected device IDs, expected envs, expected CDI names)
CASES = [
    ("repeated-gpu", NVIDIA, False, [G0, G1, G0], [G0, G1], {"NVIDIA_VISIBLE_DEVICES": f"{G0},{G1}"}, []),
    ("repeated-replica", NVIDIA, True, [f"{G0}::1", f"{G0}::1"], [f"{G0}::1"], {"NVIDIA_VISIBLE_DEVICES": G0}, []),
    ("empty-list", NVIDIA, False, [], [], {"NVIDIA_VISIBLE_DEVICES": ""}, []),
    (
        "empty-list-with-imex-and-mofed",
        CDI_IMEX_MOFED,
        False,
        [],
        [],
        {"NVIDIA_MOFED": "enabled", "NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_IMEX_CHANNELS": "0"},
        ["k8s.device-plugin.nvidia.com/imex-channel=0", "k8s.device-plugin.nvidia.com/mofed=all"],
    ),
]


@pytest.mark.parametrize(
    ("config", "shared", "ids", "device_ids", "envs", "cdi"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_allocate_answers_as_nvidia_does(
    config: str, shared: bool, ids: list[str], device_ids: list[str], envs: dict[str, str], cdi: list[str]
) -> None:
    parsed = parse_config_text(config).config
    options = nvidia_options(parsed, imex_channels=(0,) if "mofed" in config else ())
    answer = allocate_container(SHARED if shared else WHOLE, ids, options=options)
    assert list(answer.device_ids) == device_ids
    assert answer.edits.envs == envs
    assert list(answer.edits.cdi_devices) == cdi


def test_the_request_size_rule_counts_a_repeated_replica_once() -> None:
    config = "sharing: {timeSlicing: {failRequestsGreaterThanOne: true, resources: [{name: gpu, replicas: 4}]}}"
    _, strict = resource_for("h100x4", config)
    answer = allocate_container(strict, [f"{G0}::2", f"{G0}::2"])
    assert answer.physical_ids == (G0,)


# Differences we keep (docs/configuration.md, "Differences from NVIDIA's plugin"): (id, config, IDs, check).
MPS_ELSEWHERE = "flags: {mpsRoot: /run/nvidia/mps}\nsharing: {mps: {resources: [{name: mig-1g.10gb, replicas: 2}]}}"
KEPT = [
    ("mps-for-a-resource-the-node-lacks", MPS_ELSEWHERE, [G0], "no MPS edits on nvidia.com/gpu"),
    ("replicas-of-one-gpu-list-its-node-once", TIME_SLICED, [f"{G0}::0", f"{G0}::1"], "one /dev/nvidia0"),
]


@pytest.mark.parametrize(("config", "ids", "rule"), [k[1:] for k in KEPT], ids=[k[0] for k in KEPT])
def test_differences_we_keep(config: str, ids: list[str], rule: str) -> None:
    parsed = parse_config_text(config).config
    resource = resource_for("h100x4", config)[1]
    answer = allocate_container(resource, ids, options=nvidia_options(parsed))
    if rule.startswith("no MPS"):
        assert resource.name == "nvidia.com/gpu" and resource.sharing != "mps"
        assert "CUDA_MPS_PIPE_DIRECTORY" not in answer.edits.envs and not answer.edits.mounts
    else:
        assert [node.container_path for node in answer.edits.device_nodes].count("/dev/nvidia0") == 1
