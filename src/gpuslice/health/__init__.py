"""Xid health policy: which events are critical, which devices they hit, and the optional way back to Healthy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.health.recovery import NVML_PROBE_INTERVAL_S as NVML_PROBE_INTERVAL_S
    from gpuslice.health.recovery import NVML_QUIET_S as NVML_QUIET_S
    from gpuslice.health.recovery import EventOutcome as EventOutcome
    from gpuslice.health.recovery import EventResult as EventResult
    from gpuslice.health.recovery import HealthTracker as HealthTracker
    from gpuslice.health.recovery import Mark as Mark
    from gpuslice.health.recovery import ProbeResult as ProbeResult
    from gpuslice.health.recovery import RecoveryPolicy as RecoveryPolicy
    from gpuslice.health.targets import event_targets as event_targets
    from gpuslice.health.targets import find_gpu as find_gpu
    from gpuslice.health.targets import probe_targets as probe_targets
    from gpuslice.health.xids import DISABLE_ENV as DISABLE_ENV
    from gpuslice.health.xids import ENABLE_ENV as ENABLE_ENV
    from gpuslice.health.xids import XidPolicy as XidPolicy
    from gpuslice.health.xids import parse_xid_list as parse_xid_list
    from gpuslice.health.xids import xid_policy_from_env as xid_policy_from_env

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "gpuslice.health.recovery": (
            "NVML_PROBE_INTERVAL_S",
            "NVML_QUIET_S",
            "EventOutcome",
            "EventResult",
            "HealthTracker",
            "Mark",
            "ProbeResult",
            "RecoveryPolicy",
        ),
        "gpuslice.health.targets": ("event_targets", "find_gpu", "probe_targets"),
        "gpuslice.health.xids": ("DISABLE_ENV", "ENABLE_ENV", "XidPolicy", "parse_xid_list", "xid_policy_from_env"),
    },
)
