"""Read-only views the mock kubelet hands out: resources as the node sees them, and admitted pods."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuslice.wire import HEALTHY, deviceplugin_pb2


@dataclass(frozen=True)
class PluginOptions:
    """What `GetDevicePluginOptions` answered during `Register`."""

    pre_start_required: bool = False
    get_preferred_allocation_available: bool = False

    @classmethod
    def from_message(cls, message: deviceplugin_pb2.DevicePluginOptions) -> PluginOptions:
        return cls(
            pre_start_required=message.pre_start_required,
            get_preferred_allocation_available=message.get_preferred_allocation_available,
        )


@dataclass(frozen=True)
class ResourceView:
    """One extended resource as the kubelet knows it.

    `capacity` counts every device, `allocatable` the healthy ones (as in node status: devices held by
    pods still count); `free` is what a new pod could get. `registered` is false before the first
    `Register`, after the `ListAndWatch` stream ended, and after a kubelet restart.
    """

    name: str
    devices: Mapping[str, str]
    registered: bool
    options: PluginOptions | None
    endpoint: str | None
    allocated: frozenset[str]
    registrations: int
    registration_attempts: int
    updates: int
    stopped_at: float | None
    numa_nodes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def healthy(self) -> frozenset[str]:
        return frozenset(device for device, health in self.devices.items() if health == HEALTHY)

    @property
    def unhealthy(self) -> frozenset[str]:
        return frozenset(device for device, health in self.devices.items() if health != HEALTHY)

    @property
    def capacity(self) -> int:
        return len(self.devices)

    @property
    def allocatable(self) -> int:
        return len(self.healthy)

    @property
    def free(self) -> frozenset[str]:
        return self.healthy - self.allocated


@dataclass(frozen=True)
class GrantedDevices:
    """The devices of one resource given to one container, and the plugin's `Allocate` answer for them."""

    resource: str
    device_ids: tuple[str, ...]
    response: deviceplugin_pb2.ContainerAllocateResponse
    numa_nodes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    preferred: tuple[str, ...] | None = None
    """The plugin's `GetPreferredAllocation` answer as sent; None when it was not asked."""

    @property
    def envs(self) -> dict[str, str]:
        return dict(self.response.envs)

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.response.annotations)

    @property
    def device_nodes(self) -> list[tuple[str, str, str]]:
        """(container_path, host_path, permissions) per device node."""
        return [(spec.container_path, spec.host_path, spec.permissions) for spec in self.response.devices]

    @property
    def mounts(self) -> list[tuple[str, str, bool]]:
        """(container_path, host_path, read_only) per mount."""
        return [(mount.container_path, mount.host_path, mount.read_only) for mount in self.response.mounts]

    @property
    def cdi_devices(self) -> list[str]:
        return [device.name for device in self.response.cdi_devices]


@dataclass(frozen=True)
class Admission:
    """One admitted container of a pod: its allocations per resource."""

    pod: str
    namespace: str
    container: str
    uid: str
    allocations: Mapping[str, GrantedDevices]

    @property
    def device_ids(self) -> dict[str, tuple[str, ...]]:
        return {resource: allocation.device_ids for resource, allocation in self.allocations.items()}

    @property
    def envs(self) -> dict[str, str]:
        """The container's environment after the kubelet's merge: on a duplicate name the first one wins."""
        merged: dict[str, str] = {}
        for allocation in self.allocations.values():
            for name, value in allocation.response.envs.items():
                merged.setdefault(name, value)
        return merged
