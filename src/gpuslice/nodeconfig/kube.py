"""NodeSource over the Kubernetes API: this node's GET and watch through the one client, gpuslice.kube."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from gpuslice.kube import Gone, KubeClient, KubeError
from gpuslice.kube.client import WATCH_SERVER_TIMEOUT_S
from gpuslice.kube.deadline import until
from gpuslice.kube.resources import node_resource
from gpuslice.nodeconfig.source import EventKind, NodeEvent, NodeSourceError, NodeState, WatchExpired

NODE_CONFIG_FIELD_MANAGER = "gpuslice-plugin"


class LightkubeNodeSource:
    """One Node through the API. The client is built on first use (without a configuration its requests
    fail as NodeSourceError, which the watcher reports and retries: never a crash)."""

    def __init__(self, client: KubeClient | None = None, *, server_timeout_s: int = WATCH_SERVER_TIMEOUT_S) -> None:
        self._client = client
        self._server_timeout_s = server_timeout_s
        self._lock = threading.Lock()

    def _kube(self) -> KubeClient:
        with self._lock:
            if self._client is None:
                self._client = KubeClient.from_environment(NODE_CONFIG_FIELD_MANAGER)
            return self._client

    def get(self, node_name: str, deadline_s: float | None = None) -> NodeState:
        client = self._kube()
        end = time.monotonic() + (deadline_s if deadline_s is not None else client.limits.deadline_s)
        try:
            with until(end):
                node = client.get(node_resource(), node_name, what=f"get node {node_name}")
        except KubeError as exc:
            raise _translate(exc) from exc
        return NodeState(dict(node.metadata.labels or {}), node.metadata.resourceVersion or "")

    def watch(self, node_name: str, resource_version: str) -> Iterator[NodeEvent]:
        events = self._kube().watch(
            node_resource(),
            resource_version=resource_version,
            fields={"metadata.name": node_name},
            server_timeout_s=self._server_timeout_s,
            what=f"watch node {node_name}",
        )
        try:
            for event in events:
                if event.type == "BOOKMARK":
                    yield NodeEvent("BOOKMARK", event.resource_version, None)
                    continue
                kind: EventKind = (
                    "ADDED" if event.type == "ADDED" else "DELETED" if event.type == "DELETED" else "MODIFIED"
                )
                yield NodeEvent(kind, event.resource_version, dict(event.obj.metadata.labels or {}))
        except KubeError as exc:
            raise _translate(exc) from exc

    def close(self) -> None:
        with self._lock:
            client = self._client
        if client is not None:
            client.close()


def _translate(exc: KubeError) -> NodeSourceError:
    return WatchExpired(str(exc)) if isinstance(exc, Gone) else NodeSourceError(str(exc))
