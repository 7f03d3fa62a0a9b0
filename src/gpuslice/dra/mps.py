"""Per-claim MPS control daemons: one per claim that asks for MPS, with the claim's limits, quit on unprepare."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from gpuslice.allocation.mps_edits import CONTAINER_SHM
from gpuslice.dra.opaque import MpsConfig
from gpuslice.gpu import Gpu
from gpuslice.mps import MpsControl, MpsDaemonError
from gpuslice.mps.control import PIPE_ENV
from gpuslice.mps.manager import LOG_ENV, PROBE_COMMAND, VISIBLE_ENV

log = logging.getLogger("gpuslice.dra")

CONTAINER_PIPE_DIRECTORY = "/tmp/nvidia-mps"  # where NVIDIA's DRA driver mounts the pipe directory
CLAIM_DAEMON_READY_S = 10.0
_MIB = 2**20


class MpsClaimError(RuntimeError):
    """A claim's MPS daemon could not be started; the message names the claim."""


def daemon_dir(root: str | Path, claim_uid: str) -> Path:
    """`<mpsRoot>/<claim uid>`: the only daemon directory a checkpoint record may name."""
    return Path(root) / claim_uid


def claim_mps_edits(directory: Path) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """The env and mounts (container path, host path) a claim's containers get for its daemon in `directory`."""
    mounts = ((CONTAINER_PIPE_DIRECTORY, str(directory / "pipe")), (CONTAINER_SHM, str(directory / "shm")))
    return {PIPE_ENV: CONTAINER_PIPE_DIRECTORY}, mounts


def limit_commands(gpus: Sequence[Gpu], config: MpsConfig) -> list[str]:
    """The daemon commands for a claim's limits; devices are numbered as the daemon sees them (claim order)."""
    commands = []
    for ordinal, gpu in enumerate(gpus):
        limit = config.default_pinned_device_memory_limit
        for key in (str(gpu.index), gpu.uuid):
            limit = config.default_per_device_pinned_memory_limit.get(key, limit)
        if limit is not None:
            commands.append(f"set_default_device_pinned_mem_limit {ordinal} {limit // _MIB}M")
    if config.default_active_thread_percentage is not None:
        commands.append(f"set_default_active_thread_percentage {config.default_active_thread_percentage}")
    return commands


def check_limit_keys(gpus: Sequence[Gpu], config: MpsConfig) -> None:
    """Every key of defaultPerDevicePinnedMemoryLimit names one of the claim's GPUs (by index or UUID)."""
    known = {str(gpu.index) for gpu in gpus} | {gpu.uuid for gpu in gpus}
    for key in config.default_per_device_pinned_memory_limit:
        if key not in known:
            raise MpsClaimError(
                f"mpsConfig.defaultPerDevicePinnedMemoryLimit: {key!r} is not a GPU of this claim "
                f"(GPUs: {', '.join(sorted(known))})"
            )


class ClaimMpsDaemons:
    """Starts and stops the daemons under `root` (`<root>/<claim uid>/{pipe,log,shm}`)."""

    def __init__(self, root: str | Path, control: MpsControl, ready_timeout_s: float = CLAIM_DAEMON_READY_S) -> None:
        self.root = Path(root)
        self.control = control
        self.ready_timeout_s = ready_timeout_s

    def env(self, directory: Path, gpus: Sequence[Gpu]) -> dict[str, str]:
        return {
            PIPE_ENV: str(directory / "pipe"),
            LOG_ENV: str(directory / "log"),
            VISIBLE_ENV: ",".join(gpu.uuid for gpu in gpus),
        }

    def start(self, claim_uid: str, gpus: Sequence[Gpu], config: MpsConfig) -> Path:
        """Start and configure the claim's daemon; on failure nothing is left running. Returns its directory."""
        check_limit_keys(gpus, config)
        directory = daemon_dir(self.root, claim_uid)
        env = self.env(directory, gpus)
        try:
            for sub in ("pipe", "log", "shm"):
                (directory / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MpsClaimError(f"MPS daemon: cannot create {exc.filename}: {exc.strerror}") from exc
        try:
            if (directory / "pipe" / "control").exists():
                self._quit_quietly(env)  # a daemon left from a run that died before recording it
            self.control.start_daemon(env)
            self._wait_ready(env)
            for command in limit_commands(gpus, config):
                self.control.send(command, env)
        except MpsDaemonError as exc:
            self._quit_quietly(env)
            raise MpsClaimError(f"MPS daemon: {exc}") from exc
        log.info("MPS daemon for claim %s on %s", claim_uid, ", ".join(gpu.uuid for gpu in gpus))
        return directory

    def _wait_ready(self, env: dict[str, str]) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            try:
                self.control.send(PROBE_COMMAND, env)
                return
            except MpsDaemonError:
                if time.monotonic() >= deadline:
                    raise
            time.sleep(0.05)

    def stop(self, claim_uid: str) -> None:
        """Quit the claim's daemon (if it still runs) and remove its directory, `<root>/<claim uid>`."""
        path = daemon_dir(self.root, claim_uid)
        if (path / "pipe" / "control").exists() or (path / "pipe").is_dir():
            self._quit_quietly({PIPE_ENV: str(path / "pipe"), LOG_ENV: str(path / "log")})
        shutil.rmtree(path, ignore_errors=True)

    def _quit_quietly(self, env: dict[str, str]) -> None:
        try:
            self.control.send("quit", env)
        except MpsDaemonError as exc:
            log.debug("MPS quit in %s: %s", env[PIPE_ENV], exc)
