"""Unix-socket chores the kubelet does in its device-plugin directory, and small gRPC server helpers."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from gpuslice.wire import SOCKET_PATH_MAX

log = logging.getLogger("gpuslice.kubelet")

_STOP_GRACE_S = 0.5


def wipe_unix_sockets(directory: Path, keep: Iterable[Path] = ()) -> list[Path]:
    """Remove every unix socket directly in `directory` (not in subdirectories); regular files stay."""
    kept = {path.absolute() for path in keep}
    removed: list[Path] = []
    for entry in sorted(directory.iterdir()):
        if entry.absolute() in kept:
            continue
        try:
            if stat.S_ISSOCK(entry.lstat().st_mode):
                entry.unlink()
                removed.append(entry)
        except FileNotFoundError:
            continue
    if removed:
        log.info("removed unix sockets: %s", ", ".join(path.name for path in removed))
    return removed


def check_socket_path(path: Path) -> None:
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise ValueError(f"unix socket path {path} is longer than {SOCKET_PATH_MAX} bytes")


@dataclass
class RunningServer:
    """A started grpc server and the executor that runs its handlers (we own both)."""

    server: Any
    executor: ThreadPoolExecutor
    path: Path

    def stop(self, before_join: Callable[[], None] | None = None) -> None:
        """Stop serving (grpc also unlinks the socket path), then wait for running handlers to finish."""
        self.server.stop(_STOP_GRACE_S).wait()
        if before_join is not None:
            before_join()
        self.executor.shutdown(wait=True)


def serve_unix(path: Path, add_servicers: Callable[[Any], None], workers: int, name: str) -> RunningServer:
    """Bind a fresh grpc server on `path` (a stale socket there is removed first) and start it."""
    check_socket_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_socket():
        path.unlink()
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
    server = grpc.server(executor)
    add_servicers(server)
    if server.add_insecure_port(f"unix:{path}") == 0:
        executor.shutdown(wait=False)
        raise OSError(f"cannot listen on unix socket {path}")
    server.start()
    return RunningServer(server, executor, path)
