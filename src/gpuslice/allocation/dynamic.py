"""The dynamic-MIG Allocator: placements blocked by held instances go Unhealthy, Allocate carves the device."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gpuslice.allocation.allocate import container_answer, validate_request
from gpuslice.allocation.allocator import StaticAllocator
from gpuslice.allocation.answer import AllocationAnswer
from gpuslice.allocation.errors import AllocationError, AllocationFailed, EmptyRequest, PlacementUnavailable
from gpuslice.allocation.options import AllocateOptions
from gpuslice.allocation.preferred import WholeGpuRule, preferred_allocation
from gpuslice.gpu import MigInstance
from gpuslice.sharing import HealthStore, Resource
from gpuslice.sharing import dynamic as dynamic_mig  # its runtime loads with the first dynamic-MIG plan
from gpuslice.sharing.listeners import Listener

if TYPE_CHECKING:
    from gpuslice.sharing.dynamic import DynamicMig


class DynamicAllocator(StaticAllocator):
    """A resource with dynamic-MIG placements (fixed-layout MIG devices in it are served as usual).

    The listing adds the placements that held instances block to the unhealthy set, and every geometry
    change is a listing change. Allocate validates every container, then claims the placements (create +
    persist), then answers with the MIG devices just created; any failure after the claim frees them.
    """

    def __init__(
        self,
        resource: Resource,
        health: HealthStore,
        dynamic: DynamicMig,
        options: AllocateOptions | None = None,
        whole_gpu_rule: WholeGpuRule | None = None,
    ) -> None:
        super().__init__(resource, health, options, whole_gpu_rule)
        self.dynamic = dynamic

    def unhealthy_now(self) -> frozenset[str]:
        """Unhealthy hardware plus the placements that held instances block."""
        return super().unhealthy_now() | self.dynamic.geometry.unavailable(self.resource.name)

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        remove_health = super().add_listener(listener)
        remove_geometry = self.dynamic.geometry.add_listener(listener)
        self._removers.append(remove_geometry)

        def remove() -> None:
            remove_health()
            remove_geometry()

        return remove

    @property
    def repeatable_answers(self) -> bool:
        """False: every Allocate claims (creates) the MIG devices it answers with."""
        return False

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> tuple[str, ...]:
        """Devices that already exist first (nothing to create, no slices newly taken), then placements."""
        geometry = self.dynamic.geometry
        available = list(dict.fromkeys(available))
        must = list(dict.fromkeys(must_include))
        fixed = [i for i in available if not geometry.is_dynamic(i)]
        fixed_must = [i for i in must if not geometry.is_dynamic(i)]
        chosen: list[str] = []
        if fixed:
            try:
                chosen = list(preferred_allocation(self.resource, fixed, fixed_must, min(size, len(fixed))))
            except AllocationError:
                chosen = []
        slots = [i for i in available if geometry.is_dynamic(i)]
        slot_must = [i for i in must if geometry.is_dynamic(i)]
        return (*chosen, *geometry.preferred(slots, slot_must, size - len(chosen)))

    def allocate(self, requests: Sequence[Sequence[str]]) -> AllocationAnswer:
        name = self.resource.name
        if not requests:
            raise EmptyRequest(name)
        unhealthy = self._health.unhealthy_ids(self.resource)
        validated = [validate_request(self.resource, ids, unhealthy) for ids in requests]  # the only check
        # A repeated ID counts once (validate_request's rule), so one slot is claimed once.
        geometry = self.dynamic.geometry
        wanted = list(dict.fromkeys(d.id for devices in validated for d in devices if geometry.is_dynamic(d.id)))
        try:
            created = self.dynamic.claim(wanted) if wanted else {}
        except dynamic_mig.SlotUnavailable as exc:
            raise PlacementUnavailable(name, exc.slot_id, exc.reason) from exc
        except dynamic_mig.ClaimError as exc:
            raise AllocationFailed(str(exc)) from exc
        try:
            resource = self._with_instances(created)
            by_id = resource.by_id
            options = self.options
            return AllocationAnswer(
                tuple(container_answer(resource, tuple(by_id[d.id] for d in devices), options) for devices in validated)
            )
        except Exception:  # never keep a device nobody got
            self.dynamic.free(h for i in created if (h := geometry.holding(i)) is not None)
            raise

    def _with_instances(self, created: dict[str, MigInstance]) -> Resource:
        """This resource with each claimed placement standing for the MIG device just created on it."""
        if not created:
            return self.resource
        devices = tuple(
            replace(d, physical_id=created[d.id].uuid, mig=created[d.id]) if d.id in created else d
            for d in self.resource.devices
        )
        return replace(self.resource, devices=devices)
