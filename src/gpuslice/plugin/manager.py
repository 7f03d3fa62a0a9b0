"""Runs one server per advertised resource and registers them; the seam for restarts and health."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from gpuslice.allocation import AllocateOptions, Allocator, StaticAllocator, WholeGpuRule
from gpuslice.plugin.server import DEFAULT_WORKERS, ResourceServer
from gpuslice.plugin.service import PluginObserver, ResourceService
from gpuslice.sharing import HealthChange, HealthStore, Resource

log = logging.getLogger("gpuslice.plugin")


# Builds the Allocator of one resource from (resource, health, options, whole_gpu_rule), in that order.
AllocatorFactory = Callable[[Resource, HealthStore, AllocateOptions | None, WholeGpuRule | None], Allocator]


class PluginExtension(Protocol):
    """Something that lives as long as the plugin (dynamic MIG, say) and may build some allocators.

    `start()` runs before the first server starts, `stop()` after the last one stopped; a kubelet
    restart (`reregister`) or a reload (`update`) touches neither. `allocator_for` answers the
    resources it serves and None for the others (the next extension, then the manager's factory, build
    those).
    """

    def start(self) -> object: ...

    def stop(self) -> None: ...

    def allocator_for(
        self,
        resource: Resource,
        health: HealthStore,
        options: AllocateOptions | None,
        whole_gpu_rule: WholeGpuRule | None,
    ) -> Allocator | None: ...


class PluginManager:
    """The device plugin for one node: a ResourceServer per resource, all registered with one kubelet.

    `kubelet_socket=None` serves without registering (NVIDIA's empty --kubelet-socket); sockets then go
    to `socket_dir`. Each resource's allocator comes from the first of `extensions` that serves it, else
    from `allocator_factory` (StaticAllocator by default). The kubelet watcher calls `reregister()`
    after a kubelet restart and the health loop `set_health()`; both are safe from any thread.
    """

    def __init__(
        self,
        resources: Sequence[Resource],
        health: HealthStore,
        kubelet_socket: str | Path | None,
        options: AllocateOptions | None = None,
        whole_gpu_rule: WholeGpuRule | None = None,
        socket_dir: str | Path | None = None,
        observer: PluginObserver | None = None,
        workers: int = DEFAULT_WORKERS,
        extensions: Sequence[PluginExtension] = (),
        allocator_factory: AllocatorFactory = StaticAllocator,
    ) -> None:
        self.resources = tuple(resources)
        self.health = health
        self.kubelet_socket = Path(kubelet_socket) if kubelet_socket else None
        if socket_dir is None and self.kubelet_socket is None:
            raise ValueError("give a kubelet socket or a socket directory")
        self.socket_dir = Path(socket_dir) if socket_dir is not None else self.kubelet_socket.parent  # type: ignore[union-attr]
        self._options = options
        self._whole_gpu_rule = whole_gpu_rule
        self._observer = observer
        self._workers = workers
        self._extensions = tuple(extensions)
        self._allocator_factory = allocator_factory
        self._extensions_started: list[PluginExtension] = []
        self._servers: list[ResourceServer] = []
        self._lock = threading.RLock()

    @property
    def extensions(self) -> tuple[PluginExtension, ...]:
        return self._extensions

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
            for extension in self._extensions:
                if extension not in self._extensions_started:
                    extension.start()
                    self._extensions_started.append(extension)
            try:
                for resource in self.resources:
                    self._servers.append(self._serve(resource))
                self._register_all()
            except BaseException:
                self._stop_servers()
                raise
            if not self.resources:
                log.warning("no devices to advertise; nothing is served")

    def _serve(self, resource: Resource) -> ResourceServer:
        allocator = self._allocator(resource)
        service = ResourceService(allocator, self._observer)
        server = ResourceServer(service, self.socket_dir, self._workers)
        server.start()
        return server

    def _allocator(self, resource: Resource) -> Allocator:
        for extension in self._extensions:
            allocator = extension.allocator_for(resource, self.health, self._options, self._whole_gpu_rule)
            if allocator is not None:
                return allocator
        return self._allocator_factory(resource, self.health, self._options, self._whole_gpu_rule)

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

    def update(
        self,
        resources: Sequence[Resource],
        options: AllocateOptions | None = None,
        settings_changed: bool = False,
    ) -> tuple[str, ...]:
        """Switch to a new set of resources (a config reload); returns the names served or stopped anew.

        A resource whose devices and sharing are unchanged keeps its server, its open ListAndWatch
        stream and its registration; a changed or new one gets a fresh server and registers; one that
        is gone is stopped (the kubelet sees its stream end). `options`, when given, apply at once to
        every server, kept ones included; `settings_changed` is accepted for callers that track it (a
        new Allocate pipeline never needs a re-registration). Before start() this only records them.
        """
        del settings_changed
        new = tuple(resources)
        with self._lock:
            if options is not None:
                self._options = options
            old_names = {resource.name: resource for resource in self.resources}
            self.resources = new
            if not self._servers:
                return tuple(r.name for r in new if old_names.get(r.name) != r) + tuple(
                    name for name in old_names if name not in {r.name for r in new}
                )
            running = {server.resource_name: server for server in self._servers}
            servers: list[ResourceServer] = []
            changed: list[str] = []
            try:
                for resource in new:
                    server = running.pop(resource.name, None)
                    if server is not None and server.service.resource == resource:
                        if self._options is not None:
                            server.service.set_options(self._options)
                        servers.append(server)
                        continue
                    if server is not None:
                        server.stop()
                    changed.append(resource.name)
                    fresh = self._serve(resource)
                    servers.append(fresh)
                    if self.kubelet_socket is not None:
                        fresh.register(self.kubelet_socket)
                for name, server in running.items():  # resources the new set no longer has
                    server.stop()
                    changed.append(name)
            finally:
                # After a failure part-way, whatever still serves stays tracked, so stop() cleans it up.
                self._servers = servers + [server for server in running.values() if server.serving]
            return tuple(changed)

    def stop(self) -> None:
        """Stop every server and remove the sockets we created, then the extensions (last started first).
        Idempotent."""
        with self._lock:
            self._stop_servers()
            started, self._extensions_started = self._extensions_started, []
            for extension in reversed(started):
                try:
                    extension.stop()
                except Exception:  # one failing extension must not keep the others running
                    log.exception("stopping extension %r failed", extension)

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
