"""A running plugin process: manager, kubelet watch, health loop and metrics, started and stopped in order."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuslice.health.loop import HealthLoop
from gpuslice.plugin.kubelet_watch import KUBELET_POLL_S, KubeletWatcher
from gpuslice.plugin.manager import PluginManager
from gpuslice.plugin.metrics import PluginMetrics
from gpuslice.plugin.server import PluginStartError
from gpuslice.plugin.serving_probe import probe_serving

if TYPE_CHECKING:
    from gpuslice.node.metrics_server import MetricsServer

log = logging.getLogger("gpuslice.plugin")

ShutdownHook = Callable[[], None]


def device_counts(manager: PluginManager) -> dict[str, tuple[int, int]]:
    """Resource -> (advertised, healthy) devices, as the next ListAndWatch message would say.

    A served resource counts what its allocator lists as Unhealthy (dynamic MIG adds the placements held
    instances block); one not served (yet) counts its unhealthy hardware.
    """
    services = {server.resource_name: server.service for server in manager.servers}
    counts: dict[str, tuple[int, int]] = {}
    for resource in manager.resources:
        service = services.get(resource.name)
        if service is not None and service.resource == resource:
            unhealthy = service.allocator.unhealthy_now()
        else:
            unhealthy = manager.health.unhealthy_ids(resource)
        counts[resource.name] = (len(resource.devices), len(resource.devices) - len(unhealthy))
    return counts


class PluginRuntime:
    """Owns everything one `gpuslice plugin` process runs.

    start(): metrics server (so probes answer from the first second), health loop (primed before any
    registration, so no event after it is missed), then serving and registering through the kubelet
    watcher, which keeps retrying with backoff while the kubelet is absent. stop(): the reverse, then
    the shutdown hooks (MPS daemons and the like) last-added first. Both are idempotent.
    """

    def __init__(
        self,
        manager: PluginManager,
        *,
        health_loop: HealthLoop | None = None,
        metrics: PluginMetrics | None = None,
        metrics_port: int | None = None,
        metrics_address: str = "",
        poll_interval_s: float = KUBELET_POLL_S,
    ) -> None:
        self.manager = manager
        self.health_loop = health_loop
        self.metrics = metrics or PluginMetrics()
        self.metrics.watch_devices(lambda: device_counts(self.manager))
        self.metrics.watch_streams(lambda: {s.resource_name: s.service.open_streams for s in self.manager.servers})
        self.metrics_server: MetricsServer | None = None
        if metrics_port is not None:
            # the HTTP server's modules load only with --metrics-port (a start without one needs none of them)
            from gpuslice.node.metrics_server import MetricsServer

            try:
                self.metrics_server = MetricsServer(self.metrics, metrics_port, metrics_address, self.alive, self.ready)
            except OSError as exc:
                raise PluginStartError(f"--metrics-port {metrics_port}: cannot listen: {exc.strerror or exc}") from exc
        self.watcher = (
            KubeletWatcher(
                manager.kubelet_socket,
                manager,
                poll_interval_s=poll_interval_s,
                on_registered=self._registered,
                on_failure=lambda exc: self.metrics.registration_failed(),
            )
            if manager.kubelet_socket is not None
            else None
        )
        self._hooks: list[ShutdownHook] = []
        self._liveness: list[tuple[str, Callable[[], bool]]] = []
        self._lock = threading.Lock()
        self._started = False
        self._stopped = False

    def add_shutdown_hook(self, hook: ShutdownHook) -> None:
        """Run `hook` at stop(), after the servers are down (e.g. stop MPS control daemons)."""
        with self._lock:
            self._hooks.append(hook)

    def add_liveness_check(self, name: str, check: Callable[[], bool]) -> None:
        """/healthz turns red while `check()` is False (a background thread, such as the node-config
        watcher, that should run and does not)."""
        with self._lock:
            self._liveness.append((name, check))

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        if self.metrics_server is not None:
            self.metrics_server.start()
        if self.health_loop is not None:
            self.health_loop.start()
        if self.watcher is not None:
            self.watcher.start()
        else:
            self.manager.start()

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            hooks, self._hooks = list(self._hooks), []
        if self.watcher is not None:
            self.watcher.stop()
        if self.health_loop is not None:
            self.health_loop.stop()
        self.manager.stop()
        for hook in reversed(hooks):
            try:
                hook()
            except Exception:  # one failing hook must not keep the others (or the exit) from happening
                log.exception("shutdown hook %r failed", hook)
        if self.metrics_server is not None:
            self.metrics_server.stop()

    def ready(self) -> tuple[bool, str]:
        """/readyz: every resource is served and registered with the kubelet."""
        if self._stopped:
            return False, "shutting down"
        if self.watcher is not None and not self.watcher.registered:
            return False, f"not registered with the kubelet at {self.manager.kubelet_socket}"
        if self.resources_expected() and not self.manager.running:
            return False, "not serving"
        return True, "ok"

    def alive(self) -> tuple[bool, str]:
        """/healthz: the background threads that must run are running, and every gRPC server answers."""
        if self.health_loop is not None and not self.health_loop.alive:
            return False, "health loop stopped"
        for name, check in list(self._liveness):
            if not check():
                return False, f"{name} stopped"
        return probe_serving(server.socket_path for server in self.manager.servers if server.serving)

    def resources_expected(self) -> bool:
        return bool(self.manager.resources)

    def _registered(self) -> None:
        names = [resource.name for resource in self.manager.resources]
        self.metrics.registered(names)
        if self.watcher is not None and self.watcher.registrations > 1:
            self.metrics.kubelet_restarted()
