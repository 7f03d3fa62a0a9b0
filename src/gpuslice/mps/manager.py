"""Runs one MPS control daemon per MPS-shared resource: directories, start, default limits, readiness, quit."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

from gpuslice.allocation.mps_edits import DaemonSettings, MpsConfigError, daemon_settings, log_directory, pipe_directory
from gpuslice.mps.control import MpsControl
from gpuslice.mps.daemon import READY_TIMEOUT_S, DaemonPlace, probe_daemon, quit_daemon, start_daemon
from gpuslice.mps.daemon import MpsStartError as MpsStartError  # the manager's callers know it here
from gpuslice.records import record
from gpuslice.sharing import Resource

STARTED_MARKER = ".started"
READY_MARKER = ".ready"


@record
class RunningDaemon:
    """A daemon this manager started, and what it was told."""

    settings: DaemonSettings
    pipe_dir: Path
    log_dir: Path

    @property
    def place(self) -> DaemonPlace:
        return DaemonPlace(self.settings.resource, self.pipe_dir, self.log_dir, self.settings.gpu_uuids)

    @property
    def env(self) -> dict[str, str]:
        return self.place.env


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
        start_daemon(self.control, daemon.place, settings.commands, self.ready_timeout_s, (self.root / "shm",))
        (daemon.pipe_dir.parent / STARTED_MARKER).touch()
        return daemon

    def probe(self) -> dict[str, str | None]:
        """Resource -> the daemon's answer to get_default_active_thread_percentage, or None if it failed."""
        return {daemon.settings.resource: probe_daemon(self.control, daemon.place) for daemon in self.daemons}

    def stop(self) -> None:
        """Send `quit` to every daemon started here and remove the markers. Idempotent."""
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        daemons, self._daemons = self._daemons, []
        for daemon in reversed(daemons):
            quit_daemon(self.control, daemon.place, "shutdown")
            (daemon.pipe_dir.parent / STARTED_MARKER).unlink(missing_ok=True)
        (self.root / READY_MARKER).unlink(missing_ok=True)
