"""The one Kubernetes API client: total deadlines, size and page caps, backoff, and counters of what failed."""

from gpuslice.kube.backoff import RetryBackoff
from gpuslice.kube.client import KubeClient, Limits, WatchEvent, close_all_clients
from gpuslice.kube.counters import API_COUNTERS, ApiCounters, ApiSnapshot, ApiStats
from gpuslice.kube.errors import (
    DeadlineExceeded,
    Gone,
    KubeError,
    Malformed,
    NoConfig,
    NotFound,
    Stopped,
    TooLarge,
    TooManyPages,
)

__all__ = [
    "API_COUNTERS",
    "ApiCounters",
    "ApiSnapshot",
    "ApiStats",
    "DeadlineExceeded",
    "Gone",
    "KubeClient",
    "KubeError",
    "Limits",
    "Malformed",
    "NoConfig",
    "NotFound",
    "RetryBackoff",
    "Stopped",
    "TooLarge",
    "TooManyPages",
    "WatchEvent",
    "close_all_clients",
]
