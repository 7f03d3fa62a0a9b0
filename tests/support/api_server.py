"""A hostile Kubernetes API server on 127.0.0.1: each request is answered by a scripted behaviour, and counted.

The behaviours are what a broken or malicious API server (or a proxy in front of one) can do: trickle,
page forever, send a body or a watch line of hundreds of MiB (generated as it goes, never held), answer
410 or an ERROR event, end a watch at once, drop the connection, send objects without metadata. A small
honest store of ResourceSlices and Nodes answers whatever no behaviour takes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MiB = 1 << 20
TOKEN = "hostile-token"

# A behaviour answers one request (or declines with False, so the honest store answers it).
Behaviour = Callable[["Exchange"], bool]


class Drop(Exception):
    """Raised by a stream's chunks: the connection dies mid-body (no terminating chunk)."""


@dataclass
class Exchange:
    """One request as the behaviour sees it, and the ways to answer."""

    handler: BaseHTTPRequestHandler
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    closing: threading.Event

    @property
    def watch(self) -> bool:
        return self.query.get("watch") == "true"

    def json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> bool:
        data = json.dumps(body).encode()
        self.handler.send_response(code)
        self.handler.send_header("Content-Type", "application/json")
        self.handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.handler.send_header(name, value)
        self.handler.end_headers()
        self.handler.wfile.write(data)
        return True

    def status(self, code: int, message: str = "go away") -> bool:
        return self.json(code, status_object(code, message))

    def stream(self, chunks: Iterator[bytes], code: int = 200) -> bool:
        """A chunked answer from `chunks` until they end, the client leaves, or the server closes."""
        self.handler.send_response(code)
        self.handler.send_header("Content-Type", "application/json")
        self.handler.send_header("Transfer-Encoding", "chunked")
        self.handler.end_headers()
        try:
            for chunk in chunks:
                if self.closing.is_set():
                    break
                self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.handler.wfile.flush()
            self.handler.wfile.write(b"0\r\n\r\n")
        except Drop:
            pass
        except OSError:  # the client refused the rest: what the test wants
            pass
        self.handler.close_connection = True
        return True

    def trickle(self, data: bytes, every_s: float) -> bool:
        """Raw bytes, one at a time: headers and body alike never complete in any honest time."""
        try:
            for byte in data:
                if self.closing.wait(every_s):
                    break
                self.handler.wfile.write(bytes([byte]))
                self.handler.wfile.flush()
        except OSError:
            pass
        self.handler.close_connection = True
        return True

    def drop(self) -> bool:
        self.handler.close_connection = True
        return True


def status_object(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}


def node_object(name: str, labels: dict[str, str], rv: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": str(rv), "labels": labels},
    }


def event_line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def endless(block: bytes) -> Iterator[bytes]:
    while True:
        yield block


def quiet(closing: threading.Event) -> Iterator[bytes]:
    """A stream that stays open and says nothing until the server closes."""
    closing.wait()
    yield from ()


@dataclass
class HostileApi:
    """What the test scripts and reads: the behaviour, the honest store, and every request seen."""

    behaviour: Behaviour | None = None
    token: str | None = TOKEN  # None: no credentials asked (as behind a local proxy)
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> labels
    slices: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[float, str, str]] = field(default_factory=list)  # (monotonic, method, path?query)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _version: int = 1

    def count(self, since: float = 0.0) -> int:
        with self.lock:
            return sum(1 for at, _, _ in self.requests if at >= since)

    def seen(self) -> list[str]:
        with self.lock:
            return [f"{method} {path}" for _, method, path in self.requests]

    def next_version(self) -> str:
        with self.lock:
            self._version += 1
            return str(self._version)


SLICES = "/apis/resource.k8s.io/v1/resourceslices"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        api = self.server.api
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 4 * MiB)) if length else b""
        with api.lock:
            api.requests.append((time.monotonic(), method, self.path))
        exchange = Exchange(
            self, method, url.path, {k: v[-1] for k, v in parse_qs(url.query).items()}, body, self.server.closing
        )
        if api.token is not None and self.headers.get("Authorization") != f"Bearer {api.token}":
            exchange.status(401, "no or a wrong bearer token")
            return
        behaviour = api.behaviour
        if behaviour is not None and behaviour(exchange):
            return
        _honest(api, exchange)


def _honest(api: HostileApi, ex: Exchange) -> None:
    """A tiny honest API: Nodes (get; a watch that stays quiet until the server closes), ResourceSlices."""
    if ex.path.startswith("/api/v1/nodes"):
        name = ex.path.rsplit("/", 1)[-1]
        if ex.watch:
            ex.stream(quiet(ex.closing))
        elif name in api.nodes:
            ex.json(200, node_object(name, api.nodes[name], 1))
        else:
            ex.status(404, f"nodes {name!r} not found")
        return
    if ex.path.startswith("/apis/resource.k8s.io/") and not ex.path.startswith(SLICES):
        ex.status(404, "not served")
        return
    if ex.path == SLICES and ex.method == "GET":
        with api.lock:
            items = list(api.slices.values())
        ex.json(200, {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1", "metadata": {}, "items": items})
    elif ex.path == SLICES and ex.method == "POST":
        obj = json.loads(ex.body)
        obj["metadata"]["resourceVersion"] = api.next_version()
        with api.lock:
            api.slices[obj["metadata"]["name"]] = obj
        ex.json(201, obj)
    elif ex.path.startswith(SLICES + "/"):
        name = ex.path.rsplit("/", 1)[-1]
        with api.lock:
            current = api.slices.get(name)
        if current is None:
            ex.status(404, f"resourceslices {name!r} not found")
        elif ex.method == "GET":
            ex.json(200, current)
        elif ex.method == "PUT":
            obj = json.loads(ex.body)
            obj["metadata"]["resourceVersion"] = api.next_version()
            with api.lock:
                api.slices[name] = obj
            ex.json(200, obj)
        else:
            with api.lock:
                api.slices.pop(name, None)
            ex.json(200, status_object(200, "deleted"))
    else:
        ex.status(404, f"{ex.path} not found")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, api: HostileApi) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api = api
        self.closing = threading.Event()


@contextmanager
def hostile_api(api: HostileApi | None = None) -> Iterator[tuple[HostileApi, str]]:
    """Serve on a free loopback port; yields the scriptable state and the URL."""
    state = api or HostileApi()
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
