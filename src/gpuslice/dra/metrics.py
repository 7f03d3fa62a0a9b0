"""`gpuslice dra`'s metrics: prepare/unprepare counts and latency, publishing, the API client's counters."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpuslice.dra.claims import ClaimRef
from gpuslice.dra.contract import ClaimDriver, DeviceAnswer
from gpuslice.dra.counters import METRIC_PREFIX
from gpuslice.kube.counters import API_COUNTERS, ApiStats
from gpuslice.kube.metrics import register_api_metrics

# A prepare is a checkpoint write and a CDI spec in the common case; a MIG instance or an MPS daemon
# takes seconds; the kubelet gives a whole call 45 s.
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class PluginState:
    """What the kubelet plumbing reports at every scrape."""

    publishes: int  # ResourceSlice publishes that wrote something
    publisher_restarts: int  # dead publishing threads started again
    published_devices: int  # devices offered now (healthy ones)
    registered: bool


class DraMetrics:
    """Every metric of one `gpuslice dra` process, on one registry; made only when a metrics port is asked for.

    `gpuslice_kube_api_*` are the API client's counters (the same names as the device plugin's);
    `gpuslice_dra_shared_counters` and `gpuslice_dra_guarded_gpus` come from the publisher's counters
    probe (`extra`, asked at each scrape: the publisher is made at start).
    """

    def __init__(self, api_stats: ApiStats = API_COUNTERS) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        register_api_metrics(self.registry, api_stats)
        self.calls = Counter(
            f"{METRIC_PREFIX}_claims",
            "Claims the kubelet asked to prepare or unprepare, by outcome (ok, error)",
            ["call", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            f"{METRIC_PREFIX}_claim_seconds",
            "Time to prepare or unprepare one claim (its claim read is done before, for the whole call at once)",
            ["call"],
            buckets=CALL_BUCKETS,
            registry=self.registry,
        )
        self._state: Callable[[], PluginState] | None = None
        self._extra: Callable[[], CollectorRegistry | None] = lambda: None

    def watch(self, state: Callable[[], PluginState], extra: Callable[[], CollectorRegistry | None]) -> None:
        """Export `state()` and the registry `extra()` answers (if any) at every scrape."""
        if self._state is None:
            self.registry.register(_StateCollector(state))
        self._state = state
        self._extra = extra

    def observe(self, call: str, outcome: str, seconds: float) -> None:
        self.calls.labels(call, outcome).inc()
        self.latency.labels(call).observe(seconds)

    def render(self) -> bytes:
        extra = self._extra()
        return bytes(generate_latest(self.registry)) + (bytes(generate_latest(extra)) if extra is not None else b"")


class _StateCollector(Collector):
    def __init__(self, state: Callable[[], PluginState]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
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
