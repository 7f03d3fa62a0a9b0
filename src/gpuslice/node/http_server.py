"""A small HTTP/1.1 server that a hostile client cannot exhaust: one event-loop thread, a fixed handler pool."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gpuslice.records import record

log = logging.getLogger("gpuslice.node.http")

# (status, body, content type) for a GET of a path; it runs on the handler pool, never on the event loop.
Route = Callable[[str], tuple[int, bytes, str]]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_TEXT = "text/plain; charset=utf-8"


@record
class HttpLimits:
    """What one client may cost. Idle or half-sent connections cost a socket and a buffer, never a thread.

    max_connections: open at once; one more is answered 503 and closed at once (probes and a scraper
    need a handful). max_per_client: open at once from one address, so that one hostile pod cannot
    hold every slot and starve the kubelet's probes and the scraper. request_timeout_s: the whole
    request head must arrive within it from accept, so a client sending a byte a second is dropped as
    surely as a silent one. write_timeout_s: a client that does not read its answer is dropped.
    max_request_bytes: request line plus headers. handler_workers: the threads that render /metrics
    and run the probes.
    """

    max_connections: int = 64
    max_per_client: int = 16
    request_timeout_s: float = 5.0
    write_timeout_s: float = 5.0
    max_request_bytes: int = 8192
    handler_workers: int = 2


class BoundedHttpServer:
    """Serves GET and HEAD through `route`; binds in the constructor so a busy port fails before start()."""

    def __init__(
        self, address: str, port: int, route: Route, limits: HttpLimits | None = None, name: str = "gpuslice-http"
    ) -> None:
        self.limits = limits or HttpLimits()
        self._route = route
        self._name = name
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self._socket = socket.create_server((address, port), family=family, backlog=128)
        self._socket.setblocking(False)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None
        self._started = threading.Event()
        self._executor: ThreadPoolExecutor | None = None
        self._open = 0
        self._per_client: dict[str, int] = {}
        self.refused = 0  # connections over max_connections, answered 503
        self.timed_out = 0  # connections dropped for a request head that did not arrive in time

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def open_connections(self) -> int:
        return self._open

    def start(self) -> None:
        if self._thread is not None:
            return
        self._executor = ThreadPoolExecutor(self.limits.handler_workers, thread_name_prefix=f"{self._name}-handler")
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        self._started.wait()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None and self._loop is not None and self._stop_requested is not None:
            self._loop.call_soon_threadsafe(self._stop_requested.set)
            thread.join()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._socket.close()

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_requested = asyncio.Event()
        connections: set[asyncio.Task[None]] = set()

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            try:
                await self._connection(reader, writer)
            finally:
                connections.discard(task)

        server = await asyncio.start_server(accepted, sock=self._socket, limit=self.limits.max_request_bytes)
        self._started.set()
        try:
            await self._stop_requested.wait()
        finally:
            server.close()
            for task in list(connections):
                task.cancel()
            await asyncio.gather(*connections, return_exceptions=True)
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        from_client = self._per_client.get(client, 0)
        if self._open >= self.limits.max_connections or from_client >= self.limits.max_per_client:
            self.refused += 1
            await self._answer(writer, 503, b"too many connections\n", _TEXT, head_only=False)
            return
        self._open += 1
        self._per_client[client] = from_client + 1
        try:
            await self._serve_one(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        finally:
            self._open -= 1
            left = self._per_client[client] - 1
            if left:
                self._per_client[client] = left
            else:
                del self._per_client[client]
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.limits.request_timeout_s)
        except TimeoutError:
            self.timed_out += 1
            await self._answer(writer, 408, b"request not received in time\n", _TEXT, head_only=False)
            return
        except (asyncio.LimitOverrunError, ValueError):
            limit = self.limits.max_request_bytes
            await self._answer(writer, 431, f"request head over {limit} bytes\n".encode(), _TEXT, head_only=False)
            return
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            await self._answer(writer, 400, b"bad request line\n", _TEXT, head_only=False)
            return
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            await self._answer(writer, 405, b"only GET and HEAD\n", _TEXT, head_only=False)
            return
        path = target.split("?", 1)[0]
        try:
            status, body, content_type = await asyncio.get_running_loop().run_in_executor(
                self._executor, self._route, path
            )
        except Exception:  # a failing route is a 500 for this request, not a dead server
            log.exception("HTTP handler for %r failed", path)
            status, body, content_type = 500, b"internal error\n", _TEXT
        await self._answer(writer, status, body, content_type, head_only=method == "HEAD")

    async def _answer(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str, head_only: bool
    ) -> None:
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode("latin-1")
        writer.write(head if head_only else head + body)
        with contextlib.suppress(TimeoutError, OSError):  # a client that does not read is dropped
            await asyncio.wait_for(writer.drain(), self.limits.write_timeout_s)
        writer.close()
