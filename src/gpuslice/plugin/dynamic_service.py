"""The DevicePlugin service of a dynamic-MIG resource: blocked placements go Unhealthy, Allocate creates the device."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

import grpc

from gpuslice.allocation import (
    AllocateOptions,
    AllocationError,
    EmptyRequest,
    WholeGpuRule,
    allocate,
    preferred_allocation,
    validate_request,
)
from gpuslice.gpu import MigInstance
from gpuslice.plugin.convert import allocate_response, device_list, requested_ids
from gpuslice.plugin.dynamic_mig import ClaimError, DynamicMig
from gpuslice.plugin.service import PluginObserver, ResourceService
from gpuslice.sharing import HealthStore, Resource
from gpuslice.sharing.dynamic_mig import SlotUnavailable
from gpuslice.wire import deviceplugin_pb2

log = logging.getLogger("gpuslice.plugin.dynamic_mig")


class PlacementUnavailable(AllocationError):
    """A placement that overlaps (or is) a held instance, or whose profile cap is reached."""

    def __init__(self, resource: str, device: str, reason: str) -> None:
        super().__init__(resource, f"device {device} is not available: {reason}", device)


class DynamicResourceService(ResourceService):
    """A ResourceService whose slot devices are carved on Allocate through `DynamicMig`.

    ListAndWatch adds the placements blocked by held instances to the unhealthy set and is woken by
    every geometry change. Fixed-layout MIG devices in the same resource are served as usual.
    """

    def __init__(
        self,
        resource: Resource,
        health: HealthStore,
        dynamic: DynamicMig,
        options: AllocateOptions | None = None,
        whole_gpu_rule: WholeGpuRule | None = None,
        observer: PluginObserver | None = None,
    ) -> None:
        super().__init__(resource, health, options, whole_gpu_rule, observer)
        self.dynamic = dynamic
        self._remove_geometry_listener = dynamic.geometry.add_listener(self.notify_changed)

    def close(self) -> None:
        self._remove_geometry_listener()
        super().close()

    def unhealthy_now(self) -> frozenset[str]:
        """Unhealthy hardware plus the placements that held instances block."""
        return self._health.unhealthy_ids(self.resource) | self.dynamic.geometry.unavailable(self.resource.name)

    def current_list(self) -> deviceplugin_pb2.ListAndWatchResponse:
        return device_list(self.resource, self.unhealthy_now())

    def GetPreferredAllocation(self, request: deviceplugin_pb2.PreferredAllocationRequest, context: Any) -> Any:  # noqa: N802
        geometry = self.dynamic.geometry
        responses = []
        for container in request.container_requests:
            available = list(dict.fromkeys(container.available_deviceIDs))
            must = list(dict.fromkeys(container.must_include_deviceIDs))
            size = container.allocation_size
            fixed = [i for i in available if not geometry.is_dynamic(i)]
            fixed_must = [i for i in must if not geometry.is_dynamic(i)]
            chosen: list[str] = []
            if fixed:  # devices that already exist first: nothing to create, no slices newly taken
                try:
                    chosen = list(preferred_allocation(self.resource, fixed, fixed_must, min(size, len(fixed))))
                except AllocationError:
                    chosen = []
            slots = [i for i in available if geometry.is_dynamic(i)]
            slot_must = [i for i in must if geometry.is_dynamic(i)]
            chosen += geometry.preferred(slots, slot_must, size - len(chosen))
            responses.append(deviceplugin_pb2.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return deviceplugin_pb2.PreferredAllocationResponse(container_responses=responses)

    def Allocate(self, request: deviceplugin_pb2.AllocateRequest, context: Any) -> Any:  # noqa: N802
        started = time.perf_counter()
        requests = requested_ids(request)
        name = self.resource.name
        try:
            if not requests:
                raise EmptyRequest(name)
            unhealthy = self._health.unhealthy_ids(self.resource)
            for position, ids in enumerate(requests):
                validate_request(self.resource, ids, unhealthy, position)
            # A repeated ID counts once (allocation.validate_request's rule).
            wanted = list(dict.fromkeys(i for ids in requests for i in ids if self.dynamic.geometry.is_dynamic(i)))
            try:
                created = self.dynamic.claim(wanted) if wanted else {}
            except SlotUnavailable as exc:
                raise PlacementUnavailable(name, exc.slot_id, exc.reason) from exc
        except AllocationError as exc:
            log.warning("Allocate for %s refused: %s", name, exc)
            self._observer.allocation_failed(name, exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except ClaimError as exc:
            log.error("Allocate for %s failed: %s", name, exc)
            context.abort(grpc.StatusCode.INTERNAL, str(exc))
        try:
            answer = allocate(self._with_instances(created), requests, frozenset(), self._options)
        except AllocationError as exc:  # not expected after validation; never keep a device nobody got
            self.dynamic.free(h for i in created if (h := self.dynamic.geometry.holding(i)) is not None)
            self._observer.allocation_failed(name, exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        response = allocate_response(answer)
        self._observer.allocated(name, requests, time.perf_counter() - started)
        return response

    def _with_instances(self, created: dict[str, MigInstance]) -> Resource:
        """This resource with each claimed placement standing for the MIG device just created on it."""
        if not created:
            return self.resource
        devices = tuple(
            replace(d, physical_id=created[d.id].uuid, mig=created[d.id]) if d.id in created else d
            for d in self.resource.devices
        )
        return replace(self.resource, devices=devices)
