"""Discovery: backends that find a node's GPUs (fake node spec; NVML and host paths on real nodes).

The NVML backend (discovery.nvml) is deliberately not re-exported: importing it loads pynvml, and
only code that chose NVML should pay for (and depend on) that.
"""

from gpuslice.discovery.backend import Backend, FakeBackend
from gpuslice.discovery.nodespec import (
    DEFAULT_PRESET,
    PRESETS,
    NodeSpec,
    NodeSpecError,
    load_node_spec,
    parse_node_spec,
)
from gpuslice.discovery.select import BACKEND_KINDS, BackendInitError, IdleBackend, make_backend
from gpuslice.discovery.xid import XidEvent, affected_device_ids

__all__ = [
    "BACKEND_KINDS",
    "DEFAULT_PRESET",
    "PRESETS",
    "Backend",
    "BackendInitError",
    "FakeBackend",
    "IdleBackend",
    "NodeSpec",
    "NodeSpecError",
    "XidEvent",
    "affected_device_ids",
    "load_node_spec",
    "make_backend",
    "parse_node_spec",
]
