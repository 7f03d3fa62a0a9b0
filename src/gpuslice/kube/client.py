"""`KubeClient`: the one Kubernetes API client of gpuslice (lightkube's requests and typed models, our limits).

lightkube builds each request and its typed models decode each object; the answers are read here, so that
every request has a total deadline and every body, watch line and list has a cap (lightkube reads whole
bodies and lines). A malformed object in a list or a watch is counted and skipped; a malformed answer to a
get is an error, never a KeyError in the caller.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gpuslice.kube.counters import API_COUNTERS, ApiCounters
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
from gpuslice.records import record

log = logging.getLogger("gpuslice.kube")

MiB = 1 << 20
WATCH_SERVER_TIMEOUT_S = 300  # the API server ends each watch after this (plus its own jitter)
_ERROR_BODY_BYTES = 64 * 1024  # of a 4xx/5xx answer, only the Status message is wanted


@record
class Limits:
    """What one request may take. etcd keeps objects below 1.5 MiB, so the caps leave wide room for honest
    answers while bounding a hostile one. A node lists only its own few objects (its ResourceSlices): one
    page of 500 holds them, and a second allows a server that pages smaller; a third is refused, so a
    server answering `continue` forever costs two requests per attempt, each attempt behind a RetryBackoff."""

    deadline_s: float = 10.0  # total, connect to last byte (a trickle ends here too)
    max_body_bytes: int = 8 * MiB
    max_line_bytes: int = 4 * MiB  # one watch event
    max_pages: int = 2
    page_size: int = 500
    watch_grace_s: float = 30.0  # a watch may run this much past the timeoutSeconds it asked for

    def __post_init__(self) -> None:
        for name, value, low, high in (
            ("deadline_s", self.deadline_s, 0.05, 600.0),
            ("max_body_bytes", self.max_body_bytes, 1024, 1024 * MiB),
            ("max_line_bytes", self.max_line_bytes, 1024, 1024 * MiB),
            ("max_pages", self.max_pages, 1, 1000),
            ("page_size", self.page_size, 1, 5000),
            ("watch_grace_s", self.watch_grace_s, 0.05, 600.0),
        ):
            if not low <= value <= high:
                raise ValueError(f"kube limit {name}={value} is outside [{low}, {high}]")


@record
class WatchEvent:
    """One event of a watch stream: ADDED, MODIFIED, DELETED or BOOKMARK, and the decoded object."""

    type: str
    obj: Any
    resource_version: str


_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})
_LIVE: weakref.WeakSet[KubeClient] = weakref.WeakSet()


def close_all_clients() -> None:
    """Close every client of this process: a stop signal ends requests in flight on any thread at once.

    Safe in a signal handler: it only shuts sockets down, and the interrupted read then fails.
    """
    for client in list(_LIVE):
        client.close()


class KubeClient:
    """Requests to one API server. Build it with `from_environment` (in-cluster, else a kubeconfig) or
    `for_server` (a URL, as for the mock kubelet's API). Without any configuration it still builds: each
    request then fails with NoConfig, so a caller keeps serving and reports the API as unreachable."""

    def __init__(
        self,
        generic: Any,
        *,
        problem: str | None = None,
        limits: Limits | None = None,
        counters: ApiCounters | None = None,
        shutdown: Callable[[], None] | None = None,
    ) -> None:
        self._generic = generic
        self._problem = problem
        self.limits = limits or Limits()
        self.counters = counters if counters is not None else API_COUNTERS
        self._shutdown = shutdown
        self._closed = threading.Event()
        _LIVE.add(self)

    # Construction ------------------------------------------------------------------------------

    @classmethod
    def from_environment(
        cls,
        field_manager: str,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        limits: Limits | None = None,
        counters: ApiCounters | None = None,
        required: bool = False,
    ) -> KubeClient:
        """The in-cluster service account, else KUBECONFIG or ~/.kube/config (or `kubeconfig`, and its
        `context`). Without one: NoConfig when `required` (a one-shot command), else a clear warning and a
        client whose requests fail as NoConfig (a node process keeps serving); `problem` says why."""
        from lightkube import KubeConfig

        try:
            found = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
            config = found.get(context_name=context) if context else found.get()
        except Exception as exc:  # lightkube raises several config error types; all mean "no cluster"
            problem = f"no API server configured (in-cluster service account or kubeconfig): {exc}"
            if required:
                raise NoConfig(problem) from None
            log.warning("%s; going on without the API server", problem)
            return cls(None, problem=problem, limits=limits, counters=counters)
        return cls._build(config, field_manager, limits, counters)

    @classmethod
    def for_server(
        cls,
        server: str,
        field_manager: str,
        *,
        token: str | None = None,
        limits: Limits | None = None,
        counters: ApiCounters | None = None,
    ) -> KubeClient:
        """A plain URL (a local proxy, the mock kubelet's API server), with a bearer token or none."""
        from lightkube import KubeConfig
        from lightkube.config.models import Cluster, User

        config = KubeConfig.from_one(cluster=Cluster(server=server), user=User(token=token)).get()
        return cls._build(config, field_manager, limits, counters)

    @classmethod
    def _build(cls, config: Any, field_manager: str, limits: Limits | None, counters: ApiCounters | None) -> KubeClient:
        import httpx2
        from lightkube.config.client_adapter import ConnectionParams, verify_cluster
        from lightkube.core.generic_client import GenericSyncClient

        from gpuslice.kube.transport import DeadlineTransport

        limits = limits or Limits()
        try:
            context = verify_cluster(config.cluster, config.user, config.abs_file, trust_env=False)
            transport = DeadlineTransport(context)
            # trust_env=False: proxy variables would route requests around our transport and its deadline.
            params = ConnectionParams(timeout=httpx2.Timeout(limits.deadline_s), trust_env=False, transport=transport)
            generic = GenericSyncClient(params, config, field_manager=field_manager)
        except Exception as exc:  # a kubeconfig naming a missing CA file or a bad client certificate
            problem = f"the Kubernetes API configuration cannot be used: {type(exc).__name__}: {exc}"
            log.warning("%s; going on without the API server", problem)
            return cls(None, problem=problem, limits=limits, counters=counters)
        return cls(generic, limits=limits, counters=counters, shutdown=transport.shutdown)

    @property
    def configured(self) -> bool:
        return self._generic is not None

    @property
    def problem(self) -> str | None:
        """Why there is no API server to talk to (None: there is one)."""
        return self._problem

    def close(self) -> None:
        """End every request in flight at once (a stopping process) and refuse new ones."""
        self._closed.set()
        if self._shutdown is not None:
            self._shutdown()

    # Requests ----------------------------------------------------------------------------------

    def get(self, res: Any, name: str, *, namespace: str | None = None, what: str = "") -> Any:
        """The object; NotFound on 404, KubeError on anything else that is not the object."""
        what = what or f"get {_kind(res)} {name}"
        br = self._prepare(what, "get", res=res, name=name, namespace=namespace)
        body = self._exchange(what, br)
        return self._decode_one(what, body, res)

    def list_all(
        self,
        res: Any,
        *,
        namespace: str | None = None,
        fields: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        page_size: int | None = None,
        max_pages: int | None = None,
        what: str = "",
    ) -> list[Any]:
        """Every object, following `continue` up to the page cap (TooManyPages beyond it). `namespace` "*"
        lists all namespaces; `page_size` and `max_pages` replace the client's limits for this list (a
        cluster-wide read needs more than a node's own)."""
        what = what or f"list {_kind(res)}"
        pages = max_pages if max_pages is not None else self.limits.max_pages
        params = {
            "limit": page_size if page_size is not None else self.limits.page_size,
            "fieldSelector": _selector(fields),
            "labelSelector": _selector(labels),
        }
        br = self._prepare(what, "list", res=res, namespace=namespace, params=params)
        found: list[Any] = []
        for _ in range(pages):
            page = self._json_object(what, self._exchange(what, br))
            found.extend(self._decode_items(what, page.get("items"), res))
            metadata = page.get("metadata")
            token = metadata.get("continue") if isinstance(metadata, dict) else None
            if not token:
                return found
            if not isinstance(token, str) or len(token) > 64 * 1024:
                raise self._count(Malformed(f"{what}: metadata.continue is not a token"))
            br.params["continue"] = token
        raise self._count(TooManyPages(f"{what}: the server still had more after {pages} pages; refused"))

    def create(self, obj: Any, *, namespace: str | None = None, what: str = "") -> None:
        what = what or f"create {_name_of(obj)}"
        self._exchange(what, self._prepare(what, "post", obj=obj, namespace=namespace))

    def replace(self, obj: Any, *, namespace: str | None = None, what: str = "") -> None:
        what = what or f"replace {_name_of(obj)}"
        self._exchange(what, self._prepare(what, "put", obj=obj, namespace=namespace))

    def delete(self, res: Any, name: str, *, namespace: str | None = None, what: str = "") -> None:
        what = what or f"delete {_kind(res)} {name}"
        self._exchange(what, self._prepare(what, "delete", res=res, name=name, namespace=namespace))

    def watch(
        self,
        res: Any,
        *,
        resource_version: str,
        fields: Mapping[str, str] | None = None,
        server_timeout_s: int = WATCH_SERVER_TIMEOUT_S,
        bookmarks: bool = True,
        what: str = "",
    ) -> Iterator[WatchEvent]:
        """One watch stream, until the server ends it: its events (malformed ones counted and skipped).

        Never resumes by itself: Gone on 410 (an answer or an ERROR event), KubeError when the stream breaks
        or outlives its deadline (timeoutSeconds plus a grace), TooLarge for a line over the cap.
        """
        what = what or f"watch {_kind(res)}"
        params = {
            "fieldSelector": _selector(fields),
            "resourceVersion": resource_version or None,
            "allowWatchBookmarks": "true" if bookmarks else None,
            "timeoutSeconds": server_timeout_s,
        }
        br = self._prepare(what, "list", res=res, watch=True, params=params)
        import httpx2

        # A watch is quiet between events (bookmarks come about once a minute): no per-read timeout, only
        # the stream's own deadline, which the transport applies to every read.
        br.timeout = httpx2.Timeout(self.limits.deadline_s, read=None)
        end = time.monotonic() + server_timeout_s + self.limits.watch_grace_s
        response = self._open(what, br, end)
        try:
            for line in self._lines(what, response, end):
                event = self._decode_event(what, line, res)
                if event is not None:
                    yield event
        finally:
            response.close()

    # Plumbing ----------------------------------------------------------------------------------

    def _prepare(self, what: str, method: str, **kwargs: Any) -> Any:
        if self._closed.is_set():
            raise Stopped(f"{what}: the API client is closed")
        if self._generic is None:
            raise self._count(NoConfig(f"{what}: {self._problem}"))
        return self._generic.prepare_request(method, **kwargs)

    def _open(self, what: str, br: Any, end: float) -> Any:
        """Send the request; the response with its headers read, or the error its status means."""
        import httpx2

        from gpuslice.kube.deadline import until

        request = self._generic.build_adapter_request(br)
        # Decoded (gzip) bodies could outgrow the caps by far before a chunk ends: ask for plain ones.
        request.headers["Accept-Encoding"] = "identity"
        self.counters.request()
        try:
            with until(end):
                response = self._generic.send(request, stream=True)
        except httpx2.HTTPError as exc:
            raise self._transport_error(what, exc, end) from exc
        if response.status_code >= 400:
            try:
                body = self._read(what, response, end, _ERROR_BODY_BYTES, truncate=True)
            finally:
                response.close()
            raise self._count(_status_error(what, response.status_code, response.reason_phrase, body))
        return response

    def _exchange(self, what: str, br: Any) -> bytes:
        end = time.monotonic() + self.limits.deadline_s
        response = self._open(what, br, end)
        try:
            return self._read(what, response, end, self.limits.max_body_bytes)
        finally:
            response.close()

    def _read(self, what: str, response: Any, end: float, cap: int, truncate: bool = False) -> bytes:
        import httpx2

        from gpuslice.kube.deadline import until

        declared = response.headers.get("Content-Length", "")
        if not truncate and declared.isdigit() and int(declared) > cap:
            raise self._count(TooLarge(f"{what}: the answer declares {declared} bytes; at most {cap} are read"))
        chunks: list[bytes] = []
        size = 0
        stream = response.iter_raw()
        try:
            while True:
                with until(end):
                    chunk = next(stream, None)
                if chunk is None:
                    return b"".join(chunks)
                size += len(chunk)
                if size > cap:
                    if truncate:
                        chunks.append(chunk[: cap - (size - len(chunk))])
                        return b"".join(chunks)
                    raise self._count(TooLarge(f"{what}: the answer is over {cap} bytes; refused"))
                chunks.append(chunk)
        except httpx2.HTTPError as exc:
            raise self._transport_error(what, exc, end) from exc

    def _lines(self, what: str, response: Any, end: float) -> Iterator[bytes]:
        import httpx2

        from gpuslice.kube.deadline import until

        cap = self.limits.max_line_bytes
        buffer = bytearray()
        stream = response.iter_raw()
        while True:
            try:
                with until(end):
                    chunk = next(stream, None)
            except httpx2.HTTPError as exc:
                raise self._transport_error(what, exc, end) from exc
            if chunk is None:
                if buffer.strip():
                    yield bytes(buffer)
                return
            buffer.extend(chunk)
            while (newline := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:newline])
                del buffer[: newline + 1]
                if line.strip():
                    yield line
            if len(buffer) > cap:
                raise self._count(TooLarge(f"{what}: a watch line is over {cap} bytes; refused"))

    def _decode_one(self, what: str, body: bytes, res: Any) -> Any:
        obj = self._decode_item(what, self._json_object(what, body), res)
        if obj is None:
            raise self._count(Malformed(f"{what}: the answer is not a {_kind(res)} object"))
        return obj

    def _decode_items(self, what: str, items: Any, res: Any) -> list[Any]:
        if items is None:
            return []
        if not isinstance(items, list):
            raise self._count(Malformed(f"{what}: items is not a list"))
        decoded = (self._decode_item(what, item, res) for item in items)
        return [obj for obj in decoded if obj is not None]

    def _decode_item(self, what: str, item: Any, res: Any) -> Any:
        """The typed object, or None (counted) when it lacks metadata.name or does not fit the model."""
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
            self._skipped(what, "an object without metadata.name")
            return None
        try:
            return res.from_dict(item)
        except Exception as exc:  # msgspec validation errors, wrong types in generic objects
            self._skipped(what, f"{metadata['name'][:64]!r}: {type(exc).__name__}: {str(exc)[:200]}")
            return None

    def _decode_event(self, what: str, line: bytes, res: Any) -> WatchEvent | None:
        try:
            event = json.loads(line)
        except ValueError:
            self._skipped(what, "a watch line that is not JSON")
            return None
        kind = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        if kind == "ERROR":
            raise self._count(_status_error(what, _int(obj, "code"), "", json.dumps(obj).encode()[:_ERROR_BODY_BYTES]))
        if kind not in _EVENT_TYPES or not isinstance(obj, dict):
            self._skipped(what, f"a watch event of type {str(kind)[:32]!r}")
            return None
        metadata = obj.get("metadata")
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if not isinstance(version, str) or not version:
            self._skipped(what, "a watch event without metadata.resourceVersion")
            return None
        if kind == "BOOKMARK":
            return WatchEvent(kind, None, version)
        decoded = self._decode_item(what, obj, res)
        return None if decoded is None else WatchEvent(kind, decoded, version)

    def _json_object(self, what: str, body: bytes) -> dict[str, Any]:
        try:
            decoded = json.loads(body)
        except ValueError as exc:
            raise self._count(Malformed(f"{what}: the answer is not JSON: {str(exc)[:100]}")) from exc
        if not isinstance(decoded, dict):
            raise self._count(Malformed(f"{what}: the answer is not a JSON object"))
        return decoded

    def _skipped(self, what: str, why: str) -> None:
        self.counters.skipped()
        log.warning("%s: skipped %s", what, why)

    def _count(self, error: KubeError) -> KubeError:
        self.counters.error(error.kind)
        return error

    def _transport_error(self, what: str, exc: Exception, end: float) -> KubeError:
        import httpx2

        if self._closed.is_set():
            return self._count(Stopped(f"{what}: the API client was closed"))
        from gpuslice.kube.deadline import ends_by

        if isinstance(exc, httpx2.TimeoutException) and time.monotonic() >= ends_by(end) - 0.05:
            return self._count(DeadlineExceeded(f"{what}: no complete answer within its deadline"))
        return self._count(KubeError(f"{what}: {type(exc).__name__}: {str(exc)[:200]}"))


def _status_error(what: str, code: int | None, reason: str, body: bytes) -> KubeError:
    """The KubeError for an HTTP status (or an ERROR event's Status), with the server's message."""
    message = reason
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    if isinstance(status, dict) and isinstance(status.get("message"), str):
        message = status["message"][:300]
    text = f"{what}: {code}: {message}" if code else f"{what}: {message or 'an error'}"
    if code == 404:
        return NotFound(text, code)
    if code == 410:
        return Gone(text, code)
    return KubeError(text, code)


def _int(obj: Any, key: str) -> int | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _selector(values: Mapping[str, str] | None) -> str | None:
    return ",".join(f"{key}={value}" for key, value in values.items()) if values else None


def _kind(res: Any) -> str:
    return str(getattr(res, "__name__", res))


def _name_of(obj: Any) -> str:
    metadata = getattr(obj, "metadata", None)
    name = getattr(metadata, "name", None) if metadata is not None else None
    if name is None and isinstance(obj, dict):
        name = (obj.get("metadata") or {}).get("name")
    return f"{type(obj).__name__} {name}"
