"""One MPS control daemon's lifecycle: its directories, start, readiness probe, commands, quit (both front ends)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from gpuslice.mps.control import PIPE_ENV, MpsControl, MpsDaemonError
from gpuslice.records import record

log = logging.getLogger("gpuslice.mps")

LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
PROBE_COMMAND = "get_default_active_thread_percentage"
READY_TIMEOUT_S = 10.0
READY_POLL_S = 0.1


class MpsStartError(RuntimeError):
    """A daemon could not be started or configured; the message names what it serves and the cause."""


@record
class DaemonPlace:
    """Where one daemon lives and what it serves: the device plugin's resource or a DRA claim (`name`)."""

    name: str  # for messages: "nvidia.com/gpu", "claim <uid>"
    pipe_dir: Path
    log_dir: Path
    gpu_uuids: tuple[str, ...]

    @property
    def env(self) -> dict[str, str]:
        return {PIPE_ENV: str(self.pipe_dir), LOG_ENV: str(self.log_dir), VISIBLE_ENV: ",".join(self.gpu_uuids)}


def start_daemon(
    control: MpsControl,
    place: DaemonPlace,
    commands: Sequence[str],
    ready_timeout_s: float = READY_TIMEOUT_S,
    also_create: Sequence[Path] = (),
) -> None:
    """Make the directories, quit a daemon left there by an earlier run, start, wait until it answers,
    send `commands`; on any failure quit it again and raise MpsStartError, so nothing is left running."""
    where = f"MPS daemon for {place.name}"
    try:
        for directory in (place.pipe_dir, place.log_dir, *also_create):
            directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MpsStartError(f"{where}: cannot create {exc.filename}: {exc.strerror}") from exc
    if (place.pipe_dir / "control").exists():
        quit_daemon(control, place, "stale daemon from an earlier run")
    try:
        control.start_daemon(place.env)
        _wait_ready(control, place, ready_timeout_s)
        for command in commands:
            control.send(command, place.env)
    except MpsDaemonError as exc:
        quit_daemon(control, place, "start failed")
        raise MpsStartError(f"{where}: {exc}") from exc
    log.info("%s on %s: %s", where, ", ".join(place.gpu_uuids), "; ".join(commands))


def _wait_ready(control: MpsControl, place: DaemonPlace, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            control.send(PROBE_COMMAND, place.env)
            return
        except MpsDaemonError as exc:
            if time.monotonic() >= deadline:
                raise MpsDaemonError(f"error waiting for MPS daemon: error checking MPS daemon health: {exc}") from exc
        time.sleep(READY_POLL_S)


def probe_daemon(control: MpsControl, place: DaemonPlace) -> str | None:
    """The daemon's answer to the probe command, None (logged) when it does not answer."""
    try:
        return control.send(PROBE_COMMAND, place.env)
    except MpsDaemonError as exc:
        log.warning("MPS daemon for %s does not answer: %s", place.name, exc)
        return None


def quit_daemon(control: MpsControl, place: DaemonPlace, why: str) -> None:
    """Send `quit`; a daemon that is not there is logged, never an error (quitting is idempotent)."""
    try:
        control.send("quit", place.env)
    except MpsDaemonError as exc:
        log.warning("MPS daemon for %s: quit (%s) failed: %s", place.name, why, exc)
