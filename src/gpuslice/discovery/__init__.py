"""Discovery: backends that find a node's GPUs (fake node spec; NVML and host paths on real nodes).

The NVML backend (discovery.nvml) is deliberately not re-exported: callers other than backend
selection work through the Backend protocol and its capabilities, never through NVML's classes.
Importing discovery.nvml does not load pynvml; building an NvmlBackend without a library does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.discovery.backend import Backend as Backend
    from gpuslice.discovery.backend import FakeBackend as FakeBackend
    from gpuslice.discovery.capabilities import HealthSource as HealthSource
    from gpuslice.discovery.capabilities import MigControl as MigControl
    from gpuslice.discovery.capabilities import MigControlError as MigControlError
    from gpuslice.discovery.capabilities import Prober as Prober
    from gpuslice.discovery.capabilities import TimeSliceControl as TimeSliceControl
    from gpuslice.discovery.capabilities import TimeSliceError as TimeSliceError
    from gpuslice.discovery.mig_recording import RecordingMigControl as RecordingMigControl
    from gpuslice.discovery.mig_recording import RecordsMigCalls as RecordsMigCalls
    from gpuslice.discovery.nodespec import DEFAULT_PRESET as DEFAULT_PRESET
    from gpuslice.discovery.nodespec import PRESETS as PRESETS
    from gpuslice.discovery.nodespec import NodeSpec as NodeSpec
    from gpuslice.discovery.nodespec import NodeSpecError as NodeSpecError
    from gpuslice.discovery.nodespec import load_node_spec as load_node_spec
    from gpuslice.discovery.nodespec import parse_node_spec as parse_node_spec
    from gpuslice.discovery.select import BACKEND_KINDS as BACKEND_KINDS
    from gpuslice.discovery.select import BackendInitError as BackendInitError
    from gpuslice.discovery.select import IdleBackend as IdleBackend
    from gpuslice.discovery.select import make_backend as make_backend
    from gpuslice.discovery.select import make_fake_backend as make_fake_backend
    from gpuslice.discovery.timeslice import DEFAULT_TIMESLICE_LEVEL as DEFAULT_TIMESLICE_LEVEL
    from gpuslice.discovery.timeslice import NvidiaSmiTimeSlice as NvidiaSmiTimeSlice
    from gpuslice.discovery.timeslice import RecordingTimeSlice as RecordingTimeSlice
    from gpuslice.discovery.xid import XidEvent as XidEvent

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "gpuslice.discovery.backend": ("Backend", "FakeBackend"),
        "gpuslice.discovery.capabilities": (
            "HealthSource",
            "MigControl",
            "MigControlError",
            "Prober",
            "TimeSliceControl",
            "TimeSliceError",
        ),
        "gpuslice.discovery.mig_recording": ("RecordingMigControl", "RecordsMigCalls"),
        "gpuslice.discovery.nodespec": (
            "DEFAULT_PRESET",
            "PRESETS",
            "NodeSpec",
            "NodeSpecError",
            "load_node_spec",
            "parse_node_spec",
        ),
        "gpuslice.discovery.select": (
            "BACKEND_KINDS",
            "BackendInitError",
            "IdleBackend",
            "make_backend",
            "make_fake_backend",
        ),
        "gpuslice.discovery.timeslice": ("DEFAULT_TIMESLICE_LEVEL", "NvidiaSmiTimeSlice", "RecordingTimeSlice"),
        "gpuslice.discovery.xid": ("XidEvent",),
    },
)
