"""Prometheus metrics of one plugin process, and the HTTP server for /metrics, /healthz and /readyz."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gpuslice.allocation import AllocationError
from gpuslice.plugin.http_server import BoundedHttpServer, HttpLimits

log = logging.getLogger("gpuslice.plugin.metrics")

PREFIX = "gpuslice_plugin"
# Allocate is a pure function behind one gRPC hop: sub-millisecond normally, seconds only when something is wrong.
ALLOCATE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

DeviceCounts = Callable[[], Mapping[str, tuple[int, int]]]  # resource -> (advertised, healthy)
Probe = Callable[[], tuple[bool, str]]  # (ok, why)
_TEXT = "text/plain; charset=utf-8"


class _DeviceCollector(Collector):
    """Advertised and healthy devices per resource, read at scrape time so they are never stale."""

    def __init__(self, counts: DeviceCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterable[GaugeMetricFamily]:
        advertised = GaugeMetricFamily(
            f"{PREFIX}_advertised_devices", "Devices advertised to the kubelet, per resource", labels=["resource"]
        )
        healthy = GaugeMetricFamily(
            f"{PREFIX}_healthy_devices", "Advertised devices that are Healthy, per resource", labels=["resource"]
        )
        for resource, (total, ok) in sorted(self._counts().items()):
            advertised.add_metric([resource], total)
            healthy.add_metric([resource], ok)
        yield advertised
        yield healthy


class PluginMetrics:
    """Every metric of one plugin process, in its own registry (so tests and several plugins never collide).

    It is the plugin's PluginObserver (allocations, streams) and HealthObserver (events), and the
    lifecycle reports registrations to it.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.registrations = Counter(
            f"{PREFIX}_registrations", "Successful registrations with the kubelet", ["resource"], registry=r
        )
        self.registration_failures = Counter(
            f"{PREFIX}_registration_failures", "Registration attempts that failed (all resources)", registry=r
        )
        self.kubelet_restarts = Counter(
            f"{PREFIX}_kubelet_restarts", "Kubelet restarts noticed (re-registrations after the first)", registry=r
        )
        self.allocations = Counter(
            f"{PREFIX}_allocations", "Container allocations answered by Allocate", ["resource"], registry=r
        )
        self.allocation_errors = Counter(
            f"{PREFIX}_allocation_errors", "Allocate requests refused", ["resource", "error"], registry=r
        )
        self._allocate_children: dict[str, tuple[Any, Any]] = {}
        self.allocate_seconds = Histogram(
            f"{PREFIX}_allocate_seconds", "Allocate latency", ["resource"], buckets=ALLOCATE_BUCKETS, registry=r
        )
        self.health_events = Counter(
            f"{PREFIX}_health_events",
            "Health events by Xid and what they did (marked_unhealthy, ignored, unknown_device, checks_disabled)",
            ["xid", "outcome"],
            registry=r,
        )
        self.recoveries = Counter(f"{PREFIX}_health_recoveries", "Devices returned to Healthy by a probe", registry=r)
        self.streams = Gauge(f"{PREFIX}_list_and_watch_streams", "Open ListAndWatch streams", ["resource"], registry=r)
        self._devices_registered = False

    def watch_devices(self, counts: DeviceCounts) -> None:
        """Export advertised/healthy device gauges computed by `counts` at every scrape (once per registry)."""
        if not self._devices_registered:
            self.registry.register(_DeviceCollector(counts))
            self._devices_registered = True

    # PluginObserver -----------------------------------------------------------------------------

    def allocated(self, resource: str, containers: int, seconds: float) -> None:
        children = self._allocate_children.get(resource)
        if children is None:  # labels() takes a lock and builds a key: once per resource, not per Allocate
            children = (self.allocations.labels(resource), self.allocate_seconds.labels(resource))
            self._allocate_children[resource] = children
        children[0].inc(containers)
        children[1].observe(seconds)

    def allocation_failed(self, resource: str, error: AllocationError) -> None:
        self.allocation_errors.labels(resource, type(error).__name__).inc()

    def stream_opened(self, resource: str) -> None:
        self.streams.labels(resource).inc()

    def stream_closed(self, resource: str) -> None:
        self.streams.labels(resource).dec()

    # HealthObserver ------------------------------------------------------------------------------

    def health_event(self, xid: int, outcome: str) -> None:
        self.health_events.labels(str(xid), outcome).inc()

    def device_recovered(self, physical_id: str) -> None:
        self.recoveries.inc()

    # Lifecycle -----------------------------------------------------------------------------------

    def registered(self, resources: Iterable[str]) -> None:
        for resource in resources:
            self.registrations.labels(resource).inc()

    def registration_failed(self) -> None:
        self.registration_failures.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsServer:
    """HTTP on `address:port` (port 0 picks a free one): /metrics, /healthz (alive), /readyz (registered).

    Served by plugin.http_server: bounded connections, per-connection timeouts, a fixed pool of handlers.
    """

    def __init__(
        self,
        metrics: PluginMetrics,
        port: int,
        address: str = "",
        liveness: Probe | None = None,
        readiness: Probe | None = None,
        limits: HttpLimits | None = None,
    ) -> None:
        self.metrics = metrics
        self._liveness = liveness or (lambda: (True, "ok"))
        self._readiness = readiness or (lambda: (True, "ok"))
        self.http = BoundedHttpServer(address, port, self._route, limits, name="gpuslice-metrics")

    @property
    def port(self) -> int:
        return self.http.port

    def start(self) -> None:
        self.http.start()
        log.info("serving /metrics, /healthz and /readyz on port %d", self.port)

    def stop(self) -> None:
        self.http.stop()

    def _route(self, path: str) -> tuple[int, bytes, str]:
        if path == "/metrics":
            return 200, self.metrics.render(), CONTENT_TYPE_LATEST
        if path in ("/healthz", "/readyz"):
            ok, why = (self._liveness if path == "/healthz" else self._readiness)()
            return (200 if ok else 503), (why + "\n").encode(), _TEXT
        return 404, b"not found: try /metrics, /healthz or /readyz\n", _TEXT
