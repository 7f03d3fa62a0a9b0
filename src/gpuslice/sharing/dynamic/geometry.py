"""Dynamic MIG geometry: every placement of every profile as a device, and which placements a held one blocks."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from gpuslice.gpu import ComputeCapability, Gpu, MigCatalogue, MigInstance, MigProfile, catalogue_for
from gpuslice.gpu.refs import UUID_PATTERN
from gpuslice.records import record
from gpuslice.sharing.bases import mig_resource_name
from gpuslice.sharing.dynamic.plan import slot_id as slot_id  # the plan names what it advertises
from gpuslice.sharing.listeners import Listener, Listeners
from gpuslice.sharing.model import AdvertisedDevice, Resource

# Slot (placement) device ID: "<parent GPU UUID>/<profile with '+' as '.'>@<first memory slice>", e.g.
# "GPU-5b1c2c6e-8a51-4bd4-9a51-6770757c6963/3g.40gb@0". The longest real one is 53 characters (v1beta1
# allows 63); it never contains the replica separator "::", and monitoring tools still see the GPU UUID.
SLOT_ID = re.compile(rf"(GPU-{UUID_PATTERN})/([0-9]+g\.[0-9]+gb(?:\.[a-z]+)*)@([0-9]+)")
MAX_SLOT_ID_LENGTH = 63


class SlotUnavailable(ValueError):
    """A placement that cannot be allocated now; `slot_id` names it and `reason` says why."""

    def __init__(self, slot_id: str, reason: str) -> None:
        self.slot_id = slot_id
        self.reason = reason
        super().__init__(f"{slot_id}: {reason}")


class GeometryConflict(ValueError):
    """Restored holdings that cannot all exist at once (overlap, unknown slot): the record is not trusted."""


@record
class Slot:
    """One placement: a profile at a start slice on one GPU, advertised as one device of the profile's resource."""

    id: str
    resource: str
    gpu: Gpu
    catalogue: MigCatalogue
    profile: MigProfile
    start: int

    @property
    def size(self) -> int:
        return self.profile.memory_slices

    @property
    def mask(self) -> int:
        return ((1 << self.size) - 1) << self.start

    @property
    def slices(self) -> str:
        return f"{self.start}-{self.start + self.size - 1}" if self.size > 1 else str(self.start)


@record
class Holding:
    """A placement held for a container: reserved at `since` (wall clock), with its MIG device once created.

    `seen` turns true once the kubelet's pod-resources has listed it; only then does its absence mean release.
    """

    slot_id: str
    gpu_uuid: str
    gpu_index: int
    profile: str
    start: int
    size: int
    since: float
    mig: MigInstance | None = None
    seen: bool = False


def blocked_reason(slot: Slot, held: Sequence[Slot]) -> str | None:
    """Why `slot` cannot be created next to the `held` placements of its GPU, or None when it can.

    Three hardware rules: memory slices may not overlap; a profile has an instance cap (only binding for
    `+me`); media engines cannot be shared, so a GPU carries at most one `+me` instance of any profile.
    """
    same_profile = 0
    for other in held:
        if other.gpu.uuid != slot.gpu.uuid:
            continue
        if other.mask & slot.mask:
            return f"memory slices {other.slices} are held by {other.id}"
        if other.profile.name == slot.profile.name:
            same_profile += 1
        if slot.profile.media_extension and other.profile.media_extension:
            return f"the media engines are held by {other.id} (one +me instance per GPU)"
    if same_profile >= slot.profile.max_count:
        return f"at most {slot.profile.max_count} x {slot.profile.name} per {slot.catalogue.model_key} GPU"
    return None


def open_starts(catalogue: MigCatalogue, held: Sequence[tuple[str, int]], profile_name: str) -> list[int]:
    """Starts at which `profile_name` could still be created on one GPU holding (profile, start) instances."""
    gpu = Gpu(0, "GPU-00000000-0000-0000-0000-000000000000", catalogue.model_key, 0, ComputeCapability(9, 0))
    held_slots = [_slot(gpu, catalogue, catalogue.profile(name), start) for name, start in held]
    profile = catalogue.profile(profile_name)
    return [s for s in profile.starts if blocked_reason(_slot(gpu, catalogue, profile, s), held_slots) is None]


