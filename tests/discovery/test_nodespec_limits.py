"""Hostile node specs: bad bytes, oversize files, alias bombs and runaway GPU or MIG counts, refused by name."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpuslice.discovery import NodeSpecError, load_node_spec
from gpuslice.discovery.nodespec import MAX_GPUS_PER_NODE, MAX_MIG_INSTANCES_PER_GPU, MAX_NODE_SPEC_BYTES
from tests.support.hostile import BOMB

H100 = "model: NVIDIA H100 80GB HBM3, memory_mib: 81559, compute_capability: '9.0'"

CASES = [
    # (id, file bytes, expected message with {path})
    ("bad-bytes", b"name: n\xffode\ngpus: []\n", "invalid node spec {path}: not UTF-8 text (byte 0xff at offset 7)"),
    ("oversize", b"#" * (MAX_NODE_SPEC_BYTES + 1), f"larger than the limit of {MAX_NODE_SPEC_BYTES} bytes"),
    ("alias-bomb", BOMB.encode(), "expands to more than"),
    (
        "count",
        f"gpus: [{{{H100}, count: 100000000}}]\n".encode(),
        f"{{path}}: gpus[0].count: 100000000 GPUs on the node, over the limit of {MAX_GPUS_PER_NODE}",
    ),
    (
        "total",
        f"gpus: [{{{H100}, count: 40}}, {{{H100}, count: 40}}]\n".encode(),
        f"{{path}}: gpus[1].count: 80 GPUs on the node, over the limit of {MAX_GPUS_PER_NODE}",
    ),
    (
        "mig",
        f"gpus: [{{{H100}, mig: [{', '.join(['1g.10gb'] * 1000)}]}}]\n".encode(),
        f"gpus[0].mig: 1000 instances, over the limit of {MAX_MIG_INSTANCES_PER_GPU} per GPU",
    ),
]


@pytest.mark.parametrize(("data", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_node_specs_are_refused_quickly_by_name(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "node.yaml"
    path.write_bytes(data)
    started = time.perf_counter()
    with pytest.raises(NodeSpecError) as caught:
        load_node_spec(str(path))
    assert message.format(path=path) in str(caught.value)
    assert time.perf_counter() - started < 5.0  # generous: the soak benchmark measures the real figure


def test_the_caps_themselves_are_allowed(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    seven = ", ".join(["1g.10gb"] * 7)
    path.write_text(f"gpus: [{{{H100}, count: {MAX_GPUS_PER_NODE}, mig: [{seven}]}}]\n")
    node = load_node_spec(str(path)).node
    assert len(node.gpus) == MAX_GPUS_PER_NODE and len(node.gpus[0].mig_instances) == 7
