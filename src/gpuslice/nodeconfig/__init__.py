"""Per-node configs chosen by a node label: the Kubernetes side (Node get and watch) and the watcher."""

from gpuslice.nodeconfig.metrics import NodeConfigMetrics
from gpuslice.nodeconfig.source import (
    FakeNodeSource,
    NodeEvent,
    NodeSource,
    NodeSourceError,
    NodeState,
    WatchExpired,
)
from gpuslice.nodeconfig.watcher import ApplyConfig, NodeConfigObserver, NodeConfigWatcher

__all__ = [
    "ApplyConfig",
    "FakeNodeSource",
    "NodeConfigMetrics",
    "NodeConfigObserver",
    "NodeConfigWatcher",
    "NodeEvent",
    "NodeSource",
    "NodeSourceError",
    "NodeState",
    "WatchExpired",
]
