"""Xid health events: what an Xid event says and which Xids are ignored (health.targets says which devices it hits)."""

from __future__ import annotations

from gpuslice.records import record

# Application-caused Xids that NVIDIA's device plugin ignores by default: they report a fault of the
# workload (illegal address, page fault, ...), not of the GPU.
DEFAULT_IGNORED_XIDS: frozenset[int] = frozenset({13, 31, 43, 45, 68, 109})

# NVML reports "no GPU/compute instance" (an event on the whole GPU) with this value.
NO_INSTANCE = 0xFFFFFFFF


@record
class XidEvent:
    """One health event from the NVML event loop.

    uuid: the physical GPU's UUID, or None when every device is affected (the wait itself failed, or
    the event's device could not be named). xid: the Xid number, 0 when the failure is not an Xid
    (event registration or waiting failed). gi/ci: the MIG GPU/compute instance the event is scoped
    to, None when it concerns the whole GPU.
    """

    uuid: str | None
    xid: int
    gi: int | None = None
    ci: int | None = None
    reason: str = ""

    @property
    def all_devices(self) -> bool:
        return self.uuid is None

    @property
    def mig_scoped(self) -> bool:
        return self.gi is not None and self.ci is not None

    def describe(self) -> str:
        where = "every device" if self.uuid is None else self.uuid
        if self.mig_scoped:
            where += f" (GI {self.gi}, CI {self.ci})"
        what = f"Xid={self.xid}" if self.xid else "health check failure"
        return f"{what} on {where}" + (f": {self.reason}" if self.reason else "")


def instance_id(raw: int) -> int | None:
    """NVML's GI/CI field of an event: None for 'not MIG-scoped'."""
    return None if raw == NO_INSTANCE else raw
