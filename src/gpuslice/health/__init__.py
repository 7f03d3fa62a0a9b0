"""Xid health policy: which events are critical, which devices they hit, and the optional way back to Healthy."""

from gpuslice.health.recovery import (
    NVML_PROBE_INTERVAL_S,
    NVML_QUIET_S,
    EventOutcome,
    EventResult,
    HealthTracker,
    Mark,
    ProbeResult,
    RecoveryPolicy,
)
from gpuslice.health.targets import (
    event_targets,
    find_gpu,
    probe_targets,
)
from gpuslice.health.xids import (
    DISABLE_ENV,
    ENABLE_ENV,
    XidPolicy,
    parse_xid_list,
    xid_policy_from_env,
)

__all__ = [
    "DISABLE_ENV",
    "ENABLE_ENV",
    "NVML_PROBE_INTERVAL_S",
    "NVML_QUIET_S",
    "EventOutcome",
    "EventResult",
    "HealthTracker",
    "Mark",
    "ProbeResult",
    "RecoveryPolicy",
    "XidPolicy",
    "event_targets",
    "find_gpu",
    "parse_xid_list",
    "probe_targets",
    "xid_policy_from_env",
]
