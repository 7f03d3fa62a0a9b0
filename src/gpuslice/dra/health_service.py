"""v1alpha1.DRAResourceHealth: the kubelet streams our devices' health (it shows in the pods' status)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuslice.dra.devices import DraDevice
from gpuslice.sharing import HealthStore
from gpuslice.wire import drahealth_grpc, drahealth_pb2

_RECHECK_S = 1.0  # how often a quiet stream checks that its client is still there


@dataclass(eq=False)
class ResourceHealthService:
    """NodeWatchResources: the complete list of the pool's devices first, then again after every change."""

    pool: str
    devices: Sequence[DraDevice]
    store: HealthStore
    clock: Callable[[], float] = time.time
    stopping: threading.Event = field(default_factory=threading.Event)

    def _snapshot(self) -> list[tuple[str, bool]]:
        return [(device.name, self.store.is_healthy(device.advertised)) for device in self.devices]

    def _message(self, snapshot: list[tuple[str, bool]]) -> Any:
        now = int(self.clock())
        healthy, unhealthy = drahealth_pb2.HEALTHY, drahealth_pb2.UNHEALTHY
        return drahealth_pb2.NodeWatchResourcesResponse(
            devices=[
                drahealth_pb2.DeviceHealth(
                    device=drahealth_pb2.DeviceIdentifier(pool_name=self.pool, device_name=name),
                    health=healthy if ok else unhealthy,
                    last_updated_time=now,
                )
                for name, ok in snapshot
            ]
        )

    def NodeWatchResources(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802 (gRPC method name)
        changed = threading.Event()
        remove = self.store.add_listener(changed.set)
        try:
            last = None
            while context.is_active() and not self.stopping.is_set():
                snapshot = self._snapshot()
                if snapshot != last:
                    yield self._message(snapshot)
                    last = snapshot
                changed.wait(_RECHECK_S)
                changed.clear()
        finally:
            remove()


def add_health_service(server: Any, service: ResourceHealthService) -> None:
    drahealth_grpc.add_DRAResourceHealthServicer_to_server(service, server)  # type: ignore[no-untyped-call]
