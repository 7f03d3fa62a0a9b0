"""Kubelet restarts: notice a re-created kubelet.sock or our own vanished sockets, and register again."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gpuslice.plugin.server import PluginStartError, RegistrationError
from gpuslice.retry import Backoff

log = logging.getLogger("gpuslice.plugin.kubelet")

KUBELET_POLL_S = 0.05
BACKOFF_START_S = 0.1
BACKOFF_MAX_S = 5.0
SETTLE_S = 0.25  # how long a half-seen restart (one sign of two) may settle before we register anyway

# (st_dev, st_ino, st_ctime_ns): the inode alone is not enough, ext4 hands a re-created socket the same number.
FileIdentity = tuple[int, int, int]


class Registrable(Protocol):
    """What the watcher drives; PluginManager is one."""

    @property
    def socket_paths(self) -> tuple[Path, ...]: ...

    def reregister(self) -> None:
        """Serve on fresh sockets and register every resource again; raises on failure, leaving nothing served."""
        ...


def file_identity(path: Path) -> FileIdentity | None:
    try:
        stat = os.lstat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_ctime_ns


class KubeletWatcher:
    """Keeps a plugin registered with one kubelet, on thread `gpuslice-kubelet-watch`.

    Every poll interval it compares `kubelet.sock` (device, inode, ctime) with what it was at the last
    successful registration, and checks that each of our own sockets is still the file we created. A
    kubelet restart wipes every socket in its directory and creates a new kubelet.sock, so either sign
    triggers a re-registration. When registration fails (no kubelet yet, or it refuses), the watcher
    retries with exponential backoff and says so in the log; a new kubelet.sock retries at once.
    """

    def __init__(
        self,
        kubelet_socket: str | Path,
        target: Registrable,
        *,
        poll_interval_s: float = KUBELET_POLL_S,
        backoff: Backoff | None = None,
        on_registered: Callable[[], None] | None = None,
        on_failure: Callable[[Exception], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kubelet_socket = Path(kubelet_socket)
        self.target = target
        self.poll_interval_s = poll_interval_s
        self._backoff = backoff or Backoff(BACKOFF_START_S, BACKOFF_MAX_S)
        self._on_registered = on_registered or (lambda: None)
        self._on_failure = on_failure or (lambda exc: None)
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Condition()
        self._registered = False
        self._kubelet_seen: FileIdentity | None = None
        self._next_attempt = 0.0
        self._last_poll: FileIdentity | None = None
        self._suspect_since: float | None = None
        self.registrations = 0
        self.failures = 0

    @property
    def registered(self) -> bool:
        """True while the last attempt succeeded and no restart has been noticed since."""
        with self._lock:
            return self._registered

    def wait_registered(self, timeout: float | None = None) -> bool:
        """Block until registered (True) or `timeout` seconds pass (False)."""
        with self._lock:
            return self._lock.wait_for(lambda: self._registered, timeout)

    def start(self, register_now: bool = True) -> bool:
        """Register once in the caller's thread (when asked), then keep watching; True if registered now.

        A failed first attempt is not an error: the watcher keeps retrying in the background.
        PluginStartError on the first attempt (we cannot serve at all) is raised.
        """
        registered = self._attempt(first=True) if register_now else False
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="gpuslice-kubelet-watch", daemon=True)
            self._thread.start()
        return registered

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_interval_s):
            try:
                self.check()
            except Exception:  # the watcher must outlive any surprise; the next poll tries again
                log.exception("kubelet watch failed")

    def check(self) -> None:
        """One poll: re-register if the kubelet restarted, or retry a failed registration when due."""
        kubelet_now = file_identity(self.kubelet_socket)
        previous_poll, self._last_poll = self._last_poll, kubelet_now
        with self._lock:
            registered, kubelet_seen = self._registered, self._kubelet_seen
        if not registered:
            # A kubelet.sock that changed and then held still for a poll is a kubelet that finished starting.
            appeared = kubelet_now is not None and kubelet_now != kubelet_seen and kubelet_now == previous_poll
            if appeared or self._clock() >= self._next_attempt:
                if appeared:
                    self._backoff.success()
                self._attempt()
            return
        reason = self._restart_reason(kubelet_now, kubelet_seen)
        if reason is not None:
            log.info("%s; registering again", reason)
            with self._lock:
                self._registered = False
            self._suspect_since = None
            self._backoff.success()
            self._attempt()

    def _restart_reason(self, kubelet_now: FileIdentity | None, kubelet_seen: FileIdentity | None) -> str | None:
        """Why to register again now, or None (also None while a half-seen restart settles).

        A new inode on kubelet.sock means the kubelet has wiped the directory and listens again: go. A
        vanished socket of ours, or a kubelet.sock whose ctime alone changed (a reused inode, or only a
        new link or mode), may be a restart in progress: registering in the middle of the wipe would lose
        the new socket, so wait until both signs are there, or SETTLE_S has passed.
        """
        if kubelet_now is not None and (kubelet_seen is None or kubelet_now[:2] != kubelet_seen[:2]):
            return f"inotify-equivalent: {self.kubelet_socket} created (new inode)"
        touched = kubelet_now is not None and kubelet_now != kubelet_seen
        vanished = self._vanished_socket()
        if touched and vanished is not None:
            return f"{self.kubelet_socket} re-created and our socket {vanished} removed"
        if not touched and vanished is None:
            self._suspect_since = None
            return None
        now = self._clock()
        if self._suspect_since is None:
            self._suspect_since = now
            return None
        if now - self._suspect_since < SETTLE_S:
            return None
        if vanished is not None:
            return f"our socket {vanished} was removed"
        return f"{self.kubelet_socket} changed"

    def _vanished_socket(self) -> Path | None:
        """One of our sockets that is gone, or None.

        Only absence counts. A socket that is there but is a new file is ours too (a config reload
        replaced that resource's server); a kubelet's wipe leaves nothing behind.
        """
        return next((path for path in self.target.socket_paths if file_identity(path) is None), None)

    def _attempt(self, first: bool = False) -> bool:
        kubelet_before = file_identity(self.kubelet_socket)
        if kubelet_before is None:
            self._fail(FileNotFoundError(f"kubelet socket {self.kubelet_socket} does not exist"), kubelet_before)
            return False
        try:
            self.target.reregister()
        except PluginStartError as exc:
            if first:
                raise
            self._fail(exc, kubelet_before)
            return False
        except (RegistrationError, OSError) as exc:
            self._fail(exc, kubelet_before)
            return False
        with self._lock:
            # The kubelet identity from *before* Register: a restart while registering is noticed next poll.
            self._registered, self._kubelet_seen = True, kubelet_before
            self.registrations += 1
            self._lock.notify_all()
        self._backoff.success()
        self._on_registered()
        return True

    def _fail(self, exc: Exception, kubelet_seen: FileIdentity | None) -> None:
        delay = self._backoff.failure()
        with self._lock:
            self._registered, self._kubelet_seen = False, kubelet_seen
            self.failures += 1
        self._next_attempt = self._clock() + delay
        log.warning("cannot register with the kubelet: %s; retrying in %.1fs", exc, delay)
        self._on_failure(exc)
