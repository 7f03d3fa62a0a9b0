"""Runs one MPS control daemon per MPS-shared resource: directories, start, default limits, readiness, quit."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpuslice.allocation.mps_edits import DaemonSettings, MpsConfigError, daemon_settings, log_directory, pipe_directory
from gpuslice.mps.control import PIPE_ENV, MpsControl, MpsDaemonError
from gpuslice.sharing import Resource

log = logging.getLogger("gpuslice.mps")

LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
PROBE_COMMAND = "get_default_active_thread_percentage"
STARTED_MARKER = ".started"
READY_MARKER = ".ready"
READY_TIMEOUT_S = 10.0
READY_POLL_S = 0.1


class MpsStartError(RuntimeError):
    """A daemon could not be started or configured; the message names the resource and the cause."""


@dataclass(frozen=True)
class RunningDaemon:
    """A daemon this manager started, and what it was told."""

    settings: DaemonSettings
    pipe_dir: Path
    log_dir: Path

    @property
    def env(self) -> dict[str, str]:
        return {
            PIPE_ENV: str(self.pipe_dir),
            LOG_ENV: str(self.log_dir),
            VISIBLE_ENV: ",".join(self.settings.gpu_uuids),
        }


class MpsManager:
    """The MPS daemons of one plugin run, under `mps_root` (NVIDIA's flags.mpsRoot, e.g. /run/nvidia/mps).

    Layout, as NVIDIA's mps-control-daemon makes it: `<root>/<resource>/pipe`, `<root>/<resource>/log`,
    `<root>/<resource>/.started` per daemon, `<root>/shm` (mounted on the clients' /dev/shm) and
    `<root>/.ready` once every daemon is configured.
    """

    def __init__(
        self,
        mps_root: str | Path,
        control: MpsControl,
        ready_timeout_s: float = READY_TIMEOUT_S,
    ) -> None:
        self.root = Path(mps_root)
        self.control = control
        self.ready_timeout_s = ready_timeout_s
        self._daemons: list[RunningDaemon] = []
        self._lock = threading.Lock()

    @property
    def daemons(self) -> tuple[RunningDaemon, ...]:
        with self._lock:
            return tuple(self._daemons)

    def plan(self, resources: Iterable[Resource]) -> tuple[DaemonSettings, ...]:
        """The daemons `resources` need; MpsConfigError (NVIDIA's text) past a GPU's client cap."""
        return tuple(daemon_settings(resource) for resource in resources if resource.sharing == "mps")

    def start(self, resources: Iterable[Resource]) -> None:
        """Start and configure a daemon per MPS resource; on any failure stop those started and raise."""
        try:
            planned = self.plan(resources)
        except MpsConfigError as exc:
            raise MpsStartError(str(exc)) from exc
        with self._lock:
            if self._daemons:
                raise MpsStartError("MPS daemons are already running; stop them first")
            try:
                for settings in planned:
                    self._daemons.append(self._start_one(settings))
                if planned:
                    (self.root / READY_MARKER).touch()
            except BaseException:
                self._stop_locked()
                raise

    def _start_one(self, settings: DaemonSettings) -> RunningDaemon:
        daemon = RunningDaemon(
            settings,
            Path(pipe_directory(settings.resource, str(self.root))),
            Path(log_directory(settings.resource, str(self.root))),
        )
        where = f"MPS daemon for {settings.resource}"
        try:
            for directory in (daemon.pipe_dir, daemon.log_dir, self.root / "shm"):
                directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MpsStartError(f"{where}: cannot create {exc.filename}: {exc.strerror}") from exc
        if (daemon.pipe_dir / "control").exists():
            self._quit_quietly(daemon, "stale daemon from an earlier run")
        try:
            self.control.start_daemon(daemon.env)
            self._wait_ready(daemon)
            for command in settings.commands:
                self.control.send(command, daemon.env)
        except MpsDaemonError as exc:
            self._quit_quietly(daemon, "start failed")
            raise MpsStartError(f"{where}: {exc}") from exc
        (daemon.pipe_dir.parent / STARTED_MARKER).touch()
        log.info(
            "MPS daemon for %s on %s: %s",
            settings.resource,
            ", ".join(settings.gpu_uuids),
            "; ".join(settings.commands),
        )
        return daemon

    def _wait_ready(self, daemon: RunningDaemon) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            try:
                self.control.send(PROBE_COMMAND, daemon.env)
                return
            except MpsDaemonError as exc:
                if time.monotonic() >= deadline:
                    raise MpsDaemonError(
                        f"error waiting for MPS daemon: error checking MPS daemon health: {exc}"
                    ) from exc
            time.sleep(READY_POLL_S)

    def probe(self) -> dict[str, str | None]:
        """Resource -> the daemon's answer to get_default_active_thread_percentage, or None if it failed."""
        answers: dict[str, str | None] = {}
        for daemon in self.daemons:
            try:
                answers[daemon.settings.resource] = self.control.send(PROBE_COMMAND, daemon.env)
            except MpsDaemonError as exc:
                log.warning("MPS daemon for %s does not answer: %s", daemon.settings.resource, exc)
                answers[daemon.settings.resource] = None
        return answers

    def stop(self) -> None:
        """Send `quit` to every daemon started here and remove the markers. Idempotent."""
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        daemons, self._daemons = self._daemons, []
        for daemon in reversed(daemons):
            self._quit_quietly(daemon, "shutdown")
            (daemon.pipe_dir.parent / STARTED_MARKER).unlink(missing_ok=True)
        (self.root / READY_MARKER).unlink(missing_ok=True)

    def _quit_quietly(self, daemon: RunningDaemon, why: str) -> None:
        try:
            self.control.send("quit", daemon.env)
        except MpsDaemonError as exc:
            log.warning("MPS daemon for %s: quit (%s) failed: %s", daemon.settings.resource, why, exc)
