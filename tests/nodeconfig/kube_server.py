"""One Node's GET and watch stream, scripted by the test: a behaviour of tests.support.api_server."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gpuslice.kube import ApiCounters, KubeClient, Limits
from tests.support.api_server import Drop, Exchange, HostileApi, event_line, hostile_api, status_object

# What a watch stream does next: ("event", TYPE, labels, rv), ("bookmark", rv), ("gone",) an ERROR event
# with a 410 Status, ("http-gone",) a 410 answer to the watch request itself, ("drop",) the connection
# closes mid-stream, ("end",) the stream ends cleanly (as after timeoutSeconds).
Action = tuple[Any, ...]
TOKEN = "service-account-token"  # what the client must send as its bearer token


@dataclass
class ApiState:
    node: str
    labels: dict[str, str]
    resource_version: int = 1
    get_status: int = 200  # anything else: the GET fails with that status
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # ("get"|"watch", query)
    actions: queue.Queue[Action] = field(default_factory=queue.Queue)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def node_object(self, labels: dict[str, str] | None = None, rv: int | None = None) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node,
                "uid": "0d1e2f",
                "resourceVersion": str(self.resource_version if rv is None else rv),
                "labels": dict(self.labels if labels is None else labels),
            },
        }

    def watch_requests(self) -> list[dict[str, str]]:
        with self.lock:
            return [query for kind, query in self.requests if kind == "watch"]

    def gets(self) -> int:
        with self.lock:
            return sum(1 for kind, _ in self.requests if kind == "get")

    def answer(self, ex: Exchange) -> bool:
        """The behaviour: this node's GET and watch; anything else is not found."""
        if ex.path == f"/api/v1/nodes/{self.node}" and ex.method == "GET":
            with self.lock:
                self.requests.append(("get", ex.query))
            if self.get_status != 200:
                return ex.status(self.get_status, "try again later")
            return ex.json(200, self.node_object())
        if ex.path == "/api/v1/nodes" and ex.watch:
            with self.lock:
                self.requests.append(("watch", ex.query))
            first = self._next(ex)
            if first is None:
                return ex.drop()
            if first[0] == "http-gone":
                return ex.json(410, {**status_object(410, "too old resource version"), "reason": "Expired"})
            return ex.stream(self._stream(ex, first))
        return ex.status(404, f"{ex.path} not found")

    def _stream(self, ex: Exchange, action: Action | None) -> Iterator[bytes]:
        while action is not None:
            kind = action[0]
            if kind == "event":
                _, event_type, labels, rv = action
                with self.lock:
                    self.labels, self.resource_version = dict(labels), rv
                yield event_line(event_type, self.node_object(labels, rv))
            elif kind == "bookmark":
                yield event_line(
                    "BOOKMARK", {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": str(action[1])}}
                )
            elif kind == "gone":
                yield event_line("ERROR", status_object(410, "too old resource version"))
                return
            elif kind == "drop":
                raise Drop  # no terminating chunk: the client sees the connection die mid-body
            elif kind == "end":
                return
            action = self._next(ex)
        raise Drop  # the server is shutting down

    def _next(self, ex: Exchange) -> Action | None:
        """The next scripted action; None when the server is shutting down."""
        while not ex.closing.is_set():
            try:
                return self.actions.get(timeout=0.05)
            except queue.Empty:
                continue
        return None


@contextmanager
def kube_api(node: str, labels: dict[str, str]) -> Iterator[tuple[ApiState, str]]:
    """Serve the API on 127.0.0.1 (a free port); yields the state to script and the server's URL."""
    state = ApiState(node, dict(labels))
    with hostile_api(HostileApi(behaviour=state.answer, token=TOKEN)) as (_, url):
        yield state, url


def kube_client(url: str, limits: Limits | None = None, counters: ApiCounters | None = None) -> KubeClient:
    """gpuslice's API client (real lightkube requests and models) pointed at `url` with the test's token."""
    return KubeClient.for_server(url, "gpuslice-test", token=TOKEN, limits=limits, counters=counters)
