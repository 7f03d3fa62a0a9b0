"""The API client's counters on a Prometheus registry: requests, errors by kind, retries, skipped objects."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from gpuslice.kube.counters import API_COUNTERS, ApiStats

KUBE_API_PREFIX = "gpuslice_kube_api"


class _ApiCollector(Collector):
    def __init__(self, stats: ApiStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[CounterMetricFamily]:
        snapshot = self._stats.snapshot()
        yield CounterMetricFamily(f"{KUBE_API_PREFIX}_requests", "Requests sent to the API server", snapshot.requests)
        errors = CounterMetricFamily(
            f"{KUBE_API_PREFIX}_errors", "Failed or refused API requests, by kind", labels=["kind"]
        )
        for kind, count in sorted(snapshot.errors.items()):
            errors.add_metric([kind], count)
        yield errors
        yield CounterMetricFamily(
            f"{KUBE_API_PREFIX}_retries", "Retries after a failure (each waited its backoff)", snapshot.retries
        )
        yield CounterMetricFamily(
            f"{KUBE_API_PREFIX}_malformed_objects", "Malformed objects skipped in answers", snapshot.malformed
        )


def register_api_metrics(registry: CollectorRegistry, stats: ApiStats = API_COUNTERS) -> None:
    """Expose `stats` (the process's counters by default) in `registry`."""
    registry.register(_ApiCollector(stats))
