"""GetPreferredAllocation: Rule A (whole GPUs, topology) and Rule B (replicas and MIG, greedy)."""

from __future__ import annotations

import pytest

from gpuslice.allocation import NotEnoughDevices, preferred_allocation, uses_whole_gpu_rule, whole_gpu_rule_for
from gpuslice.discovery import load_node_spec
from gpuslice.topology import topology_from_spec
from tests.support.resources import MIXED_MIG, TIME_SLICED, resource_for

ALL = [f"g{gpu}::{n}" for gpu in range(4) for n in range(4)]

# (available, must_include, size, policy, expected); gN::k is replica k of GPU N.
RULE_B = [
    # NVIDIA's illustration: A has only ::3 free (3 in use), B is all free.
    (["g0::3", "g1::0", "g1::1", "g1::2", "g1::3"], [], 1, "distributed", ["g1::0"]),
    (["g0::3", "g1::0", "g1::1", "g1::2", "g1::3"], [], 1, "packed", ["g0::3"]),
    (ALL, [], 4, "distributed", ["g0::0", "g1::0", "g2::0", "g3::0"]),
    (ALL, [], 6, "distributed", ["g0::0", "g1::0", "g2::0", "g3::0", "g0::1", "g1::1"]),
    (ALL, [], 3, "packed", ["g0::0", "g0::1", "g0::2"]),
    # equal allocated counts: the GPU picked fewer times in this call wins (v0.20.0, #1788)
    (["g0::1", "g0::2", "g0::3", "g1::2", "g1::3"], [], 2, "distributed", ["g0::1", "g1::2"]),
    # must-include replicas count as allocated on their GPU and come first
    (ALL, ["g2::0"], 2, "distributed", ["g2::0", "g0::0"]),
    (ALL, ["g2::0"], 2, "packed", ["g2::0", "g2::1"]),
    (ALL, ["g2::0", "g3::1"], 2, "distributed", ["g2::0", "g3::1"]),
    # IDs the resource does not know are dropped before anything else
    (["bogus", "g3::2", "g3::2"], [], 1, "distributed", ["g3::2"]),
]


def _real(node_uuids: list[str], ids: list[str]) -> list[str]:
    return [f"{node_uuids[int(i[1])]}{i[2:]}" if i.startswith("g") and i[1].isdigit() else i for i in ids]


@pytest.mark.parametrize(("available", "must", "size", "policy", "expected"), RULE_B)
def test_rule_b_for_replicas(
    available: list[str], must: list[str], size: int, policy: str, expected: list[str]
) -> None:
    node, resource = resource_for("h100x4", TIME_SLICED)
    uuids = [gpu.uuid for gpu in node.gpus]
    got = preferred_allocation(resource, _real(uuids, available), _real(uuids, must), size, policy)  # type: ignore[arg-type]
    assert list(got) == _real(uuids, expected)


def test_rule_b_uses_the_resource_policy_by_default() -> None:
    node, resource = resource_for("h100x4", TIME_SLICED + "\nflags: {plugin: {sharedDevicesAllocationPolicy: packed}}")
    got = preferred_allocation(resource, [d.id for d in resource.devices], [], 2)
    assert got == (f"{node.gpus[0].uuid}::0", f"{node.gpus[0].uuid}::1")


def test_rule_b_refuses_more_than_available() -> None:
    node, resource = resource_for("h100x4", TIME_SLICED)
    with pytest.raises(NotEnoughDevices, match="need 3, 2 available"):
        preferred_allocation(resource, [f"{node.gpus[0].uuid}::0", f"{node.gpus[1].uuid}::0"], [], 3)


def test_rule_b_for_mig_devices_is_deterministic() -> None:
    node, resource = resource_for("h100x4-mig", MIXED_MIG)
    assert not uses_whole_gpu_rule(resource)
    available = [d.id for d in reversed(resource.devices)]
    got = preferred_allocation(resource, available, [], 2)
    assert got == tuple(m.uuid for m in node.gpus[0].mig_instances[:2])


def test_rule_a_uses_the_topology() -> None:
    spec = load_node_spec("preset:h100x4")
    node, resource = resource_for("h100x4")
    assert uses_whole_gpu_rule(resource)
    rule = whole_gpu_rule_for(topology_from_spec(spec.topology, spec.node.gpus))
    uuids = [gpu.uuid for gpu in node.gpus]
    got = preferred_allocation(resource, list(reversed(uuids)), [uuids[2]], 2, whole_gpu_rule=rule)
    assert set(got) == {uuids[2], uuids[3]}, "the other GPU on NUMA node 1"


@pytest.mark.parametrize(("must", "size"), [([], 5), ([0, 1, 2], 2), ([], 0)])
def test_rule_a_answers_invalid_arguments_with_nothing(must: list[int], size: int) -> None:
    node, resource = resource_for("h100x4")
    uuids = [gpu.uuid for gpu in node.gpus]
    assert preferred_allocation(resource, uuids, [uuids[i] for i in must], size) == ()


def test_rule_a_without_a_topology_takes_gpus_in_order() -> None:
    node, resource = resource_for("h100x4")
    uuids = [gpu.uuid for gpu in node.gpus]
    assert preferred_allocation(resource, uuids[::-1], [uuids[3]], 2) == (uuids[3], uuids[0])
