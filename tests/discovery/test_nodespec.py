"""The node-spec contract: presets, deterministic IDs, MIG layouts, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuslice.discovery import PRESETS, FakeBackend, NodeSpecError, load_node_spec, parse_node_spec


def test_default_preset_is_four_h100() -> None:
    node = FakeBackend.from_ref(None).discover()
    assert [g.product_name for g in node.gpus] == ["NVIDIA H100 80GB HBM3"] * 4
    assert [g.index for g in node.gpus] == [0, 1, 2, 3]
    assert len({g.uuid for g in node.gpus}) == 4


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_loads(name: str) -> None:
    assert load_node_spec(f"preset:{name}").node.gpus


def test_same_spec_same_ids(tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text(
        "gpus:\n  - model: NVIDIA A100-SXM4-40GB\n    count: 2\n    memory_mib: 40960\n"
        "    compute_capability: '8.0'\n    mig: [3g.20gb, 3g.20gb]\n"
    )
    first, second = load_node_spec(str(spec)).node, load_node_spec(str(spec)).node
    assert first == second
    assert all(g.uuid.startswith("GPU-") for g in first.gpus)
    migs = first.gpus[1].mig_instances
    assert [m.profile for m in migs] == ["3g.20gb", "3g.20gb"]
    assert sorted(m.placement_start for m in migs) == [0, 4]
    assert all(m.uuid.startswith("MIG-") and m.parent_uuid == first.gpus[1].uuid for m in migs)
    assert len({m.gi_cap_minor for g in first.gpus for m in g.mig_instances}) == 4


BAD = [
    ({"gpus": "x"}, "gpus: must be a list"),
    ({"gpus": [{"count": 1}]}, r"gpus\[0\].model: required"),
    ({"gpus": [{"model": "X", "memory_mib": -1, "compute_capability": "8.0"}]}, r"gpus\[0\].memory_mib"),
    ({"gpus": [{"model": "X", "memory_mib": 1, "compute_capability": "eight"}]}, "compute_capability"),
    ({"gpus": [{"model": "X", "memory_mib": 1, "compute_capability": "8.0", "count": 0}]}, r"\.count"),
    ({"gpus": [{"model": "X", "memory_mib": 1, "compute_capability": "8.0", "colour": 1}]}, r"\.colour: unknown"),
    ({"gpus": [], "gpuz": []}, "unknown key 'gpuz'"),
    (
        {
            "gpus": [{"model": "X", "memory_mib": 1, "compute_capability": "8.0", "count": 2}],
            "topology": {"links": [{"gpus": [0, 9], "link": "nvlink", "count": 2}]},
        },
        r"topology.links\[0\].gpus: GPU 9 does not exist",
    ),
    (
        {"gpus": [{"model": "Tesla T4", "memory_mib": 15360, "compute_capability": "7.5", "mig": ["1g.5gb"]}]},
        "does not support MIG",
    ),
    (
        {
            "gpus": [
                {
                    "model": "NVIDIA H100 80GB HBM3",
                    "memory_mib": 81559,
                    "compute_capability": "9.0",
                    "mig": ["4g.40gb", "4g.40gb"],
                }
            ]
        },
        r"gpus\[0\].mig: at most 1 x 4g.40gb",
    ),
    (
        {
            "gpus": [
                {
                    "model": "NVIDIA H100 80GB HBM3",
                    "memory_mib": 81559,
                    "compute_capability": "9.0",
                    "mig": ["3g.40gb", "3g.40gb", "1g.10gb"],
                }
            ]
        },
        "does not fit",
    ),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_bad_specs_name_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(NodeSpecError, match=message):
        parse_node_spec(data)


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(NodeSpecError, match="h100x4"):
        load_node_spec("preset:nope")


def test_missing_file_is_a_clear_error() -> None:
    with pytest.raises(NodeSpecError, match="cannot read node spec"):
        load_node_spec("/nonexistent/node.yaml")
