"""Each NVIDIA rule of ../shared/reference/nvidia-compat.md §2.5-§5, as a table: same config -> same names and IDs.

Test ids name the reference section. Allocate answers per device list strategy are in
tests/allocation/test_strategies.py, MPS daemon rules in tests/mps/, config parsing in tests/config/.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from gpuslice.allocation import (
    AllocationError,
    NotEnoughDevices,
    allocate_container,
    preferred_allocation,
    validate_request,
)
from gpuslice.config import parse_config_text
from gpuslice.discovery import NodeSpecError, load_node_spec, parse_node_spec
from gpuslice.gpu import Node
from gpuslice.sharing import SharingError, SharingPlan, build_resources, mig_resource_name

H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
TS = "sharing: {timeSlicing: {%s resources: [{name: gpu, replicas: %d}]}}"
MPS = "flags: {mpsRoot: /run/nvidia/mps}\nsharing: {mps: {%s resources: [{name: gpu, replicas: %d}]}}"


def node_of(*gpus: dict[str, Any]) -> Node:
    return parse_node_spec({"name": "rules", "gpus": list(gpus)}).node


def preset(name: str = "h100x4") -> Node:
    return load_node_spec(f"preset:{name}").node


def plan(node: Node, config: str) -> SharingPlan:
    return build_resources(node, parse_config_text(config).config)


def advertised(node: Node, config: str) -> dict[str, int]:
    return {resource.name: len(resource.devices) for resource in plan(node, config).resources}


# §2.5 and §3: what is advertised, by config. (node, config, {resource: count})
ADVERTISED = [
    pytest.param(preset(), "", {"nvidia.com/gpu": 4}, id="§4.1 GPU pattern * -> nvidia.com/gpu"),
    pytest.param(preset(), TS % ("", 10), {"nvidia.com/gpu": 40}, id="§3 capacity = GPUs x replicas"),
    pytest.param(
        preset(),
        TS % ("renameByDefault: true,", 4),
        {"nvidia.com/gpu.shared": 16},
        id="§3 renameByDefault only .shared",
    ),
    pytest.param(
        preset(),
        "sharing: {timeSlicing: {resources: [{name: gpu, rename: custom, replicas: 2}]}}",
        {"nvidia.com/gpu": 8},
        id="§2.5 rename dropped without renameByDefault",
    ),
    pytest.param(
        preset(),
        "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, rename: custom, replicas: 2}]}}",
        {"nvidia.com/gpu.shared": 8},
        id="§2.5 rename forced to .shared with renameByDefault",
    ),
    pytest.param(
        preset(),
        "sharing: {timeSlicing: {resources: [{name: gpu, devices: [0], replicas: 2}]}}",
        {"nvidia.com/gpu": 8},
        id="§2.5 devices forced to all",
    ),
    pytest.param(
        preset(),
        "sharing: {timeSlicing: {resources: [{name: gpu, devices: 1, replicas: 3}]}}",
        {"nvidia.com/gpu": 12},
        id="§2.5 a device count forced to all",
    ),
    pytest.param(
        preset(),
        "flags: {mpsRoot: /m}\nsharing: {timeSlicing: {resources: [{name: gpu, replicas: 8}]},"
        " mps: {resources: [{name: gpu, replicas: 2}]}}",
        {"nvidia.com/gpu": 8},
        id="§2.5 mps wins over timeSlicing",
    ),
    pytest.param(preset("h100x4-mig"), "", {"nvidia.com/gpu": 4}, id="§4.2 none: MIG-enabled GPUs advertised whole"),
    pytest.param(
        preset("h100x4-mig"), "flags: {migStrategy: single}", {"nvidia.com/gpu": 28}, id="§4.2 single: MIG as gpu"
    ),
    pytest.param(
        node_of({**H100, "count": 1}, {**H100, "count": 1, "mig": ["3g.40gb", "1g.10gb+me", "1g.10gb", "1g.10gb"]}),
        "flags: {migStrategy: mixed}",
        {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-1g.10gb.me": 1, "nvidia.com/mig-3g.40gb": 1},
        id="§4.1 mixed: per profile, + -> . and anchored (1g.10gb never takes 1g.10gb+me)",
    ),
    pytest.param(
        node_of({**H100, "count": 1}, {**H100, "count": 1, "mig": []}),
        "flags: {migStrategy: mixed}",
        {"nvidia.com/gpu": 1},
        id="§4.2 mixed: MIG-enabled GPU without MIG devices only warns",
    ),
    pytest.param(
        node_of({**H100, "count": 2, "mig": ["1g.10gb", "1g.10gb"]}),
        "flags: {migStrategy: mixed}\nsharing: {timeSlicing: {resources: [{name: mig-1g.10gb, replicas: 3}]}}",
        {"nvidia.com/mig-1g.10gb": 12},
        id="§3 MIG devices replicate like GPUs",
    ),
    pytest.param(preset(), "flags: {migStrategy: single}", {"nvidia.com/gpu": 4}, id="§4.2 single without MIG"),
]


@pytest.mark.parametrize(("node", "config", "expected"), ADVERTISED)
def test_advertised_resources(node: Node, config: str, expected: dict[str, int]) -> None:
    assert advertised(node, config) == expected


# §2.4 / §4.2: refused combinations and NVIDIA's texts.
REFUSED = [
    pytest.param(
        node_of({**H100, "count": 1, "mig": ["1g.10gb"]}, {**H100, "count": 1}),
        "flags: {migStrategy: single}",
        "all devices on the node must be configured with the same migEnabled value",
        id="§4.2 single: mixed migEnabled",
    ),
    pytest.param(
        node_of({**H100, "count": 1, "mig": ["1g.10gb"]}, {**H100, "count": 1, "mig": []}),
        "flags: {migStrategy: single}",
        "device 1 has no MIG devices configured",
        id="§4.2 single: MIG GPU without devices",
    ),
    pytest.param(
        node_of({**H100, "count": 1, "mig": ["1g.10gb", "2g.20gb"]}),
        "flags: {migStrategy: single}",
        "more than one MIG device type present on node",
        id="§4.2 single: two profiles",
    ),
    pytest.param(
        node_of({**H100, "count": 1, "mig": ["1g.10gb"]}),
        "flags: {migStrategy: single, mpsRoot: /m}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}",
        "sharing using MPS is not supported for MIG devices",
        id="§2.4 MPS on MIG devices",
    ),
    pytest.param(
        preset(),
        "flags: {migStrategy: mixed, mpsRoot: /m}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}",
        "using --mig-strategy=mixed is not supported with MPS",
        id="§2.4 MPS with mixed",
    ),
]


@pytest.mark.parametrize(("node", "config", "message"), REFUSED)
def test_refused_combinations(node: Node, config: str, message: str) -> None:
    with pytest.raises(SharingError, match=message):
        plan(node, config)


def test_c_not_equal_g_profiles_match_no_mixed_pattern() -> None:
    """§4.1: only profiles whose compute slices equal their GPU slices get a mixed-strategy pattern."""
    node = node_of({**H100, "count": 1, "mig": ["3g.40gb"]})
    gpu = node.gpus[0]
    sliced = replace(gpu, mig_instances=(replace(gpu.mig_instances[0], profile="1c.3g.40gb"),))
    with pytest.raises(SharingError, match=r"MIG profile '1c\.3g\.40gb' does not match any resource patterns"):
        plan(replace(node, gpus=(sliced,)), "flags: {migStrategy: mixed}")


@pytest.mark.parametrize(
    ("profile", "name"),
    [
        ("1g.10gb", "nvidia.com/mig-1g.10gb"),
        ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),
        ("1g.24gb+me.all", "nvidia.com/mig-1g.24gb.me.all"),
        ("1g.24gb+gfx", "nvidia.com/mig-1g.24gb.gfx"),
        ("1g.24gb-me", "nvidia.com/mig-1g.24gb-me"),
        ("7g.80gb", "nvidia.com/mig-7g.80gb"),
    ],
)
def test_mixed_resource_names(profile: str, name: str) -> None:
    """§4.3: nvidia.com/mig-<profile with every '+' replaced by '.'>."""
    assert mig_resource_name(profile) == name


def test_nvidia_warnings_for_ignored_keys() -> None:
    """§2.5: the exact warnings for a dropped rename and a forced devices list."""
    config = "sharing: {mps: {resources: [{name: gpu, rename: x, devices: [0], replicas: 2}]}}\nflags: {mpsRoot: /m}"
    warnings = plan(preset(), config).warnings
    assert "Setting the 'rename' field in sharing.mps.resources is not yet supported in the config. Ignoring..." in (
        warnings
    )
    assert (
        "Customizing the 'devices' field in sharing.mps.resources is not yet supported in the config. Ignoring..."
        in warnings
    )


def test_replica_ids_and_what_a_replica_inherits() -> None:
    """§3: `<physical id>::<n>`, n from 0; a replica has its GPU's NUMA node, index and device path."""
    node = load_node_spec("preset:dgx-h100").node
    (resource,) = plan(node, TS % ("", 3)).resources
    gpu = node.gpus[5]
    replicas = resource.replicas_of[gpu.uuid]
    assert [d.id for d in replicas] == [f"{gpu.uuid}::0", f"{gpu.uuid}::1", f"{gpu.uuid}::2"]
    assert {(d.numa_node, d.index, d.gpu.device_path) for d in replicas} == {(gpu.numa_node, "5", "/dev/nvidia5")}


