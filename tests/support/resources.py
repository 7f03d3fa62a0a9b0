"""Resources for allocation tests, built the way the plugin builds them."""

from __future__ import annotations

from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.gpu import Node
from gpuslice.sharing import Resource, build_resources

TIME_SLICED = "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}"
MIXED_MIG = "flags: {migStrategy: mixed}"


def resource_for(preset: str, config: str = "") -> tuple[Node, Resource]:
    node = load_node_spec(f"preset:{preset}").node
    plan = build_resources(node, parse_config_text(config).config)
    assert len(plan.resources) == 1
    return node, plan.resources[0]
