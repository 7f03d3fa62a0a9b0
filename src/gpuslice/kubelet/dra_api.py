"""An in-memory Kubernetes API for the DRA objects, served over HTTP the way lightkube talks to an API server.

Stores ResourceSlices, ResourceClaims and DeviceClasses as plain dicts; serves `resource.k8s.io` in the
versions it is told to (the others answer 404, so a client's version fallback is exercised) with get,
list (field selectors on spec.driver / spec.nodeName), create, replace and delete. Slices are kept as
written and converted between the v1 and v1beta1 device shapes on the way out.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import re
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger("gpuslice.kubelet.dra")

GROUP = "resource.k8s.io"
VERSIONS = ("v1", "v1beta2", "v1beta1")
MAX_BODY = 1 << 20
_PATH = re.compile(
    rf"/apis/{re.escape(GROUP)}/(?P<version>[a-z0-9]+)"
    r"(?:/namespaces/(?P<namespace>[a-z0-9-]+))?/(?P<plural>resourceslices|resourceclaims|deviceclasses)(?:/(?P<name>[^/?]+))?"
)
_KINDS = {"resourceslices": "ResourceSlice", "resourceclaims": "ResourceClaim", "deviceclasses": "DeviceClass"}


class ApiStoreError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        self.code = code
        self.reason = reason
        super().__init__(message)


def _to_version(obj: dict[str, Any], version: str) -> dict[str, Any]:
    """An object as the client asked for it: the apiVersion, and for slices the device shape of that version."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{GROUP}/{version}"
    if out.get("kind") == "ResourceSlice" and "devices" in out.get("spec", {}):
        devices = []
        for device in out.get("spec", {}).get("devices") or []:
            flat = {"name": device["name"], **device["basic"]} if "basic" in device else device
            if version == "v1beta1":
                devices.append({"name": flat["name"], "basic": {k: v for k, v in flat.items() if k != "name"}})
            else:
                devices.append(flat)
        out["spec"]["devices"] = devices
    if out.get("kind") == "ResourceClaim" and version == "v1beta1":
        for request in out.get("spec", {}).get("devices", {}).get("requests") or []:
            request.update(request.pop("exactly", {}))
    return out


def _v1(obj: dict[str, Any]) -> dict[str, Any]:
    return _to_version(obj, "v1")


class ApiStore:
    """The objects, keyed by (plural, namespace, name); every write gets a new resourceVersion."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._versions = itertools.count(1)
        self._lock = threading.RLock()  # re-entrant: wait_for's predicate reads the store under the lock
        self.changed = threading.Condition(self._lock)
        self.writes: list[tuple[str, str, str]] = []  # (verb, plural, name)

    def get(self, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        with self._lock:
            found = self._objects.get((plural, namespace, name))
            return _v1(found) if found is not None else None

    def list(self, plural: str, fields: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        with self._lock:
            items = [obj for (kind, _, _), obj in sorted(self._objects.items()) if kind == plural]
        return [_v1(obj) for obj in items if _fields_match(obj, fields or {})]

    def put(self, plural: str, obj: dict[str, Any], *, create: bool) -> dict[str, Any]:
        metadata = obj.setdefault("metadata", {})
        if create and not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:5]
        name = metadata.get("name")
        if not name:
            raise ApiStoreError(422, "Invalid", "metadata.name: Required value")
        key = (plural, metadata.get("namespace", "") if plural == "resourceclaims" else "", name)
        with self.changed:
            current = self._objects.get(key)
            if create and current is not None:
                raise ApiStoreError(409, "AlreadyExists", f'{plural} "{name}" already exists')
            if not create and current is None:
                raise ApiStoreError(404, "NotFound", f'{plural} "{name}" not found')
            given = metadata.get("resourceVersion")
            if current is not None and given and given != current["metadata"]["resourceVersion"]:
                raise ApiStoreError(409, "Conflict", f'{plural} "{name}": the object has been modified')
            stored = copy.deepcopy(obj)
            stored["metadata"]["uid"] = current["metadata"]["uid"] if current else str(uuid.uuid4())
            stored["metadata"]["resourceVersion"] = str(next(self._versions))
            self._objects[key] = stored
            self.writes.append(("create" if create else "replace", plural, name))
            self.changed.notify_all()
            return _v1(stored)

    def delete(self, plural: str, name: str, namespace: str = "") -> bool:
        with self.changed:
            removed = self._objects.pop((plural, namespace, name), None)
            if removed is not None:
                self.writes.append(("delete", plural, name))
                self.changed.notify_all()
            return removed is not None

    def update(
        self, plural: str, name: str, namespace: str, change: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]:
        """Read-modify-write under the lock (status updates by the mock's scheduler and kubelet)."""
        with self.changed:
            current = self._objects.get((plural, namespace, name))
            if current is None:
                raise ApiStoreError(404, "NotFound", f'{plural} "{namespace}/{name}" not found')
            change(current)
            current["metadata"]["resourceVersion"] = str(next(self._versions))
            self.changed.notify_all()
            return _v1(current)

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)


