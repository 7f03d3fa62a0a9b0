"""Typed allocation errors; each names the resource and the offending device, in NVIDIA's wording."""

from __future__ import annotations

from collections.abc import Sequence

# The proto comment allows 63 characters; our longest real ID (legacy MIG UUID with a replica suffix) is
# about 55. We refuse anything much longer before looking it up, and never echo it in full.
MAX_DEVICE_ID_LENGTH = 128
_SHOWN = 72


def shown(device_id: str) -> str:
    """A device ID fit for an error message: long IDs are cut, with their length."""
    if len(device_id) <= _SHOWN:
        return device_id
    return f"{device_id[:_SHOWN]}... ({len(device_id)} characters)"


class AllocationError(ValueError):
    """A request the plugin refuses. The plugin turns it into INVALID_ARGUMENT; the server keeps serving."""

    def __init__(self, resource: str, detail: str, device: str | None = None) -> None:
        self.resource = resource
        self.detail = detail
        self.device = device
        super().__init__(f'invalid allocation request for "{resource}": invalid request: {detail}')


class EmptyRequest(AllocationError):
    """No container request, or a container request without device IDs."""

    def __init__(self, resource: str, container: int | None = None) -> None:
        where = "no container requests" if container is None else f"container request {container} has no device IDs"
        super().__init__(resource, f"empty request: {where}")


class IdTooLong(AllocationError):
    def __init__(self, resource: str, device: str) -> None:
        detail = f"device ID longer than {MAX_DEVICE_ID_LENGTH} characters: {shown(device)}"
        super().__init__(resource, detail, device)


class UnknownDevice(AllocationError):
    def __init__(self, resource: str, device: str, hint: str = "") -> None:
        super().__init__(resource, f"unknown device: {shown(device)}{hint}", device)


class TooManyReplicas(UnknownDevice):
    """A replica number beyond the replicas the physical device has."""

    def __init__(self, resource: str, device: str, physical: str, replicas: int) -> None:
        hint = f" ({physical} has {replicas} replicas, ::0 to ::{replicas - 1})"
        super().__init__(resource, device, hint)


class UnhealthyDevice(AllocationError):
    def __init__(self, resource: str, device: str, reason: str | None = None) -> None:
        suffix = f" ({reason})" if reason else ""
        super().__init__(resource, f"unhealthy device: {shown(device)}{suffix}", device)


class RequestTooLarge(AllocationError):
    """More than one shared device in one request while failRequestsGreaterThanOne is on."""

    def __init__(self, resource: str, devices: Sequence[str]) -> None:
        self.devices = tuple(devices)
        listed = ", ".join(shown(d) for d in devices[:4]) + (", ..." if len(devices) > 4 else "")
        detail = f"maximum request size for shared resources is 1; found {len(devices)} ({listed})"
        super().__init__(resource, detail, devices[0] if devices else None)


class NotEnoughDevices(AllocationError):
    """GetPreferredAllocation asked for more devices than are available."""

    def __init__(self, resource: str, needed: int, available: int) -> None:
        detail = f"not enough available devices to satisfy allocation: need {needed}, {available} available"
        super().__init__(resource, detail)


class PlacementUnavailable(AllocationError):
    """A dynamic MIG placement that overlaps (or is) a held instance, or whose profile cap is reached."""

    def __init__(self, resource: str, device: str, reason: str) -> None:
        super().__init__(resource, f"device {device} is not available: {reason}", device)


class ImexChannelMissing(ValueError):
    """A required IMEX channel whose device node does not exist (NVIDIA's text)."""


class AllocationFailed(RuntimeError):
    """A valid request the device could not carry out (a MIG device not created); nothing stays held."""
