"""Small builders shared by the label tests: nodes from node-spec mappings, configs from YAML text."""

from __future__ import annotations

from typing import Any

from gpuslice.config import Config, parse_config_text
from gpuslice.discovery import parse_node_spec
from gpuslice.gpu import Node

H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
A100_40 = {"model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960, "compute_capability": "8.0"}
L4 = {"model": "NVIDIA L4", "memory_mib": 23034, "compute_capability": "8.9"}


def node(*entries: dict[str, Any], **top: Any) -> Node:
    """A node from GPU entries of the node-spec format (e.g. {**H100, "count": 2, "mig": [...]})."""
    return parse_node_spec({"name": "node-a", "gpus": list(entries), **top}).node


def config(text: str = "") -> Config:
    return parse_config_text(text or "version: v1").config


def view(labels: dict[str, str]) -> dict[str, str]:
    """The labels that depend on the GPUs and sharing (drops versions, machine, mode and timestamp)."""
    skip = ("nvidia.com/cuda.", "nvidia.com/gfd.", "nvidia.com/gpu.machine", "nvidia.com/gpu.mode")
    return {key: value for key, value in labels.items() if not key.startswith(skip)}