def _fields_match(obj: Mapping[str, Any], fields: Mapping[str, str]) -> bool:
    for path, wanted in fields.items():
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value != wanted:
            return False
    return True


def _parse_fields(text: str) -> dict[str, str]:
    fields = {}
    for term in filter(None, text.split(",")):
        key, sep, value = term.partition("=")
        if not sep or key.endswith("!"):
            raise ApiStoreError(400, "BadRequest", f"field selector {term!r}: only key=value is supported")
        fields[key] = value.lstrip("=")
    return fields


class FakeKubeApi:
    """ApiStore over HTTP on 127.0.0.1 (a free port); `url` is what a client is pointed at."""

    def __init__(
        self, served: Iterable[str] = ("v1",), counters_apart: bool = False, drop_counters: bool = False
    ) -> None:
        self.served = tuple(served)
        self.counters_apart = counters_apart  # the 1.35+ rule: no slice with both sharedCounters and devices
        # 1.32 has no counter fields, 1.33/1.34 have them only with DRAPartitionableDevices: such a server
        # accepts a slice with sharedCounters / consumesCounters and silently stores it without them.
        self.drop_counters = drop_counters
        for version in self.served:
            if version not in VERSIONS:
                raise ValueError(f"unknown {GROUP} version {version}")
        self.store = ApiStore()
        self.requests: list[tuple[str, str]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the fake API server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeKubeApi:
        handler = _handler_for(self)
        self._server = _QuietServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-kube-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def handle(self, method: str, target: str, body: bytes) -> tuple[int, dict[str, Any]]:
        self.requests.append((method, target))
        url = urlsplit(target)
        match = _PATH.fullmatch(url.path)
        if match is None:
            return 404, _status(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        version, plural, name = match["version"], match["plural"], match["name"]
        namespace = match["namespace"] or ""
        if version not in self.served:
            return 404, _status(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        try:
            query = parse_qs(url.query)
            if method == "GET" and name:
                found = self.store.get(plural, name, namespace)
                if found is None:
                    raise ApiStoreError(404, "NotFound", f'{plural} "{name}" not found')
                return 200, _to_version(found, version)
            if method == "GET":
                fields = _parse_fields(query.get("fieldSelector", [""])[0])
                items = [_to_version(obj, version) for obj in self.store.list(plural, fields)]
                kind = _KINDS[plural] + "List"
                return 200, {"apiVersion": f"{GROUP}/{version}", "kind": kind, "metadata": {}, "items": items}
            if method in ("POST", "PUT"):
                obj = json.loads(body or b"{}")
                if not isinstance(obj, dict):
                    raise ApiStoreError(400, "BadRequest", "the body must be an object")
                obj = _v1(obj) if obj.get("apiVersion", "").endswith("v1beta1") else obj
                spec = obj.get("spec") or {}
                if self.counters_apart and spec.get("sharedCounters") and spec.get("devices"):
                    raise ApiStoreError(
                        422, "Invalid", "spec: Invalid value: only one of `sharedCounters` or `devices` is allowed"
                    )
                if self.drop_counters and plural == "resourceslices":
                    _drop_counters(obj)
                obj["apiVersion"] = f"{GROUP}/v1"
                return 201 if method == "POST" else 200, _to_version(
                    self.store.put(plural, obj, create=method == "POST"), version
                )
            if method == "DELETE" and name:
                if not self.store.delete(plural, name, namespace):
                    raise ApiStoreError(404, "NotFound", f'{plural} "{name}" not found')
                return 200, _status(200, "", "deleted", success=True)
        except ApiStoreError as exc:
            return exc.code, _status(exc.code, exc.reason, str(exc))
        except (ValueError, KeyError) as exc:
            return 400, _status(400, "BadRequest", f"bad request: {exc}")
        return 405, _status(405, "MethodNotAllowed", f"{method} is not supported here")


class _QuietServer(ThreadingHTTPServer):
    """A client that goes away mid-connection (a plugin stopped or killed) is its business, not a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _drop_counters(obj: dict[str, Any]) -> None:
    """What a server without partitionable devices stores of a slice: no counter sets, no device consumes them."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.pop("sharedCounters", None)
    for device in spec.get("devices") or []:
        if isinstance(device, dict):
            device.pop("consumesCounters", None)


def _status(code: int, reason: str, message: str, success: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Success" if success else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _handler_for(api: FakeKubeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body are two writes: with Nagle on, the body waits for the client's delayed ACK (40 ms
        # on Linux), a stall no real API server has, which would swamp every claim read a test or benchmark times.
        disable_nagle_algorithm = True

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                code, payload = 413, _status(413, "RequestEntityTooLarge", f"body over {MAX_BODY} bytes")
                self.close_connection = True
            else:
                code, payload = api.handle(self.command, self.path, self.rfile.read(length) if length else b"")
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _serve  # noqa: N815 (http.server's method names)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("fake API: " + format, *args)

    return Handler
