"""An in-memory MPS control program for tests and the fake backend: records what it is told, keeps the defaults."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from gpuslice.mps.control import PIPE_ENV, MpsDaemonError


class FakeDaemon:
    """One running fake daemon, keyed by its pipe directory (mutable state: a plain class, not a dataclass,
    whose methods would be compiled at every start)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.commands: list[str] = []
        self.thread_percentage = "100"
        self.pinned: dict[str, str] = {}


class FakeMpsControl:
    """Behaves like nvidia-cuda-mps-control for the commands gpuslice sends.

    `fail_on` makes every command starting with that text fail, as a broken daemon would.
    """

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.daemons: dict[str, FakeDaemon] = {}
        self.stopped: list[str] = []
        self.calls: list[tuple[str, str]] = []  # (pipe directory, "-d" or the command)
        self._lock = threading.Lock()

    def start_daemon(self, env: Mapping[str, str]) -> None:
        pipe = env[PIPE_ENV]
        with self._lock:
            self.calls.append((pipe, "-d"))
            if pipe in self.daemons:
                raise MpsDaemonError(f"failed to start MPS daemon: one is already running on {pipe}")
            self.daemons[pipe] = FakeDaemon(dict(env))

    def send(self, command: str, env: Mapping[str, str]) -> str:
        pipe = env[PIPE_ENV]
        with self._lock:
            self.calls.append((pipe, command))
            daemon = self.daemons.get(pipe)
            if daemon is None or (self.fail_on is not None and command.startswith(self.fail_on)):
                raise MpsDaemonError(f"failed to send command to MPS daemon ({command}): exit status 1")
            daemon.commands.append(command)
            words = command.split()
            if words[0] == "quit":
                del self.daemons[pipe]
                self.stopped.append(pipe)
            elif words[0] == "set_default_active_thread_percentage":
                daemon.thread_percentage = words[1]
            elif words[0] == "set_default_device_pinned_mem_limit":
                daemon.pinned[words[1]] = words[2]
            elif words[0] == "get_default_active_thread_percentage":
                return daemon.thread_percentage
            return ""
