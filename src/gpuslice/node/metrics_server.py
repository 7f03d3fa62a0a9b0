"""/metrics, /healthz and /readyz over the bounded HTTP server, for either kubelet front end."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from gpuslice.node.http_server import BoundedHttpServer, HttpLimits

if TYPE_CHECKING:
    from prometheus_client.core import Metric

log = logging.getLogger("gpuslice.node.http")

Probe = Callable[[], tuple[bool, str]]  # (ok, why)
_TEXT = "text/plain; charset=utf-8"


class Exposition(Protocol):
    """What /metrics serves: the process's metrics in Prometheus' text format, rendered at each scrape."""

    def render(self) -> bytes: ...


class MetricFamilies(Protocol):
    """Something that can say its metrics now, as Prometheus families (plugin.metrics, dra.counters)."""

    def families(self) -> Iterable[Metric]: ...


class LiveCollector:
    """The Prometheus collector of a MetricFamilies: read at every scrape, so never stale."""

    def __init__(self, source: MetricFamilies) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        return self._source.families()


class MetricsServer:
    """HTTP on `address:port` (port 0 picks a free one): /metrics, /healthz (alive), /readyz (ready).

    Served by node.http_server: bounded connections, per-connection timeouts, a fixed pool of handlers.
    The Prometheus client is imported at the first scrape, never before.
    """

    def __init__(
        self,
        metrics: Exposition,
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
            from prometheus_client import CONTENT_TYPE_LATEST

            return 200, self.metrics.render(), CONTENT_TYPE_LATEST
        if path in ("/healthz", "/readyz"):
            ok, why = (self._liveness if path == "/healthz" else self._readiness)()
            return (200 if ok else 503), (why + "\n").encode(), _TEXT
        return 404, b"not found: try /metrics, /healthz or /readyz\n", _TEXT
