"""httpx's transport over a network backend that bounds every socket operation by the request's deadline."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import weakref
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2

from gpuslice.kube.deadline import bounded


class _Stream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def shutdown(self) -> None:
        """Wake a read blocked on another thread (closing the socket alone does not)."""
        sock = self._inner.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, bounded(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, bounded(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, bounded(timeout, httpcore2.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore2.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore2.SyncBackend()
        self._streams: weakref.WeakSet[_Stream] = weakref.WeakSet()
        self._lock = threading.Lock()

    def _track(self, stream: httpcore2.NetworkStream) -> _Stream:
        wrapped = _Stream(stream)
        with self._lock:
            self._streams.add(wrapped)
        return wrapped

    def shutdown(self) -> None:
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.shutdown()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        left = bounded(timeout, httpcore2.ConnectTimeout)
        return self._track(self._inner.connect_tcp(host, port, left, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        left = bounded(timeout, httpcore2.ConnectTimeout)
        return self._track(self._inner.connect_unix_socket(path, left, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx2.HTTPTransport):
    """httpx's own transport over the deadline-bounded backend (TLS settings as lightkube computed them)."""

    def __init__(self, ssl_context: ssl.SSLContext, max_connections: int = 4) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        self._backend = _Backend()
        # HTTPTransport builds its pool without a way to pass a network backend; this pool is the same
        # one with ours (httpx2 is pinned in the lock files, and the trickle tests fail if this breaks).
        self._pool = httpcore2.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=30.0,
            network_backend=self._backend,
        )

    def shutdown(self) -> None:
        """Break every open connection: requests in flight on any thread fail at once."""
        self._backend.shutdown()
