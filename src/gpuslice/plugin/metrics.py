"""The plugin process's metrics in Prometheus' format (node.metrics_server serves them on /metrics)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from gpuslice.allocation import AllocationError
from gpuslice.node.histogram import Histogram

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric


PREFIX = "gpuslice_plugin"
# Allocate is a pure function behind one gRPC hop: sub-millisecond normally, seconds only when something is wrong.
ALLOCATE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

DeviceCounts = Callable[[], Mapping[str, tuple[int, int]]]  # resource -> (advertised, healthy)
StreamCounts = Callable[[], Mapping[str, int]]  # resource -> open ListAndWatch streams
# name, help, label names: the counters, in the order they are exported
_COUNTERS = (
    ("registrations", "Successful registrations with the kubelet", ("resource",)),
    ("registration_failures", "Registration attempts that failed (all resources)", ()),
    ("kubelet_restarts", "Kubelet restarts noticed (re-registrations after the first)", ()),
    ("allocations", "Container allocations answered by Allocate", ("resource",)),
    ("allocation_errors", "Allocate requests refused", ("resource", "error")),
    (
        "health_events",
        "Health events by Xid and what they did (marked_unhealthy, ignored, unknown_device, checks_disabled)",
        ("xid", "outcome"),
    ),
    ("health_recoveries", "Devices returned to Healthy by a probe", ()),
)


class PluginMetrics:
    """Every metric of one plugin process. It is the plugin's PluginObserver (allocations) and
    HealthObserver (events), and the lifecycle reports registrations to it.

    Values are kept in plain Python (a lock, dicts and ints): a plugin started without a metrics port never
    loads the Prometheus client (about a tenth of its start). `registry` (made on first use: the metrics
    server, the per-node config watcher) exports them at every scrape, in Prometheus' usual shape
    (`_total` and `_created` samples for counters, cumulative buckets for the latency histogram), and
    other metrics may be registered there too.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[str, ...], list[float]]] = {name: {} for name, _, _ in _COUNTERS}
        for name, _, labels in _COUNTERS:
            if not labels:  # an unlabelled counter exists (at 0) from the start, as Prometheus' own does
                self._counters[name][()] = [0, time.time()]
        self._latency: dict[str, Histogram] = {}
        self._device_counts: DeviceCounts | None = None
        self._stream_counts: StreamCounts | None = None
        self._registry: CollectorRegistry | None = None

    def _count(self, name: str, labels: tuple[str, ...], amount: float = 1) -> None:
        with self._lock:
            cell = self._counters[name].get(labels)
            if cell is None:
                self._counters[name][labels] = [amount, time.time()]
            else:
                cell[0] += amount

    @property
    def registry(self) -> CollectorRegistry:
        """A Prometheus registry that exports these metrics (the client is imported here, on first use)."""
        if self._registry is None:
            from prometheus_client import CollectorRegistry

            from gpuslice.node.metrics_server import LiveCollector

            registry = CollectorRegistry(auto_describe=True)
            registry.register(LiveCollector(self))
            self._registry = registry
        return self._registry

    def watch_devices(self, counts: DeviceCounts) -> None:
        """Export advertised/healthy device gauges computed by `counts` at every scrape."""
        self._device_counts = counts

    def watch_streams(self, counts: StreamCounts) -> None:
        """Export the open-stream gauge from `counts` at every scrape (the servers' own count, not a copy)."""
        self._stream_counts = counts

    # PluginObserver -----------------------------------------------------------------------------

    def allocated(self, resource: str, containers: int, seconds: float) -> None:
        with self._lock:
            cell = self._counters["allocations"].get((resource,))
            if cell is None:
                self._counters["allocations"][(resource,)] = [containers, time.time()]
            else:
                cell[0] += containers
            histogram = self._latency.get(resource)
            if histogram is None:
                histogram = self._latency[resource] = Histogram(ALLOCATE_BUCKETS)
            histogram.observe(seconds)

    def allocation_failed(self, resource: str, error: AllocationError) -> None:
        self._count("allocation_errors", (resource, type(error).__name__))

    # HealthObserver ------------------------------------------------------------------------------

    def health_event(self, xid: int, outcome: str) -> None:
        self._count("health_events", (str(xid), outcome))

    def device_recovered(self, physical_id: str) -> None:
        self._count("health_recoveries", ())

    # Lifecycle -----------------------------------------------------------------------------------

    def registered(self, resources: Iterable[str]) -> None:
        for resource in resources:
            self._count("registrations", (resource,))

    def registration_failed(self) -> None:
        self._count("registration_failures", ())

    def kubelet_restarted(self) -> None:
        self._count("kubelet_restarts", ())

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))

    def families(self) -> list[Metric]:
        """The metrics as Prometheus metric families, as they are now (what a scrape reads)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        with self._lock:
            counters = {
                name: {labels: list(cell) for labels, cell in cells.items()} for name, cells in self._counters.items()
            }
            latency = {resource: h.snapshot() for resource, h in self._latency.items()}
        found: list[Metric] = []
        for name, text, labels in _COUNTERS:
            family = CounterMetricFamily(f"{PREFIX}_{name}", text, labels=list(labels))
            for values, (value, created) in sorted(counters[name].items()):
                family.add_metric(list(values), value, created=created)
            found.append(family)
            if name == "allocation_errors":  # the latency histogram sits here in the exposition, as before
                histogram = HistogramMetricFamily(f"{PREFIX}_allocate_seconds", "Allocate latency", labels=["resource"])
                for resource, counts in sorted(latency.items()):
                    histogram.add_metric([resource], counts.cumulative(), counts.total)
                    histogram.add_sample(f"{PREFIX}_allocate_seconds_created", {"resource": resource}, counts.created)
                found.append(histogram)
        gauge = GaugeMetricFamily(f"{PREFIX}_list_and_watch_streams", "Open ListAndWatch streams", labels=["resource"])
        streams = self._stream_counts() if self._stream_counts is not None else {}
        for resource, open_streams in sorted(streams.items()):
            gauge.add_metric([resource], open_streams)
        found.append(gauge)
        if self._device_counts is not None:
            advertised = GaugeMetricFamily(
                f"{PREFIX}_advertised_devices", "Devices advertised to the kubelet, per resource", labels=["resource"]
            )
            healthy = GaugeMetricFamily(
                f"{PREFIX}_healthy_devices", "Advertised devices that are Healthy, per resource", labels=["resource"]
            )
            for resource, (total, ok) in sorted(self._device_counts().items()):
                advertised.add_metric([resource], total)
                healthy.add_metric([resource], ok)
            found += [advertised, healthy]
        return found
