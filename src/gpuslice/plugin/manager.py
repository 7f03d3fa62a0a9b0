"""Runs one server per advertised resource and registers them; the seam for restarts and health."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from gpuslice.allocation import AllocateOptions, WholeGpuRule
from gpuslice.plugin.server import DEFAULT_WORKERS, ResourceServer
from gpuslice.plugin.service import PluginObserver, ResourceService
from gpuslice.sharing import HealthChange, HealthStore, Resource, SharingPlan

log = logging.getLogger("gpuslice.plugin")


class PluginManager:
    """The device plugin for one node: a ResourceServer per resource, all registered with one kubelet.

    `kubelet_socket=None` serves without registering (NVIDIA's empty --kubelet-socket); sockets then go
    to `socket_dir`. Issue 4's lifecycle pieces call `reregister()` after a kubelet restart and
    `set_health()` from the health loop; both are safe from any thread.
    """

    def __init__(
        self,
        resources: SharingPlan | Sequence[Resource],
        health: HealthStore,
        kubelet_socket: str | Path | None,
        options: AllocateOptions | None = None,
        whole_gpu_rule: WholeGpuRule | None = None,
        socket_dir: str | Path | None = None,
        observer: PluginObserver | None = None,
        workers: int = DEFAULT_WORKERS,
    ) -> None:
        self.resources = tuple(resources.resources if isinstance(resources, SharingPlan) else resources)
        self.health = health
        self.kubelet_socket = Path(kubelet_socket) if kubelet_socket else None
        if socket_dir is None and self.kubelet_socket is None:
            raise ValueError("give a kubelet socket or a socket directory")
        self.socket_dir = Path(socket_dir) if socket_dir is not None else self.kubelet_socket.parent  # type: ignore[union-attr]
        self._options = options
        self._whole_gpu_rule = whole_gpu_rule
        self._observer = observer
        self._workers = workers
        self._servers: list[ResourceServer] = []
        self._lock = threading.RLock()

    @property
    def servers(self) -> tuple[ResourceServer, ...]:
        with self._lock:
            return tuple(self._servers)

    @property
    def socket_paths(self) -> tuple[Path, ...]:
        return tuple(server.socket_path for server in self.servers)

    @property
    def running(self) -> bool:
        return bool(self.servers)

    def start(self) -> None:
        """Serve every resource, then register each; on any failure nothing is left running."""
        with self._lock:
            if self._servers:
                return
            try:
                for resource in self.resources:
                    service = ResourceService(
                        resource, self.health, self._options, self._whole_gpu_rule, self._observer
                    )
                    server = ResourceServer(service, self.socket_dir, self._workers)
                    self._servers.append(server)
                    server.start()
                self._register_all()
            except BaseException:
                self._stop_servers()
                raise
            if not self.resources:
                log.warning("no devices to advertise; nothing is served")

    def _register_all(self) -> None:
        if self.kubelet_socket is None:
            log.info("no kubelet socket given: serving without registering")
            return
        for server in self._servers:
            server.register(self.kubelet_socket)

    def reregister(self) -> None:
        """After a kubelet restart (its sockets wiped): serve on fresh sockets and register again."""
        with self._lock:
            self._stop_servers()
            self.start()

    def stop(self) -> None:
        """Stop every server and remove the sockets we created. Idempotent."""
        with self._lock:
            self._stop_servers()

    def _stop_servers(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            try:
                server.stop()
            except Exception:  # one bad server must not keep the others' sockets alive
                log.exception("stopping %s failed", server.resource_name)

    def set_health(self, device: str, healthy: bool, reason: str = "") -> HealthChange | None:
        """Mark a GPU UUID, MIG UUID or advertised ID (un)healthy; streams resend their lists at once."""
        if healthy:
            return self.health.mark_healthy(device, reason or "recovered")
        return self.health.mark_unhealthy(device, reason or "marked unhealthy")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
