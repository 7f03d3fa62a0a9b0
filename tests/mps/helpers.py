"""MPS resources built the way the plugin builds them."""

from __future__ import annotations

from typing import Any

from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.discovery.nodespec import parse_node_spec
from gpuslice.gpu import Node
from gpuslice.sharing import Resource, build_resources


def mps_config(replicas: int, extra: str = "") -> str:
    sharing = f"sharing: {{mps: {{resources: [{{name: gpu, replicas: {replicas}}}]}}}}"
    return f"flags: {{mpsRoot: /run/nvidia/mps}}\n{sharing}\n{extra}"


def mps_resource(replicas: int, preset: str = "h100x4", node: Node | None = None, extra: str = "") -> Resource:
    node = node or load_node_spec(f"preset:{preset}").node
    plan = build_resources(node, parse_config_text(mps_config(replicas, extra)).config)
    (resource,) = plan.resources
    return resource


def node_of(model: str, memory_mib: int, capability: str, count: int = 1) -> Node:
    spec: dict[str, Any] = {
        "name": "n",
        "gpus": [{"model": model, "count": count, "memory_mib": memory_mib, "compute_capability": capability}],
    }
    return parse_node_spec(spec).node
