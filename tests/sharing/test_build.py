"""From a node and a config to advertised resources: NVIDIA's names, counts, MIG strategies and errors."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec, parse_node_spec
from gpuslice.gpu import Node
from gpuslice.sharing import Isolation, SharingError, build_resources, mig_resource_name, physical_id

H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
TS4 = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}"


def node_of(*gpus: dict[str, Any]) -> Node:
    return parse_node_spec({"name": "test", "gpus": list(gpus)}).node


def preset(name: str) -> Node:
    return load_node_spec(f"preset:{name}").node


MIXED_NODE = {"count": 1, "mig": ["3g.40gb", "2g.20gb", "1g.10gb+me", "1g.10gb"]}

# (node, config) -> [(resource name, device count, mode, isolation)]
CASES = [
    ("h100x4", "", [("nvidia.com/gpu", 4, "whole", Isolation.EXCLUSIVE)]),
    ("h100x4", TS4, [("nvidia.com/gpu", 16, "time-slicing", Isolation.NONE)]),
    (
        "h100x4",
        "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 3}]}}",
        [("nvidia.com/gpu.shared", 12, "time-slicing", Isolation.NONE)],
    ),
    (
        "h100x4",
        "sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}",
        [("nvidia.com/gpu", 8, "mps", Isolation.MPS)],
    ),
    ("h100x4-mig", "", [("nvidia.com/gpu", 4, "whole", Isolation.EXCLUSIVE)]),  # none: MIG devices ignored
    ("h100x4-mig", "flags: {migStrategy: single}", [("nvidia.com/gpu", 28, "mig", Isolation.MIG)]),
    ("h100x4-mig", "flags: {migStrategy: mixed}", [("nvidia.com/mig-1g.10gb", 28, "mig", Isolation.MIG)]),
    (
        "h100x4-mig",
        "flags: {migStrategy: mixed}\nsharing: {timeSlicing: {resources: [{name: mig-1g.10gb, replicas: 2}]}}",
        [("nvidia.com/mig-1g.10gb", 56, "mig+time-slicing", Isolation.NONE)],
    ),
    ("h100x4", "flags: {migStrategy: single}", [("nvidia.com/gpu", 4, "whole", Isolation.EXCLUSIVE)]),
    ("h100x4", "flags: {migStrategy: mixed}", [("nvidia.com/gpu", 4, "whole", Isolation.EXCLUSIVE)]),
]


@pytest.mark.parametrize(("preset_name", "config", "expected"), CASES)
def test_advertised_resources(preset_name: str, config: str, expected: list[tuple[str, int, str, Isolation]]) -> None:
    plan = build_resources(preset(preset_name), parse_config_text(config).config)
    got = [(r.name, len(r.devices), r.mode, r.isolation) for r in plan.resources]
    assert got == expected


def test_mixed_strategy_on_a_mixed_node_names_each_profile() -> None:
    node = node_of({**H100, **MIXED_NODE}, {**H100, "count": 1})
    plan = build_resources(node, parse_config_text("flags: {migStrategy: mixed}").config)
    assert [(r.name, len(r.devices)) for r in plan.resources] == [
        ("nvidia.com/gpu", 1),
        ("nvidia.com/mig-1g.10gb", 1),
        ("nvidia.com/mig-1g.10gb.me", 1),
        ("nvidia.com/mig-2g.20gb", 1),
        ("nvidia.com/mig-3g.40gb", 1),
    ]
    assert plan.resource("nvidia.com/gpu").devices[0].gpu.index == 1
    assert plan.resource("nvidia.com/mig-1g.10gb.me").mig_profile == "1g.10gb+me"


def test_mixed_strategy_warns_about_a_mig_gpu_without_instances() -> None:
    node = node_of({**H100, "mig": []}, {**H100})
    plan = build_resources(node, parse_config_text("flags: {migStrategy: mixed}").config)
    assert plan.names == ("nvidia.com/gpu",)
    assert any("GPU 0" in w and "no MIG devices" in w for w in plan.warnings)


@pytest.mark.parametrize(
    ("gpus", "config", "message"),
    [
        ([{**H100, "mig": ["1g.10gb"]}, H100], "flags: {migStrategy: single}", "same migEnabled value"),
        ([{**H100, "mig": ["1g.10gb"]}, {**H100, "mig": []}], "flags: {migStrategy: single}", "device 1 has no MIG"),
        ([{**H100, **MIXED_NODE}], "flags: {migStrategy: single}", "more than one MIG device type"),
        (
            [{**H100, "mig": ["1g.10gb"]}],
            "flags: {migStrategy: single}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}",
            "sharing.mps.resources[0].name: sharing using MPS is not supported for MIG devices",
        ),
        (
            [H100],
            "flags: {migStrategy: mixed}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}",
            "mixed is not supported with MPS",
        ),
        (
            [H100],
            "gpuslice: {honorDevices: true}\n"
            "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: ['1:0']}]}}",
            "sharing.timeSlicing.resources[0].devices[0]: no device '1:0'",
        ),
        (
            [{**H100, "mig": ["1g.10gb"]}, H100],
            "flags: {migStrategy: mixed}\ngpuslice: {honorDevices: true}\n"
            "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: [0]}]}}",
            "sharing.timeSlicing.resources[0].devices[0]: 0 is not a device of nvidia.com/gpu",
        ),
        (
            [{**H100, "mig": ["1g.10gb"]}, H100],
            "flags: {migStrategy: mixed}\ngpuslice: {honorDevices: true}\nsharing: {timeSlicing: {resources: "
            "[{name: gpu, replicas: 2, rename: x}, {name: mig-1g.10gb, replicas: 2, rename: x}]}}",
            "would both be advertised as nvidia.com/x",
        ),
    ],
)
def test_impossible_combinations_are_refused(gpus: list[dict[str, Any]], config: str, message: str) -> None:
    with pytest.raises(SharingError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build_resources(node_of(*gpus), parse_config_text(config).config)


@pytest.mark.parametrize(
    ("entry", "warning"),
    [
        ("{name: gpu, rename: my-gpu, replicas: 2}", "Setting the 'rename' field in sharing.timeSlicing.resources"),
        ("{name: gpu, devices: [0], replicas: 2}", "Customizing the 'devices' field in sharing.timeSlicing"),
        ("{name: mig-1g.10gb, replicas: 2}", "no device is advertised as nvidia.com/mig-1g.10gb"),
        ("{name: gpu, replicas: 2}, {name: gpu, replicas: 3}", "listed more than once; advertising the union"),
    ],
)
def test_ignored_keys_warn_and_name_the_key(entry: str, warning: str) -> None:
    config = parse_config_text(f"sharing: {{timeSlicing: {{resources: [{entry}]}}}}").config
    plan = build_resources(preset("h100x4"), config)
    assert any(warning in w for w in plan.warnings), plan.warnings


def test_replica_ids_map_back_to_their_gpu_in_advertised_order() -> None:
    node = preset("h100x4")
    resource = build_resources(node, parse_config_text(TS4).config).resources[0]
    assert [d.id for d in resource.devices[:5]] == [
        *(f"{node.gpus[0].uuid}::{n}" for n in range(4)),
        f"{node.gpus[1].uuid}::0",
    ]
    for device in resource.devices:
        assert physical_id(device.id) == device.physical_id == device.gpu.uuid
        assert device.numa_node == device.gpu.numa_node
    assert resource.replicas == 4 and resource.physical_ids == tuple(g.uuid for g in node.gpus)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (TS4, False),
        ("sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}", True),
        ("sharing: {timeSlicing: {failRequestsGreaterThanOne: true, resources: [{name: gpu, replicas: 2}]}}", True),
        ("sharing: {mps: {failRequestsGreaterThanOne: false, resources: [{name: gpu, replicas: 2}]}}", False),
    ],
)
def test_fail_requests_greater_than_one_defaults_per_strategy(config: str, expected: bool) -> None:
    resource = build_resources(preset("h100x4"), parse_config_text(config).config).resources[0]
    assert resource.fail_requests_greater_than_one is expected


@pytest.mark.parametrize(
    ("preset_name", "config", "derivation"),
    [
        ("h100x4", "", "4 GPUs, one device each = 4"),
        ("h100x4", TS4, "4 GPUs x 4 replicas = 16"),
        ("h100x4-mig", "flags: {migStrategy: mixed}", "4 GPUs x 7 x 1g.10gb = 28"),
    ],
)
def test_derivation_explains_the_count(preset_name: str, config: str, derivation: str) -> None:
    resource = build_resources(preset(preset_name), parse_config_text(config).config).resources[0]
    assert resource.derivation == derivation


def test_mig_resource_name_rewrites_plus() -> None:
    assert mig_resource_name("1g.24gb+me.all") == "nvidia.com/mig-1g.24gb.me.all"
    assert mig_resource_name("1g.24gb-me") == "nvidia.com/mig-1g.24gb-me"


def test_allocation_policy_comes_from_the_config() -> None:
    config = parse_config_text(TS4 + "\nflags: {plugin: {sharedDevicesAllocationPolicy: packed}}").config
    assert build_resources(preset("h100x4"), config).resources[0].allocation_policy == "packed"


@pytest.mark.parametrize("isolation", list(Isolation))
def test_every_isolation_has_a_strength_and_a_reason(isolation: Isolation) -> None:
    assert isolation.strength in ("strong", "partial", "none")
    assert isolation.why and "\n" not in isolation.why


A100 = {"model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960, "compute_capability": "8.0"}
HONOUR = "gpuslice: {honorDevices: true}\n"


def test_extension_shares_some_gpus_and_keeps_the_others_whole() -> None:
    config = (
        HONOUR + "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4, devices: [0, 1], rename: gpu.shared}]}}"
    )
    plan = build_resources(preset("h100x4"), parse_config_text(config).config)
    assert [(r.name, len(r.devices), r.isolation) for r in plan.resources] == [
        ("nvidia.com/gpu", 2, Isolation.EXCLUSIVE),
        ("nvidia.com/gpu.shared", 8, Isolation.NONE),
    ]
    assert {d.gpu.index for d in plan.resource("nvidia.com/gpu.shared").devices} == {0, 1}
    assert plan.resource("nvidia.com/gpu.shared").derivation == "2 GPUs x 4 replicas = 8"


def test_extension_replica_counts_per_model_in_one_resource() -> None:
    node = node_of({**H100, "count": 2}, {**A100, "count": 2})
    config = HONOUR + (
        "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4, model: '*H100*'}, {name: gpu, replicas: 2}]}}"
    )
    resource = build_resources(node, parse_config_text(config).config).resources[0]
    per_gpu = {gpu.index: len(resource.replicas_of[gpu.uuid]) for gpu in node.gpus}
    assert per_gpu == {0: 4, 1: 4, 2: 2, 3: 2}
    assert resource.derivation == "2 GPUs x 4 replicas + 2 GPUs x 2 replicas = 12"
    assert resource.replicas == 4


def test_extension_count_and_partial_sharing_under_one_name() -> None:
    config = HONOUR + "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: 1}]}}"
    resource = build_resources(preset("h100x4"), parse_config_text(config).config).resources[0]
    assert [d.id.count("::") for d in resource.devices] == [1, 1, 0, 0, 0]
    assert resource.derivation == "1 GPU x 2 replicas + 3 GPUs, one device each = 5"
    assert resource.isolation is Isolation.NONE, "the resource as a whole: its weakest device"
