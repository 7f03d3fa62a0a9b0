"""The node's DRA devices from the sharing plan: names, NVIDIA's attributes plus `isolation`, capacity, counters."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from gpuslice.dra.names import counter_set_name, gpu_device_name, mig_device_name, replica_device_name
from gpuslice.gpu import Gpu, MigCatalogue, MigInstance, MigProfile, Node, catalogue_for
from gpuslice.records import record
from gpuslice.sharing import AdvertisedDevice, SharingPlan

if TYPE_CHECKING:
    from gpuslice.sharing.dynamic import Slot

PCI_BUS_ID_ATTRIBUTE = "resource.kubernetes.io/pciBusID"
# Counter name -> MigProfile field: the engine dimensions every MIG placement consumes (NVIDIA's names).
DIMENSIONS = {
    "multiprocessors": "multiprocessors",
    "copy-engines": "copy_engines",
    "decoders": "decoders",
    "encoders": "encoders",
    "jpeg-engines": "jpeg",
    "ofa-engines": "ofa",
}
_CAPACITY_NAMES = {
    "multiprocessors": "multiprocessors",
    "copy-engines": "copyEngines",
    "decoders": "decoders",
    "encoders": "encoders",
    "jpeg-engines": "jpegEngines",
    "ofa-engines": "ofaEngines",
}
_BRANDS = ("GeForce", "Quadro", "Titan", "Tesla")
_ARCHITECTURES = {"ada-lovelace": "Ada Lovelace"}


class DeviceModelError(ValueError):
    """A plan the DRA front end cannot publish; the message names the device and the reason."""


@record
class DraDevice:
    """One device of our pool and the hardware behind it."""

    name: str
    advertised: AdvertisedDevice
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: Mapping[str, str]
    placement: Slot | None = None  # a dynamic MIG placement: created at prepare, destroyed at unprepare
    consumes: Mapping[str, str] = field(default_factory=dict)  # counter -> amount, in counter_set

    @property
    def gpu(self) -> Gpu:
        return self.advertised.gpu

    @property
    def mig(self) -> MigInstance | None:
        """The existing MIG device (static MIG), None for a whole GPU or a placement not yet created."""
        return None if self.placement is not None else self.advertised.mig

    @property
    def kind(self) -> str:
        return self.advertised.kind

    @property
    def counter_set(self) -> str | None:
        """The GPU's counter set for a placement that consumes one (dra.counters strips them where dropped)."""
        return counter_set_name(self.gpu) if self.placement is not None and self.consumes else None


def semver(text: str) -> str:
    """A version as Kubernetes wants it (semantic, three numbers, no leading zeros): 550.127.08 -> 550.127.8."""
    numbers = [str(int(part)) for part in re.findall(r"\d+", text)[:3]]
    if not numbers:
        raise DeviceModelError(f"version {text!r} has no numbers")
    return ".".join([*numbers, "0", "0"][:3])


def brand(gpu: Gpu) -> str:
    """NVML's brand names for the product lines that carry one in their name; data-centre GPUs are `Nvidia`."""
    for name in _BRANDS:
        if name.lower() in gpu.product_name.lower():
            return name
    return "Nvidia"


def architecture(gpu: Gpu) -> str:
    family = gpu.compute_capability.family
    return _ARCHITECTURES.get(family, family.capitalize())


def pci_bus_id(text: str) -> str:
    """Kubernetes' extended BDF, `dddd:bb:dd.f`: NVML's eight-digit domain is cut to its low four digits."""
    parts = text.lower().split(":")
    if len(parts) == 3 and len(parts[0]) > 4:
        parts[0] = parts[0][-4:]
    return ":".join(parts)


def mib(value: int) -> str:
    return f"{value}Mi"


def _common(node: Node, gpu: Gpu, isolation: str, sharing: str) -> dict[str, dict[str, Any]]:
    attributes: dict[str, dict[str, Any]] = {
        "productName": {"string": gpu.product_name},
        "brand": {"string": brand(gpu)},
        "architecture": {"string": architecture(gpu)},
        "cudaComputeCapability": {"version": semver(str(gpu.compute_capability))},
        "driverVersion": {"version": semver(node.driver_version)},
        "cudaDriverVersion": {"version": semver(node.cuda_driver_version)},
        "index": {"int": gpu.index},
        "minor": {"int": gpu.device_minor},
        "isolation": {"string": isolation},
        "sharing": {"string": sharing},
    }
    if gpu.pci_bus_id:
        attributes[PCI_BUS_ID_ATTRIBUTE] = {"string": pci_bus_id(gpu.pci_bus_id)}
    return attributes


