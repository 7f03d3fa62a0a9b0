"""Prometheus metrics of the per-node config: what serves, what the label asks for that is refused, API errors."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from gpuslice.config.node_config import MAX_LABEL_VALUE, NodeConfigChoice

NODE_CONFIG_PREFIX = "gpuslice_node_config"


class NodeConfigMetrics:
    """The watcher's NodeConfigObserver, in the registry of the process's other metrics.

    `gpuslice_node_config_serving{config,source}` is 1 for the config that serves; `..._refused{wanted,reason}`
    is 1 while the node's label asks for a config that is not served (reason: unknown_config = no such
    file, invalid_config = it failed to load, the old one serves; no_config = nothing can be chosen).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._serving = Gauge(
            f"{NODE_CONFIG_PREFIX}_serving",
            "The per-node config that serves (1), by name and how it was chosen",
            ["config", "source"],
            registry=registry,
        )
        self._refused = Gauge(
            f"{NODE_CONFIG_PREFIX}_refused",
            "1 while the node label asks for a config that is not served, with the reason",
            ["wanted", "reason"],
            registry=registry,
        )
        self._api_errors = Counter(
            f"{NODE_CONFIG_PREFIX}_api_errors", "Failed GETs and watches of this node (retried)", registry=registry
        )

    def serving(self, choice: NodeConfigChoice) -> None:
        self._serving.clear()
        self._serving.labels(choice.name or "", choice.source).set(1)
        self._refused.clear()

    def refused(self, wanted: str | None, reason: str) -> None:
        self._refused.clear()
        self._refused.labels((wanted or "")[:MAX_LABEL_VALUE], reason).set(1)

    def api_error(self) -> None:
        self._api_errors.inc()
