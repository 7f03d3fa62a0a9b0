"""A small Kubernetes API stand-in on 127.0.0.1: GET of one Node and its watch stream, scripted by the test."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gpuslice.kube import ApiCounters, KubeClient, Limits

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


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        state = self.server.state
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._json(401, _status(401, "Unauthorized", "no or a wrong bearer token"))
        elif url.path == f"/api/v1/nodes/{state.node}":
            with state.lock:
                state.requests.append(("get", query))
            if state.get_status != 200:
                self._json(state.get_status, _status(state.get_status, "ServiceUnavailable", "try again later"))
            else:
                self._json(200, state.node_object())
        elif url.path == "/api/v1/nodes" and query.get("watch") == "true":
            with state.lock:
                state.requests.append(("watch", query))
            self._watch(state)
        else:
            self._json(404, _status(404, "NotFound", f"{url.path} not found"))

    def _json(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _watch(self, state: ApiState) -> None:
        action = self._next(state)
        if action is None:
            return
        if action[0] == "http-gone":
            self._json(410, _status(410, "Expired", "too old resource version"))
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while action is not None:
            kind = action[0]
            if kind == "event":
                _, event_type, labels, rv = action
                with state.lock:
                    state.labels, state.resource_version = dict(labels), rv
                self._chunk({"type": event_type, "object": state.node_object(labels, rv)})
            elif kind == "bookmark":
                self._chunk(
                    {
                        "type": "BOOKMARK",
                        "object": {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": str(action[1])}},
                    }
                )
            elif kind == "gone":
                self._chunk({"type": "ERROR", "object": _status(410, "Expired", "too old resource version")})
                break
            elif kind == "drop":
                self.close_connection = True
                return  # no terminating chunk: the client sees the connection die mid-body
            elif kind == "end":
                break
            action = self._next(state)
        if action is not None:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _chunk(self, body: dict[str, Any]) -> None:
        line = json.dumps(body).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    def _next(self, state: ApiState) -> Action | None:
        """The next scripted action; None when the server is shutting down."""
        while not self.server.closing.is_set():
            try:
                return state.actions.get(timeout=0.05)
            except queue.Empty:
                continue
        self.close_connection = True
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: ApiState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state
        self.closing = threading.Event()


@contextmanager
def kube_api(node: str, labels: dict[str, str]) -> Iterator[tuple[ApiState, str]]:
    """Serve the API on 127.0.0.1 (a free port); yields the state to script and the server's URL."""
    state = ApiState(node, dict(labels))
    server = _Server(state)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def kube_client(url: str, limits: Limits | None = None, counters: ApiCounters | None = None) -> KubeClient:
    """gpuslice's API client (real lightkube requests and models) pointed at `url` with the test's token."""
    return KubeClient.for_server(url, "gpuslice-test", token=TOKEN, limits=limits, counters=counters)
