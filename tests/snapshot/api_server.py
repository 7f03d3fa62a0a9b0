"""A Kubernetes API stand-in on 127.0.0.1 that serves paged lists (limit and continue), scripted by the test."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "snapshot-token"
PATHS = {
    "/api/v1/nodes": ("NodeList", "v1", "nodes"),
    "/api/v1/pods": ("PodList", "v1", "pods"),
    "/apis/resource.k8s.io/v1/resourceslices": ("ResourceSliceList", "resource.k8s.io/v1", "resourceslices"),
    "/apis/resource.k8s.io/v1/resourceclaims": ("ResourceClaimList", "resource.k8s.io/v1", "resourceclaims"),
}


@dataclass
class ListApi:
    """objects: kind -> items; a kind left out answers 404 (not served). `endless` kinds answer every page
    with a `continue` token; `delay_s` holds each answer back (a slow server)."""

    objects: dict[str, list[dict[str, Any]]]
    endless: set[str] = field(default_factory=set)
    delay_s: float = 0.0
    status: int = 200
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # (method, path, query)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def pages(self, kind: str) -> int:
        with self.lock:
            return sum(1 for _, path, _ in self.requests if PATHS.get(path, ("", "", ""))[2] == kind)


def _status(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:  # nothing may write: recorded, and refused
        self._answer("POST")

    def do_DELETE(self) -> None:
        self._answer("DELETE")

    def _answer(self, method: str) -> None:
        api = self.server.api
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with api.lock:
            api.requests.append((method, url.path, query))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._json(401, _status(401, "no or a wrong bearer token"))
            return
        if api.delay_s:
            time.sleep(api.delay_s)
        known = PATHS.get(url.path)
        if method != "GET" or known is None or known[2] not in api.objects:
            self._json(404, _status(404, f"{url.path} not found"))
            return
        if api.status != 200:
            self._json(api.status, _status(api.status, "refused by the test"))
            return
        list_kind, version, kind = known
        items = api.objects[kind]
        limit = int(query.get("limit", "0") or 0) or len(items) or 1
        start = int(query.get("continue", "0") or 0)
        page = items[start : start + limit]
        following = start + limit
        token = str(following) if following < len(items) or kind in api.endless else ""
        metadata: dict[str, Any] = {"resourceVersion": "7"}
        if token:
            metadata["continue"] = token
        self._json(200, {"kind": list_kind, "apiVersion": version, "metadata": metadata, "items": page})

    def _json(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, api: ListApi) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api = api


@contextmanager
def list_api(api: ListApi) -> Iterator[str]:
    """Serve `api` on a free loopback port; yields the server's URL."""
    server = _Server(api)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def kubeconfig_text(url: str) -> str:
    """A kubeconfig for the real lightkube client (and `--kubeconfig`), pointing at `url`."""
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
        f"clusters:\n- name: test\n  cluster:\n    server: {url}\n"
        f"users:\n- name: test\n  user:\n    token: {TOKEN}\n"
        "contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n"
    )


def lightkube_client(url: str) -> Any:
    """gpuslice's API client (real lightkube requests and models) pointed at `url`, with the snapshot's limits."""
    from gpuslice.kube import KubeClient
    from gpuslice.snapshot.kube import SNAPSHOT_FIELD_MANAGER, SNAPSHOT_LIMITS

    return KubeClient.for_server(url, SNAPSHOT_FIELD_MANAGER, token=TOKEN, limits=SNAPSHOT_LIMITS)
