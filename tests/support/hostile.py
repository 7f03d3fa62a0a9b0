"""Hostile inputs several test packages use: a YAML alias bomb, and a sound checkpoint to corrupt."""

from __future__ import annotations

from gpuslice.discovery import RecordingMigControl, parse_node_spec
from gpuslice.gpu import Node
from gpuslice.gpu.mig import H100_80GB
from gpuslice.sharing.dynamic.geometry import DynamicMigGeometry, Holding, slot_id
from gpuslice.sharing.dynamic.plan import dynamic_resources

# Nine levels of ten aliases each: a few hundred bytes that stand for 10^9 nodes ("billion laughs").
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join(['*' + chr(97 + n)] * 10)}]\n" for n in range(8)
)

CHECKPOINT_NODE: Node = parse_node_spec(
    {
        "name": "ckpt",
        "gpus": [{"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0", "mig": []}],
    }
).node


def sample_holdings() -> tuple[Holding, ...]:
    """Two holdings on CHECKPOINT_NODE: one with its created MIG device, one reserved only."""
    geometry = DynamicMigGeometry(dynamic_resources(CHECKPOINT_NODE), clock=lambda: 1700000000.5)
    gpu = CHECKPOINT_NODE.gpus[0]
    three = geometry.reserve([slot_id(gpu.uuid, H100_80GB.profile("3g.40gb"), 0)])[0]
    geometry.reserve([slot_id(gpu.uuid, H100_80GB.profile("1g.10gb"), 6)])
    geometry.attach(three.id, RecordingMigControl(CHECKPOINT_NODE).create(0, "3g.40gb", 0))
    geometry.mark_seen([three.id])
    return geometry.holdings()
