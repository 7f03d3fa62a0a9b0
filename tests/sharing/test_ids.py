"""The one parser for device references, and the one map from a replica ID to its physical ID."""

from __future__ import annotations

import pytest

from gpuslice.discovery import load_node_spec
from gpuslice.sharing import (
    InvalidDeviceReference,
    is_replica,
    parse_device_reference,
    physical_id,
    replica_id,
    resolve_reference,
)

U = "4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"


@pytest.mark.parametrize(
    ("device_id", "physical", "replica"),
    [
        (f"GPU-{U}", f"GPU-{U}", False),
        (f"GPU-{U}::0", f"GPU-{U}", True),
        (f"GPU-{U}::15", f"GPU-{U}", True),
        (f"MIG-{U}::3", f"MIG-{U}", True),
        ("a::b::c", "a", True),  # split on the first separator only
    ],
)
def test_physical_id(device_id: str, physical: str, replica: bool) -> None:
    assert physical_id(device_id) == physical
    assert is_replica(device_id) is replica


def test_replica_id_round_trips() -> None:
    assert replica_id(f"GPU-{U}", 3) == f"GPU-{U}::3"
    assert physical_id(replica_id(f"GPU-{U}", 3)) == f"GPU-{U}"


@pytest.mark.parametrize(
    ("item", "kind", "fields"),
    [
        (0, "gpu-index", {"gpu_index": 0}),
        ("3", "gpu-index", {"gpu_index": 3}),
        ("1:2", "mig-index", {"gpu_index": 1, "mig_index": 2}),
        (f"GPU-{U}", "gpu-uuid", {"uuid": f"GPU-{U}"}),
        (f"MIG-{U}", "mig-uuid", {"uuid": f"MIG-{U}"}),
        (f"MIG-GPU-{U}/7/0", "legacy-mig", {"uuid": f"GPU-{U}", "gi": 7, "ci": 0}),
        (f"GPU-{U}::2", "gpu-uuid", {"uuid": f"GPU-{U}", "replica": 2}),
        ("0:1::4", "mig-index", {"gpu_index": 0, "mig_index": 1, "replica": 4}),
    ],
)
def test_parse_accepts_every_nvidia_form(item: str | int, kind: str, fields: dict[str, object]) -> None:
    reference = parse_device_reference(item)
    assert reference.kind == kind
    for name, value in fields.items():
        assert getattr(reference, name) == value


@pytest.mark.parametrize(
    "item",
    [-1, "-1", "GPU-UUID", f"MIG-GPU-{U}", "", "gpu0", "0:1:2", f"GPU-{U}::", f"GPU-{U}::x", 2.0, True, None],
)
def test_parse_refuses_and_quotes_the_text(item: object) -> None:
    with pytest.raises(InvalidDeviceReference) as caught:
        parse_device_reference(item)  # type: ignore[arg-type]
    assert repr(item) in str(caught.value)


def test_resolve_every_form_on_a_mig_node() -> None:
    node = load_node_spec("preset:h100x4-mig").node
    gpu = node.gpus[2]
    mig = gpu.mig_instances[4]
    assert resolve_reference(node, parse_device_reference(2)) == (gpu, None)
    assert resolve_reference(node, parse_device_reference(gpu.uuid)) == (gpu, None)
    assert resolve_reference(node, parse_device_reference("2:4")) == (gpu, mig)
    assert resolve_reference(node, parse_device_reference(mig.uuid + "::1")) == (gpu, mig)
    legacy = f"MIG-{gpu.uuid}/{mig.gi}/{mig.ci}"
    assert resolve_reference(node, parse_device_reference(legacy)) == (gpu, mig)
    with pytest.raises(InvalidDeviceReference, match="'9'"):
        resolve_reference(node, parse_device_reference(9))
