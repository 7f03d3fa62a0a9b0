"""Discovery: backends that find a node's GPUs (fake node spec; NVML and host paths on real nodes)."""

from gpuslice.discovery.backend import Backend, FakeBackend
from gpuslice.discovery.nodespec import (
    DEFAULT_PRESET,
    PRESETS,
    NodeSpec,
    NodeSpecError,
    load_node_spec,
    parse_node_spec,
)

__all__ = [
    "DEFAULT_PRESET",
    "PRESETS",
    "Backend",
    "FakeBackend",
    "NodeSpec",
    "NodeSpecError",
    "load_node_spec",
    "parse_node_spec",
]