def test_mig_ids_and_indexes() -> None:
    """§4.4: MIG devices are advertised by MIG UUID; their index is `<gpu>:<mig>`."""
    node = preset("h100x4-mig")
    (resource,) = plan(node, "flags: {migStrategy: mixed}").resources
    mig = node.gpus[3].mig_instances[6]
    device = resource.by_id[mig.uuid]
    assert mig.uuid.startswith("MIG-") and device.index == "3:6"


# §3 request validation: (config, request builder, error text or None)
G = [gpu.uuid for gpu in preset().gpus]
REQUESTS = [
    pytest.param(TS % ("", 4), [f"{G[0]}::0", f"{G[0]}::3"], None, id="§3 time-slicing allows >1 by default"),
    pytest.param(
        TS % ("failRequestsGreaterThanOne: true,", 4),
        [f"{G[0]}::0", f"{G[1]}::0"],
        "maximum request size for shared resources is 1; found 2",
        id="§3 failRequestsGreaterThanOne on time-slicing",
    ),
    pytest.param(
        MPS % ("", 4),
        [f"{G[0]}::0", f"{G[1]}::0"],
        "maximum request size for shared resources is 1; found 2",
        id="§3 MPS enforces one replica by default",
    ),
    pytest.param(
        MPS % ("failRequestsGreaterThanOne: false,", 4),
        [f"{G[0]}::0", f"{G[1]}::0"],
        None,
        id="§3 MPS can switch it off (v0.20)",
    ),
    pytest.param(MPS % ("", 4), [f"{G[2]}::1"], None, id="§3 one replica always passes"),
    pytest.param(TS % ("", 4), [f"{G[0]}"], f"unknown device: {G[0]}", id="§3 unknown id"),
    pytest.param("", [G[0], G[1], G[2]], None, id="§3 whole GPUs are never limited"),
]


