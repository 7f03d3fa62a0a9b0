"""The health state machine per physical device: Xid events make it Unhealthy, passed probes (optionally) heal it."""

from __future__ import annotations

import enum
import threading

from gpuslice.discovery.capabilities import NVML_PROBE_INTERVAL_S, NVML_QUIET_S
from gpuslice.discovery.xid import XidEvent
from gpuslice.gpu import Node
from gpuslice.health.targets import event_targets, probe_targets
from gpuslice.health.xids import XidPolicy
from gpuslice.records import record

__all__ = ["NVML_PROBE_INTERVAL_S", "NVML_QUIET_S", "RecoveryPolicy"]


@record
class RecoveryPolicy:
    """Whether and when a device marked unhealthy may return to Healthy (off by default, as in NVIDIA).

    quiet_s: a probe counts only if it was taken at least this long after the device's last critical
    event. probe_interval_s: how often an active prober (NVML) re-probes a device that stays unhealthy.
    """

    enabled: bool = False
    quiet_s: float = 0.0
    probe_interval_s: float = NVML_PROBE_INTERVAL_S

    def describe(self) -> str:
        if not self.enabled:
            return "recovery off: an unhealthy device stays unhealthy until the plugin restarts"
        return f"recovery on: a passed probe at least {self.quiet_s:g}s after the last critical Xid heals a device"


class EventOutcome(enum.Enum):
    """What one event did; the value is the `outcome` label of the health-events metric."""

    MARKED = "marked_unhealthy"
    IGNORED = "ignored"
    CHECKS_DISABLED = "checks_disabled"
    UNKNOWN_DEVICE = "unknown_device"


@record
class Mark:
    """Set the health of one physical device (GPU or MIG UUID)."""

    physical_id: str
    healthy: bool
    reason: str


@record
class EventResult:
    """What one health event did: its outcome and the health marks it sets."""

    outcome: EventOutcome
    marks: tuple[Mark, ...] = ()


@record
class ProbeResult:
    """What one recovery probe pass decided: the marks to set, and a note for the log."""

    marks: tuple[Mark, ...] = ()
    note: str = ""


class _Unhealthy:
    """A device held unhealthy: why, and when its last event and probe were (mutable state: a plain class,
    not a dataclass, whose methods would be compiled at every start)."""

    def __init__(self, reason: str, last_event: float) -> None:
        self.reason = reason
        self.last_event = last_event
        self.last_probe: float | None = None


class HealthTracker:
    """Turns events and probe results into marks; pure decisions, no I/O, safe from any thread.

    A device is Healthy until a critical event; it then stays Unhealthy until a probe passes after the
    quiet period and recovery is enabled. A probe that arrives before any event changes nothing.
    """

    def __init__(self, node: Node, xids: XidPolicy, recovery: RecoveryPolicy | None = None) -> None:
        self.node = node
        self.xids = xids
        self.recovery = recovery or RecoveryPolicy()
        self._unhealthy: dict[str, _Unhealthy] = {}
        self._lock = threading.Lock()

    def on_event(self, event: XidEvent, now: float) -> EventResult:
        if not self.xids.checks_enabled:
            return EventResult(EventOutcome.CHECKS_DISABLED)
        if not self.xids.is_critical(event.xid):
            return EventResult(EventOutcome.IGNORED)
        targets = event_targets(event, self.node)
        if not targets:
            return EventResult(EventOutcome.UNKNOWN_DEVICE)
        reason = event.describe()
        marks: list[Mark] = []
        with self._lock:
            for target in targets:
                state = self._unhealthy.get(target)
                if state is None:
                    self._unhealthy[target] = _Unhealthy(reason, now)
                    marks.append(Mark(target, False, reason))
                else:  # already unhealthy: a new event restarts the quiet period
                    state.last_event = max(state.last_event, now)
        return EventResult(EventOutcome.MARKED, tuple(marks))

    def on_probe(self, uuid: str, passed: bool, now: float, detail: str = "") -> ProbeResult:
        """A probe of `uuid` (GPU: the GPU and its MIG devices; MIG: that device) passed or failed."""
        targets = probe_targets(uuid, self.node)
        if not targets:
            return ProbeResult(note=f"probe for unknown device {uuid!r} ignored")
        marks: list[Mark] = []
        waiting: list[str] = []
        with self._lock:
            unhealthy = [t for t in targets if t in self._unhealthy]
            if not unhealthy:
                return ProbeResult(note=f"{uuid} is healthy; probe changes nothing")
            if not self.recovery.enabled:
                return ProbeResult(note=f"{uuid} passed a probe, but health recovery is off")
            for target in unhealthy:
                state = self._unhealthy[target]
                state.last_probe = now
                if not passed:
                    continue
                if now - state.last_event < self.recovery.quiet_s:
                    waiting.append(target)
                    continue
                del self._unhealthy[target]
                marks.append(Mark(target, True, f"probe passed{': ' + detail if detail else ''}"))
        if not passed:
            return ProbeResult(note=f"{uuid} failed its probe{': ' + detail if detail else ''}; stays unhealthy")
        note = f"{', '.join(waiting)} still in the quiet period" if waiting else ""
        return ProbeResult(tuple(marks), note)

    def due_probes(self, now: float) -> list[str]:
        """Devices an active prober should probe now (recovery on, quiet period over, interval elapsed)."""
        if not self.recovery.enabled:
            return []
        with self._lock:
            return [
                target
                for target, state in self._unhealthy.items()
                if now - state.last_event >= self.recovery.quiet_s
                and (state.last_probe is None or now - state.last_probe >= self.recovery.probe_interval_s)
            ]

    def unhealthy(self) -> dict[str, str]:
        """Physical ID -> reason, for every device this tracker marked and has not healed."""
        with self._lock:
            return {target: state.reason for target, state in self._unhealthy.items()}
