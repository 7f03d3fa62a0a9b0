"""Device health: a physical GPU marked unhealthy takes every device derived from it along."""

from __future__ import annotations

import threading
from collections.abc import Callable

from gpuslice.gpu import Node
from gpuslice.records import record
from gpuslice.sharing.ids import physical_id
from gpuslice.sharing.listeners import Listener, Listeners
from gpuslice.sharing.model import AdvertisedDevice, Resource


class UnknownHealthTarget(KeyError):
    """A health change for a device this node does not have."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown device"


@record
class HealthChange:
    """One recorded change, for logs and metrics."""

    physical_id: str  # the GPU or MIG UUID that changed
    healthy: bool
    reason: str
    generation: int


class HealthStore:
    """Thread-safe health of the node's physical devices (GPU and MIG UUIDs).

    Health is kept per physical device, never per advertised ID, so no replica can stay Healthy on a
    broken GPU: an advertised device is healthy only if its GPU *and* (for MIG) its MIG instance are.
    Listeners run after every change (outside the lock); the plugin uses them to wake ListAndWatch.
    """

    def __init__(self, node: Node) -> None:
        self._known = {gpu.uuid for gpu in node.gpus} | {m.uuid for g in node.gpus for m in g.mig_instances}
        self._unhealthy: dict[str, str] = {}
        self._generation = 0
        self._lock = threading.Lock()
        self._listeners = Listeners()

    @property
    def generation(self) -> int:
        """Increases with every change; lets a watcher tell whether it has seen the latest state."""
        with self._lock:
            return self._generation

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call `listener()` after each change; returns a function that removes it."""
        return self._listeners.add(listener)

    def mark_unhealthy(self, device: str, reason: str = "marked unhealthy") -> HealthChange | None:
        """Mark a GPU UUID, a MIG UUID or any advertised ID (its physical device) unhealthy.

        Returns the change, or None when it was already unhealthy. Raises UnknownHealthTarget.
        """
        return self._set(device, False, reason)

    def mark_healthy(self, device: str, reason: str = "recovered") -> HealthChange | None:
        """Clear an earlier mark on this physical device (a MIG instance keeps its own mark)."""
        return self._set(device, True, reason)

    def _set(self, device: str, healthy: bool, reason: str) -> HealthChange | None:
        target = physical_id(device)
        if target not in self._known:
            raise UnknownHealthTarget(f"unknown device {device!r}: not a GPU or MIG UUID of this node")
        with self._lock:
            if (target not in self._unhealthy) == healthy:
                return None
            if healthy:
                del self._unhealthy[target]
            else:
                self._unhealthy[target] = reason
            self._generation += 1
            change = HealthChange(target, healthy, reason, self._generation)
        self._listeners.notify()
        return change

    def is_healthy(self, device: AdvertisedDevice) -> bool:
        with self._lock:
            return device.gpu.uuid not in self._unhealthy and device.physical_id not in self._unhealthy

    def reason(self, device: AdvertisedDevice) -> str | None:
        """Why the device is unhealthy (the GPU's reason first), or None when healthy."""
        with self._lock:
            return self._unhealthy.get(device.gpu.uuid) or self._unhealthy.get(device.physical_id)

    def unhealthy_ids(self, resource: Resource) -> frozenset[str]:
        """The advertised IDs of `resource` that are unhealthy now."""
        with self._lock:
            marked = set(self._unhealthy)
        return frozenset(d.id for d in resource.devices if d.gpu.uuid in marked or d.physical_id in marked)

    def snapshot(self) -> dict[str, str]:
        """Physical ID -> reason, for every unhealthy physical device."""
        with self._lock:
            return dict(self._unhealthy)
