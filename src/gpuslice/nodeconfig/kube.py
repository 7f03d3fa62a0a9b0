"""NodeSource over the Kubernetes API with lightkube: in-cluster config (or a kubeconfig), Node get and watch."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from gpuslice.nodeconfig.source import EventKind, NodeEvent, NodeSourceError, NodeState, WatchExpired

WATCH_SERVER_TIMEOUT_S = 300  # the API server ends each watch after this; lightkube then resumes it
REQUEST_TIMEOUT_S = 10.0
_EVENT_KINDS: tuple[EventKind, ...] = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")


class LightkubeNodeSource:
    """One Node through lightkube. The client is built on first use, so a missing service-account token or
    kubeconfig is a NodeSourceError that the watcher reports and retries, not a crash at import."""

    def __init__(self, client: Any = None, *, server_timeout_s: int = WATCH_SERVER_TIMEOUT_S) -> None:
        self._client = client
        self._server_timeout_s = server_timeout_s
        self._lock = threading.Lock()

    def _lightkube(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx2
                from lightkube import Client

                try:
                    self._client = Client(timeout=httpx2.Timeout(REQUEST_TIMEOUT_S))
                except Exception as exc:  # lightkube raises several config error types; all mean "no cluster"
                    raise NodeSourceError(f"no Kubernetes API configuration (in-cluster or kubeconfig): {exc}") from exc
            return self._client

    def get(self, node_name: str) -> NodeState:
        from lightkube.resources.core_v1 import Node

        client = self._lightkube()
        try:
            node = client.get(Node, node_name)
        except Exception as exc:
            raise _translate(exc, f"get node {node_name}") from exc
        return NodeState(dict(node.metadata.labels or {}), node.metadata.resourceVersion or "")

    def watch(self, node_name: str, resource_version: str) -> Iterator[NodeEvent]:
        from lightkube.resources.core_v1 import Node
        from lightkube.types import on_error_raise

        client = self._lightkube()
        # lightkube's public Client.watch cannot ask for bookmarks, so the request is built with the same
        # (pinned) generic client it uses, plus allowWatchBookmarks; decoding and resuming stay lightkube's.
        generic = client._client
        request = generic.prepare_request(
            "list",
            res=Node,
            watch=True,
            params={
                "fieldSelector": f"metadata.name={node_name}",
                "resourceVersion": resource_version or None,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": self._server_timeout_s,
            },
        )
        try:
            for kind, node in generic.watch(request, on_error=on_error_raise):
                if kind not in _EVENT_KINDS:
                    continue
                version = (node.metadata.resourceVersion or "") if node.metadata is not None else ""
                labels = None if kind == "BOOKMARK" else dict(node.metadata.labels or {})
                yield NodeEvent(kind, version, labels)
        except Exception as exc:
            raise _translate(exc, f"watch node {node_name}") from exc

    def close(self) -> None:
        with self._lock:
            client = self._client
        if client is not None:
            # Closing while a stream reads may complain; the watcher is stopping anyway.
            with contextlib.suppress(Exception):
                client.close()


def _translate(exc: Exception, what: str) -> NodeSourceError:
    """lightkube's and httpx's errors as NodeSourceError, 410 Gone as WatchExpired."""
    import httpx2
    from lightkube import ApiError

    if isinstance(exc, ApiError):
        code, message = exc.status.code, exc.status.message
    elif isinstance(exc, httpx2.HTTPStatusError):
        code, message = exc.response.status_code, exc.response.reason_phrase
    elif isinstance(exc, httpx2.HTTPError):
        return NodeSourceError(f"{what}: {type(exc).__name__}: {exc}")
    else:
        return NodeSourceError(f"{what}: unexpected {type(exc).__name__}: {exc}")
    if code == 410:
        return WatchExpired(f"{what}: 410 Gone: {message}")
    return NodeSourceError(f"{what}: {code}: {message}")
