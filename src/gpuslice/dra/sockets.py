"""gRPC servers on Unix sockets for the DRA plugin: stale sockets removed first, removed again on stop."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from gpuslice.fsutil.sockets import remove_own_socket, remove_stale_socket, socket_inode
from gpuslice.wire import SOCKET_PATH_MAX, server_options

_STOP_GRACE_S = 1.0


class SocketError(OSError):
    """A socket we cannot listen on; the message names the path."""


class UnixServer:
    """A started gRPC server and its handler threads (a plain class: a dataclass costs every start its build)."""

    def __init__(self, server: Any, executor: ThreadPoolExecutor, path: Path, inode: int | None) -> None:
        self.server = server
        self.executor = executor
        self.path = path
        self.inode = inode  # the socket file we made, as the device plugin's servers keep it

    def stop(self) -> None:
        self.server.stop(_STOP_GRACE_S).wait()
        self.executor.shutdown(wait=True)
        remove_own_socket(self.path, self.inode)

    def socket_present(self) -> bool:
        """False once our socket file is gone or replaced (so the kubelet can no longer find us)."""
        return self.inode is not None and socket_inode(self.path) == self.inode


def serve(path: Path, add_services: Callable[[Any], None], workers: int, name: str) -> UnixServer:
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise SocketError(f"unix socket path {path} is longer than {SOCKET_PATH_MAX} bytes")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SocketError(f"cannot create {path.parent}: {exc.strerror}") from exc
    remove_stale_socket(path)  # a stale socket from a process that died
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
    server = grpc.server(executor, options=server_options())
    add_services(server)
    if server.add_insecure_port(f"unix:{path}") == 0:
        executor.shutdown(wait=False)
        raise SocketError(f"cannot listen on unix socket {path}")
    server.start()
    return UnixServer(server, executor, path, socket_inode(path))
