"""What the plugin advertises: resources, their devices, and the isolation each one gives."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import field
from functools import cached_property
from typing import Literal

from gpuslice.gpu import Gpu, MigInstance
from gpuslice.records import record

SharingStrategy = Literal["none", "time-slicing", "mps"]
AllocationPolicy = Literal["distributed", "packed"]
DeviceKind = Literal["gpu", "mig"]


class SharingError(ValueError):
    """A node and config that cannot be advertised together; the message names the key or device."""


class Isolation(enum.Enum):
    """How well one allocation is protected from its neighbours on the same hardware."""

    EXCLUSIVE = "exclusive"
    MIG = "mig"
    MPS = "mps"
    NONE = "none"

    @property
    def strength(self) -> Literal["strong", "partial", "none"]:
        return _STRENGTH[self]

    @property
    def why(self) -> str:
        """One line a user can act on."""
        return _WHY[self]

    @property
    def summary(self) -> str:
        """The strength and the mechanism in words, e.g. 'strong isolation (MIG partition)'."""
        return f"{_STRENGTH_WORDS[self.strength]} ({_MECHANISM_WORDS[self]})"


# The node label that states a resource's isolation (written by `gpuslice labels`, quoted by `gpuslice advise`).
ISOLATION_LABEL_PREFIX = "gpuslice.io/"


def isolation_label_key(resource_name: str) -> str:
    """`nvidia.com/gpu.shared` -> `gpuslice.io/gpu.shared.isolation`: the label tenants select on."""
    short = resource_name.removeprefix("nvidia.com/").replace("/", ".")
    return f"{ISOLATION_LABEL_PREFIX}{short}.isolation"


_STRENGTH: dict[Isolation, Literal["strong", "partial", "none"]] = {
    Isolation.EXCLUSIVE: "strong",
    Isolation.MIG: "strong",
    Isolation.MPS: "partial",
    Isolation.NONE: "none",
}

_WHY = {
    Isolation.EXCLUSIVE: "the whole GPU belongs to this container; nothing else is scheduled onto it",
    Isolation.MIG: "a hardware partition with its own SMs, memory slices and cache; faults stay inside it",
    Isolation.MPS: "MPS caps each client's threads and memory, but clients share one GPU context and its faults",
    Isolation.NONE: "replicas take turns on the whole GPU; no memory or fault isolation between them",
}


_STRENGTH_WORDS = {"strong": "strong isolation", "partial": "partial isolation", "none": "no isolation"}

_MECHANISM_WORDS = {
    Isolation.EXCLUSIVE: "exclusive GPU",
    Isolation.MIG: "MIG partition",
    Isolation.MPS: "MPS",
    Isolation.NONE: "time-slicing",
}

_ORDER = {Isolation.NONE: 0, Isolation.MPS: 1, Isolation.MIG: 2, Isolation.EXCLUSIVE: 3}


def weakest(isolations: Iterable[Isolation]) -> Isolation:
    """The least protective of several guarantees (EXCLUSIVE for none at all)."""
    return min(isolations, key=_ORDER.__getitem__, default=Isolation.EXCLUSIVE)


@record
class AdvertisedDevice:
    """One device ID the kubelet sees, and the hardware behind it."""

    id: str  # as advertised: a GPU/MIG UUID, or "<uuid>::<n>" for a replica
    physical_id: str  # the GPU or MIG UUID (sharing.ids.physical_id(id))
    gpu: Gpu  # the physical GPU (the parent, for a MIG device)
    mig: MigInstance | None = None
    replica: int | None = None  # None for a device that is not shared
    sharing: SharingStrategy = "none"
    # A dynamic-MIG placement (migStrategy: dynamic): `mig` is the planned instance, carved on Allocate.
    dynamic: bool = False

    @property
    def isolation(self) -> Isolation:
        """The weakest guarantee of the hardware and the sharing on top of it."""
        if self.sharing == "time-slicing":
            return Isolation.NONE
        if self.sharing == "mps":
            return Isolation.MPS
        return Isolation.MIG if self.mig is not None else Isolation.EXCLUSIVE

    @property
    def kind(self) -> DeviceKind:
        return "mig" if self.mig is not None else "gpu"

    @property
    def gpu_uuid(self) -> str:
        return self.gpu.uuid

    @property
    def numa_node(self) -> int | None:
        return self.gpu.numa_node

    @property
    def index(self) -> str:
        """NVIDIA's index form: '<gpu>' or '<gpu>:<mig>' (used by deviceIDStrategy=index)."""
        return self.mig.device_index if self.mig is not None else str(self.gpu.index)


@record
class Resource:
    """One extended resource (one plugin server): its name, its devices and how they are shared."""

    name: str  # e.g. nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.10gb
    kind: DeviceKind
    devices: tuple[AdvertisedDevice, ...]
    sharing: SharingStrategy = "none"  # the strategy of its shared devices; "none" when nothing is shared
    replicas: int = 1  # the most replicas of any physical device; 1 when nothing is shared
    mig_profile: str | None = None  # the MIG profile, for a MIG resource under the mixed strategy
    fail_requests_greater_than_one: bool = False
    allocation_policy: AllocationPolicy = "distributed"
    base_name: str = ""  # the name before a rename (".shared"); equals name when not renamed
    derivation: str = field(default="", compare=False)

    @property
    def isolation(self) -> Isolation:
        """The weakest guarantee among its devices (an allocation reports its own devices' guarantee)."""
        return weakest(device.isolation for device in self.devices)

    @property
    def mode(self) -> str:
        """A short label: whole, mig, time-slicing, mps, or mig+time-slicing."""
        base = "mig" if self.kind == "mig" else "whole"
        if self.sharing == "none":
            return base
        return self.sharing if base == "whole" else f"{base}+{self.sharing}"

    @cached_property
    def by_id(self) -> dict[str, AdvertisedDevice]:
        return {device.id: device for device in self.devices}

    @cached_property
    def position(self) -> dict[str, int]:
        """Advertised order of each ID (GPU index, then MIG index, then replica): the final tie-break."""
        return {device.id: position for position, device in enumerate(self.devices)}

    @cached_property
    def physical_ids(self) -> tuple[str, ...]:
        """The distinct physical devices behind this resource, in advertised order."""
        return tuple(dict.fromkeys(device.physical_id for device in self.devices))

    @cached_property
    def replicas_of(self) -> dict[str, tuple[AdvertisedDevice, ...]]:
        """Physical ID -> every advertised device on it."""
        grouped: dict[str, list[AdvertisedDevice]] = {}
        for device in self.devices:
            grouped.setdefault(device.physical_id, []).append(device)
        return {key: tuple(value) for key, value in grouped.items()}

    @property
    def physical_gpus(self) -> tuple[Gpu, ...]:
        return tuple({device.gpu.uuid: device.gpu for device in self.devices}.values())


@record
class SharingPlan:
    """Everything a node advertises under one config, plus warnings for keys that were ignored."""

    resources: tuple[Resource, ...]
    warnings: tuple[str, ...] = ()

    def resource(self, name: str) -> Resource:
        for resource in self.resources:
            if resource.name == name:
                return resource
        known = ", ".join(r.name for r in self.resources) or "(none)"
        raise KeyError(f"no resource {name!r} is advertised (advertised: {known})")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.resources)
