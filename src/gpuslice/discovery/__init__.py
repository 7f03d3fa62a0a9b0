"""Discovery: backends that find a node's GPUs (fake node spec; NVML and host paths on real nodes).

The NVML backend (discovery.nvml) is deliberately not re-exported: callers other than backend
selection work through the Backend protocol and its capabilities, never through NVML's classes.
Importing discovery.nvml does not load pynvml; building an NvmlBackend without a library does.
"""

from gpuslice.discovery.backend import (
    Backend,
    FakeBackend,
)
from gpuslice.discovery.capabilities import (
    HealthSource,
    MigControl,
    MigControlError,
    Prober,
    TimeSliceControl,
    TimeSliceError,
)
from gpuslice.discovery.mig_recording import (
    RecordingMigControl,
    RecordsMigCalls,
)
from gpuslice.discovery.nodespec import (
    DEFAULT_PRESET,
    PRESETS,
    NodeSpec,
    NodeSpecError,
    load_node_spec,
    parse_node_spec,
)
from gpuslice.discovery.select import (
    BACKEND_KINDS,
    BackendInitError,
    IdleBackend,
    make_backend,
    make_fake_backend,
)
from gpuslice.discovery.timeslice import (
    DEFAULT_TIMESLICE_LEVEL,
    NvidiaSmiTimeSlice,
    RecordingTimeSlice,
)
from gpuslice.discovery.xid import (
    XidEvent,
)

__all__ = [
    "BACKEND_KINDS",
    "DEFAULT_PRESET",
    "DEFAULT_TIMESLICE_LEVEL",
    "PRESETS",
    "Backend",
    "BackendInitError",
    "FakeBackend",
    "HealthSource",
    "IdleBackend",
    "MigControl",
    "MigControlError",
    "NodeSpec",
    "NodeSpecError",
    "NvidiaSmiTimeSlice",
    "Prober",
    "RecordingMigControl",
    "RecordingTimeSlice",
    "RecordsMigCalls",
    "TimeSliceControl",
    "TimeSliceError",
    "XidEvent",
    "load_node_spec",
    "make_backend",
    "make_fake_backend",
    "parse_node_spec",
]