@pytest.mark.parametrize(("config", "ids", "error"), REQUESTS)
def test_request_validation(config: str, ids: list[str], error: str | None) -> None:
    (resource,) = plan(preset(), config).resources
    if error is None:
        assert len(validate_request(resource, ids)) == len(ids)
        return
    with pytest.raises(AllocationError) as raised:
        validate_request(resource, ids)
    assert str(raised.value).startswith(f'invalid allocation request for "{resource.name}": invalid request: {error}')


def test_two_replicas_of_one_gpu_are_one_visible_device() -> None:
    """§3 illustration: replicas ::0 and ::3 of GPU a yield NVIDIA_VISIBLE_DEVICES=a."""
    (resource,) = plan(preset(), TS % ("", 4)).resources
    got = allocate_container(resource, [f"{G[0]}::0", f"{G[0]}::3"])
    assert got.envs["NVIDIA_VISIBLE_DEVICES"] == G[0]


# §5 Rule B, with the reference's illustration and the deterministic tie-break. (available, must, size, policy)
A, B = G[0], G[1]
PREFERRED = [
    pytest.param([f"{A}::3", *(f"{B}::{n}" for n in range(4))], [], 1, "distributed", [f"{B}::0"], id="§5 distributed"),
    pytest.param([f"{A}::3", *(f"{B}::{n}" for n in range(4))], [], 1, "packed", [f"{A}::3"], id="§5 packed"),
    pytest.param(
        [f"{g}::{n}" for g in (A, B) for n in range(4)],
        [f"{B}::2"],
        2,
        "distributed",
        [f"{B}::2", f"{A}::0"],
        id="§5 must_include first, counted as allocated",
    ),
    pytest.param(
        [f"{g}::{n}" for g in (A, B) for n in range(4)],
        [],
        3,
        "distributed",
        [f"{A}::0", f"{B}::0", f"{A}::1"],
        id="§5 pick-count tie-break spreads within one call",
    ),
    pytest.param(["nope", f"{A}::1"], [], 1, "packed", [f"{A}::1"], id="§5 unknown ids dropped"),
]