def _profile_of(catalogue: MigCatalogue | None, mig: MigInstance, where: str) -> MigProfile:
    if catalogue is None:
        raise DeviceModelError(f"{where}: {mig.profile} is on a GPU model with no MIG catalogue")
    return catalogue.profile(mig.profile)


def _mig_capacity(profile: MigProfile, memory_mib: int) -> dict[str, str]:
    capacity = {_CAPACITY_NAMES[name]: str(getattr(profile, attr)) for name, attr in DIMENSIONS.items()}
    capacity["memory"] = mib(memory_mib)
    return capacity


def _device(node: Node, resource: str, advertised: AdvertisedDevice) -> DraDevice:
    gpu, mig = advertised.gpu, advertised.mig
    isolation = advertised.isolation.strength
    sharing = advertised.sharing
    if mig is None:
        attributes = {"type": {"string": "gpu"}, "uuid": {"string": gpu.uuid}, **_common(node, gpu, isolation, sharing)}
        name = gpu_device_name(gpu)
        device = DraDevice(name, advertised, attributes, {"memory": mib(gpu.memory_mib)})
    else:
        catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
        profile = _profile_of(catalogue, mig, f"GPU {gpu.index} MIG {mig.profile}")
        assert catalogue is not None
        attributes = {
            "type": {"string": "mig"},
            "parentUUID": {"string": gpu.uuid},
            "profile": {"string": profile.name},
            **_common(node, gpu, isolation, sharing),
        }
        name = mig_device_name(gpu, profile, mig.placement_start)
        capacity = _mig_capacity(profile, mig.memory_mib)
        if advertised.dynamic:
            consumes = _placement_counters(profile, mig)
            from gpuslice.sharing.dynamic import placement_slot  # the geometry loads only for dynamic MIG

            placement = placement_slot(resource, advertised)
            device = DraDevice(name, advertised, attributes, capacity, placement, consumes)
        else:
            attributes["uuid"] = {"string": mig.uuid}
            for offset in range(mig.placement_size):
                capacity[f"memorySlice{mig.placement_start + offset}"] = "1"
            device = DraDevice(name, advertised, attributes, capacity)
    if advertised.replica is not None:
        device = DraDevice(
            replica_device_name(device.name, advertised.replica),
            advertised,
            {**device.attributes, "replica": {"int": advertised.replica}},
            device.capacity,
        )
    return device


def _placement_counters(profile: MigProfile, mig: MigInstance) -> dict[str, str]:
    counters = {name: str(getattr(profile, attr)) for name, attr in DIMENSIONS.items()}
    counters["memory"] = mib(mig.memory_mib)
    for offset in range(mig.placement_size):
        counters[f"memory-slice-{mig.placement_start + offset}"] = "1"
    return counters


def gpu_counters(gpu: Gpu) -> dict[str, str]:
    """The counter set of one dynamic-MIG GPU: the full profile's engines, its memory, one counter per slice.

    The memory slices encode placement exclusivity exactly (overlapping placements share a slice); the
    engine counters add the limits the slices alone do not state, e.g. one `+me` instance per GPU.
    """
    catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
    if catalogue is None:
        raise DeviceModelError(f"GPU {gpu.index} ({gpu.product_name}) has no MIG catalogue")
    full = max(catalogue.profiles, key=lambda profile: (profile.memory_slices, profile.sm_slices))
    counters = {name: str(getattr(full, attr)) for name, attr in DIMENSIONS.items()}
    counters["memory"] = mib(gpu.memory_mib)
    for index in range(catalogue.memory_slices):
        counters[f"memory-slice-{index}"] = "1"
    return counters


def pool_devices(node: Node, plan: SharingPlan) -> tuple[DraDevice, ...]:
    """Every device of the plan once (a device in two resources is published once), sorted by name.

    The scheduler takes the first device that fits, so the order is the preference order: by name, as
    NVIDIA sorts them, which puts a GPU's lower placements first.
    """
    by_name: dict[str, DraDevice] = {}
    for resource in plan.resources:
        for advertised in resource.devices:
            device = _device(node, resource.name, advertised)
            if device.name in by_name and by_name[device.name].advertised.id != advertised.id:
                raise DeviceModelError(f"two devices would both be published as {device.name}")
            by_name[device.name] = device
    return tuple(sorted(by_name.values(), key=lambda device: _natural(device.name)))


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
