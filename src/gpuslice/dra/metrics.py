"""`gpuslice dra`'s metrics: prepare/unprepare counts and latency, publishing, the API client's counters."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from gpuslice.dra.claims import ClaimRef
from gpuslice.dra.contract import ClaimDriver, DeviceAnswer
from gpuslice.dra.counters import METRIC_PREFIX
from gpuslice.node.histogram import Histogram
from gpuslice.records import record

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

    from gpuslice.kube.counters import ApiStats

# A prepare is a checkpoint write and a CDI spec in the common case; a MIG instance or an MPS daemon
# takes seconds; the kubelet gives a whole call 45 s.
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_CALLS = f"{METRIC_PREFIX}_claims"
_LATENCY = f"{METRIC_PREFIX}_claim_seconds"


@record
class PluginState:
    """What the kubelet plumbing reports at every scrape."""

    publishes: int  # ResourceSlice publishes that wrote something
    publisher_restarts: int  # dead publishing threads started again
    published_devices: int  # devices offered now (healthy ones)
    registered: bool


class DraMetrics:
    """Every metric of one `gpuslice dra` process; made only when a metrics port is asked for.

    Values are kept in plain Python (a lock, dicts, ints): the metrics port's server answers its probes
    from before the first socket, but the Prometheus client (about 80 modules) and the API client's
    counters load with `registry`, made at the first scrape, after registration. Each scrape exports
    them in the client's usual shape (`_total` and `_created` for counters, cumulative buckets).
    `gpuslice_kube_api_*` are the API client's counters (the same names as the device plugin's);
    `gpuslice_dra_shared_counters` and `gpuslice_dra_guarded_gpus` come from the publisher's counters
    probe (`extra`, asked at each scrape: the publisher is made at start).
    """

    def __init__(self, api_stats: ApiStats | None = None) -> None:
        self._api_stats = api_stats  # None: the process's counters (gpuslice.kube.API_COUNTERS)
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str], list[float]] = {}  # (call, outcome) -> [count, created]
        self._latency: dict[str, Histogram] = {}
        self._registry: CollectorRegistry | None = None
        self._made = threading.Lock()  # apart from _lock: registering the collector reads the values once
        self._state: Callable[[], PluginState] | None = None
        self._extra: Callable[[], CollectorRegistry | None] = lambda: None

    @property
    def registry(self) -> CollectorRegistry:
        """The Prometheus registry of these metrics and the API client's (the client is imported here)."""
        with self._made:
            if self._registry is None:
                from prometheus_client import CollectorRegistry

                from gpuslice.kube.counters import API_COUNTERS
                from gpuslice.kube.metrics import register_api_metrics
                from gpuslice.node.metrics_server import LiveCollector

                registry = CollectorRegistry(auto_describe=True)
                register_api_metrics(registry, self._api_stats if self._api_stats is not None else API_COUNTERS)
                registry.register(LiveCollector(self))
                self._registry = registry
            return self._registry

    def watch(self, state: Callable[[], PluginState], extra: Callable[[], CollectorRegistry | None]) -> None:
        """Export `state()` and the registry `extra()` answers (if any) at every scrape."""
        self._state = state
        self._extra = extra

    def observe(self, call: str, outcome: str, seconds: float) -> None:
        with self._lock:
            cell = self._calls.get((call, outcome))
            if cell is None:
                self._calls[(call, outcome)] = [1, time.time()]
            else:
                cell[0] += 1
            histogram = self._latency.get(call)
            if histogram is None:
                histogram = self._latency[call] = Histogram(CALL_BUCKETS)
            histogram.observe(seconds)

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        extra = self._extra()
        return bytes(generate_latest(self.registry)) + (bytes(generate_latest(extra)) if extra is not None else b"")

    def families(self) -> Iterator[Metric]:
        """The claims' counter and latency histogram and the plumbing's state, as they are now (a scrape)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        with self._lock:
            calls = {labels: list(cell) for labels, cell in self._calls.items()}
            latency = {call: h.snapshot() for call, h in self._latency.items()}
        counter = CounterMetricFamily(
            _CALLS,
            "Claims the kubelet asked to prepare or unprepare, by outcome (ok, error)",
            labels=["call", "outcome"],
        )
        for labels, (count, created) in sorted(calls.items()):
            counter.add_metric(list(labels), count, created=created)
        yield counter
        histogram = HistogramMetricFamily(
            _LATENCY,
            "Time to prepare or unprepare one claim (its claim read is done before, for the whole call at once)",
            labels=["call"],
        )
        for call, counts in sorted(latency.items()):
            histogram.add_metric([call], counts.cumulative(), counts.total)
            histogram.add_sample(f"{_LATENCY}_created", {"call": call}, counts.created)
        yield histogram
        if self._state is None:
            return
        state = self._state()
        yield CounterMetricFamily(
            f"{METRIC_PREFIX}_slice_publishes", "ResourceSlice publishes that changed the pool", state.publishes
        )
        yield CounterMetricFamily(
            f"{METRIC_PREFIX}_publisher_restarts",
            "ResourceSlice publishing threads found dead and started again",
            state.publisher_restarts,
        )
        yield GaugeMetricFamily(
            f"{METRIC_PREFIX}_published_devices",
            "Devices offered in the pool now (healthy ones)",
            state.published_devices,
        )
        yield GaugeMetricFamily(
            f"{METRIC_PREFIX}_registered", "1 while the kubelet has us registered", 1 if state.registered else 0
        )


class MeteredDriver:
    """A ClaimDriver that counts and times every claim of `driver` into `metrics` (and changes nothing else)."""

    def __init__(self, driver: ClaimDriver, metrics: DraMetrics) -> None:
        self.driver = driver
        self.metrics = metrics

    def prepare(self, ref: ClaimRef, budget_s: float) -> Sequence[DeviceAnswer]:
        started = time.monotonic()
        outcome = "error"
        try:
            devices = self.driver.prepare(ref, budget_s)
            outcome = "ok"
            return devices
        finally:
            self.metrics.observe("prepare", outcome, time.monotonic() - started)

    def unprepare(self, ref: ClaimRef, budget_s: float) -> None:
        started = time.monotonic()
        outcome = "error"
        try:
            self.driver.unprepare(ref, budget_s)
            outcome = "ok"
        finally:
            self.metrics.observe("unprepare", outcome, time.monotonic() - started)