class DynamicMigGeometry:
    """Thread-safe placement state of every dynamic-MIG slot on a node.

    Built from the advertised resources (the slot devices in them). `reserve` checks and marks a whole
    request under one lock, so concurrent Allocates can never hold overlapping slices. A held slot stays
    Healthy for its own pod; every other slot it blocks is reported by `unavailable` (sent as Unhealthy).
    Listeners run after each change, outside the lock.
    """

    def __init__(self, resources: Iterable[Resource], clock: Callable[[], float] = time.time) -> None:
        self._slots: dict[str, Slot] = {}
        self._by_resource: dict[str, tuple[Slot, ...]] = {}
        for resource in resources:
            slots = [placement_slot(resource.name, device) for device in resource.devices if device.dynamic]
            if slots:
                self._by_resource[resource.name] = tuple(slots)
                self._slots.update((slot.id, slot) for slot in slots)
        self._gpus = {slot.gpu.uuid: slot.gpu for slot in self._slots.values()}
        self._held: dict[str, Holding] = {}
        self._clock = clock
        self._lock = threading.Lock()
        self._listeners = Listeners()
        self._generation = 0

    # Queries -----------------------------------------------------------------------------------

    @property
    def resource_names(self) -> tuple[str, ...]:
        return tuple(self._by_resource)

    @property
    def generation(self) -> int:
        with self._lock:
            return self._generation

    def gpu(self, uuid: str) -> Gpu | None:
        """A GPU that has dynamic placements, by UUID."""
        return self._gpus.get(uuid)

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        return tuple(self._gpus.values())

    def slot(self, device_id: str) -> Slot | None:
        return self._slots.get(device_id)

    def is_dynamic(self, device_id: str) -> bool:
        return device_id in self._slots

    def holdings(self) -> tuple[Holding, ...]:
        with self._lock:
            return tuple(self._held.values())

    def holding(self, device_id: str) -> Holding | None:
        with self._lock:
            return self._held.get(device_id)

    @property
    def held_count(self) -> int:
        with self._lock:
            return len(self._held)

    def unavailable(self, resource_name: str) -> frozenset[str]:
        """Slots of `resource_name` that no pod holds and that the held instances block (sent as Unhealthy)."""
        with self._lock:
            held = self._held_slots()
            return frozenset(
                slot.id
                for slot in self._by_resource.get(resource_name, ())
                if slot.id not in self._held and blocked_reason(slot, held) is not None
            )

    def free_count(self, resource_name: str, gpu_uuid: str | None = None) -> int:
        """Slots of `resource_name` (on one GPU, if given) that could be allocated now."""
        with self._lock:
            held = self._held_slots()
            return sum(
                1
                for slot in self._by_resource.get(resource_name, ())
                if (gpu_uuid is None or slot.gpu.uuid == gpu_uuid)
                and slot.id not in self._held
                and blocked_reason(slot, held) is None
            )

    def why_unavailable(self, device_id: str) -> str | None:
        with self._lock:
            return self._why(device_id, self._held_slots())

    def _why(self, device_id: str, held: Sequence[Slot]) -> str | None:
        if device_id in self._held:
            return "already allocated"
        slot = self._slots.get(device_id)
        return "not a dynamic MIG placement of this node" if slot is None else blocked_reason(slot, held)

    def _held_slots(self) -> list[Slot]:
        return [self._slots[key] for key in self._held]

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> tuple[str, ...]:
        """Up to `size` IDs that can be held together: must-include first, then the fullest GPU, lowest start.

        Packing onto the GPU that is already most used keeps whole GPUs free for the large profiles.
        """
        with self._lock:
            taken = self._held_slots()
            used = {slot.gpu.uuid: 0 for slot in self._slots.values()}
            for slot in taken:
                used[slot.gpu.uuid] += slot.size
            chosen: list[str] = []
            candidates = [i for i in dict.fromkeys(must_include) if i in self._slots]
            rest = [i for i in dict.fromkeys(available) if i in self._slots and i not in candidates]
            rest.sort(key=lambda i: (-used[self._slots[i].gpu.uuid], self._slots[i].gpu.index, self._slots[i].start))
            for device_id in candidates + rest:
                if len(chosen) >= size:
                    break
                slot = self._slots[device_id]
                if device_id in self._held or blocked_reason(slot, taken) is not None:
                    continue
                chosen.append(device_id)
                taken.append(slot)
            return tuple(chosen)

    # Changes -----------------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call `listener()` after each change; returns a function that removes it."""
        return self._listeners.add(listener)

    def reserve(self, device_ids: Sequence[str]) -> tuple[Slot, ...]:
        """Hold every slot of one request, or none: SlotUnavailable names the first that cannot be held."""
        with self._lock:
            held = self._held_slots()
            slots: list[Slot] = []
            for device_id in device_ids:
                twice = any(s.id == device_id for s in slots)
                reason = "requested twice" if twice else self._why(device_id, held)
                if reason is not None:
                    raise SlotUnavailable(device_id, reason)
                slot = self._slots[device_id]
                slots.append(slot)
                held.append(slot)
            now = self._clock()
            for slot in slots:
                self._held[slot.id] = _holding(slot, now)
        self._changed()
        return tuple(slots)

    def attach(self, device_id: str, mig: MigInstance | None) -> Holding:
        """Record the MIG device created for a held slot (None: it is gone, nothing to destroy on release)."""
        with self._lock:
            holding = replace(self._held[device_id], mig=mig)
            self._held[device_id] = holding
            return holding

    def mark_seen(self, device_ids: Iterable[str]) -> int:
        """The kubelet lists these held slots for a pod: from now on their absence means release.

        Returns how many were not marked before (the caller persists the change when there are any).
        """
        marked = 0
        with self._lock:
            for device_id in device_ids:
                holding = self._held.get(device_id)
                if holding is not None and not holding.seen:
                    self._held[device_id] = replace(holding, seen=True)
                    marked += 1
        return marked

    def release(self, device_ids: Iterable[str]) -> tuple[Holding, ...]:
        """Stop holding these slots (unknown ones are ignored); the slots they blocked come back."""
        with self._lock:
            released = tuple(h for h in (self._held.pop(i, None) for i in device_ids) if h is not None)
        if released:
            self._changed()
        return released

    def restore(self, holdings: Iterable[Holding]) -> None:
        """Replace the state with recorded holdings; GeometryConflict if they are unknown or overlap."""
        restored: dict[str, Holding] = {}
        slots: list[Slot] = []
        for holding in holdings:
            slot = self._slots.get(holding.slot_id)
            if slot is None:
                raise GeometryConflict(f"{holding.slot_id}: not a dynamic MIG placement of this node")
            if (slot.gpu.uuid, slot.profile.name, slot.start) != (holding.gpu_uuid, holding.profile, holding.start):
                raise GeometryConflict(f"{holding.slot_id}: recorded as {holding.profile}@{holding.start}")
            reason = "recorded twice" if slot.id in restored else blocked_reason(slot, slots)
            if reason is not None:
                raise GeometryConflict(f"{holding.slot_id}: {reason}")
            restored[slot.id] = holding
            slots.append(slot)
        with self._lock:
            self._held = restored
        self._changed()

    def hold_listed(self, device_ids: Iterable[str], seen: bool = True) -> tuple[Holding, ...]:
        """Hold slots the kubelet lists for pods (a rebuild); returns those held, skipping unknown or clashing IDs."""
        added = []
        with self._lock:
            held = self._held_slots()
            now = self._clock()
            for device_id in device_ids:
                slot = self._slots.get(device_id)
                if slot is None or self._why(device_id, held) is not None:
                    continue
                self._held[device_id] = replace(_holding(slot, now), seen=seen)
                held.append(slot)
                added.append(self._held[device_id])
        if added:
            self._changed()
        return tuple(added)

    def _changed(self) -> None:
        with self._lock:
            self._generation += 1
        self._listeners.notify()


def _slot(gpu: Gpu, catalogue: MigCatalogue, profile: MigProfile, start: int, resource: str = "") -> Slot:
    return Slot(
        slot_id(gpu.uuid, profile, start), resource or mig_resource_name(profile.name), gpu, catalogue, profile, start
    )


def placement_slot(resource: str, device: AdvertisedDevice) -> Slot:
    """The slot a dynamic placement of `resource` stands for (ValueError for a device that is none)."""
    catalogue = catalogue_for(device.gpu.product_name, device.gpu.memory_mib)
    planned = device.mig
    if planned is None or catalogue is None:
        raise ValueError(f"{resource}: {device.id} is not a MIG placement of a MIG-capable GPU")
    return _slot(device.gpu, catalogue, catalogue.profile(planned.profile), planned.placement_start, resource)


def _holding(slot: Slot, now: float) -> Holding:
    return Holding(slot.id, slot.gpu.uuid, slot.gpu.index, slot.profile.name, slot.start, slot.size, now)