@pytest.mark.parametrize(("available", "must", "size", "policy", "expected"), PREFERRED)
def test_preferred_allocation_rule_b(
    available: list[str], must: list[str], size: int, policy: str, expected: list[str]
) -> None:
    config = f"flags: {{plugin: {{sharedDevicesAllocationPolicy: {policy}}}}}\n" + TS % ("", 4)
    (resource,) = plan(preset(), config).resources
    assert list(preferred_allocation(resource, available, must, size)) == expected


def test_preferred_allocation_errors_and_rule_a_answers() -> None:
    """§5: Rule B refuses too few candidates; Rule A answers invalid arguments with an empty list."""
    (shared,) = plan(preset(), TS % ("", 2)).resources
    with pytest.raises(NotEnoughDevices, match="not enough available devices to satisfy allocation"):
        preferred_allocation(shared, [f"{A}::0"], [], 2)
    (whole,) = plan(preset(), "").resources
    assert preferred_allocation(whole, [A], [], 2) == ()
    assert preferred_allocation(whole, [A, B], [A, B], 1) == ()
    assert preferred_allocation(whole, [A], [B], 1) == ()


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        pytest.param(["1g.10gb"] * 8, "at most 7 x 1g.10gb fit on H100-80GB", id="mig-profiles §3 instance cap"),
        pytest.param(
            ["3g.40gb", "3g.40gb", "1g.10gb"], "does not fit on one H100-80GB", id="mig-profiles §1 placement"
        ),
        pytest.param(["1g.10gb+me", "1g.10gb+me"], "at most 1 x 1g.10gb+me", id="mig-profiles §1 one +me per GPU"),
        pytest.param(["2g.99gb"], "MIG profile '2g.99gb' does not exist on H100-80GB", id="mig-profiles §2 catalogue"),
    ],
)
def test_impossible_mig_layouts_are_refused(layout: list[str], message: str) -> None:
    """Issue 3 item 5: a node's MIG layout is checked against the model's catalogue and placement rules."""
    with pytest.raises(NodeSpecError, match=re.escape(message)):
        node_of({**H100, "count": 1, "mig": layout})
