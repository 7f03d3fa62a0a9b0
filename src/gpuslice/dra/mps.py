"""Per-claim MPS control daemons over the node core's daemon lifecycle (gpuslice.mps.daemon), quit on unprepare."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpuslice.allocation.mps_edits import CONTAINER_SHM
from gpuslice.gpu import Gpu

# The daemon lifecycle (gpuslice.mps) and shutil load where a daemon is made, started or stopped: every DRA
# start imports this module, most nodes never run an MPS claim, and registering need not wait for them.
if TYPE_CHECKING:  # a claim's config, decoded (gpuslice.dra.claims loads the models with the first one)
    from gpuslice.dra.opaque import MpsConfig
    from gpuslice.mps.control import MpsControl
    from gpuslice.mps.daemon import DaemonPlace

CONTAINER_PIPE_DIRECTORY = "/tmp/nvidia-mps"  # where NVIDIA's DRA driver mounts the pipe directory
_MIB = 2**20


class MpsClaimError(RuntimeError):
    """A claim's MPS daemon could not be started; the message names the claim."""


def daemon_dir(root: str | Path, claim_uid: str) -> Path:
    """`<mpsRoot>/<claim uid>`: the only daemon directory a checkpoint record may name."""
    return Path(root) / claim_uid


def claim_mps_edits(directory: Path) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """The env and mounts (container path, host path) a claim's containers get for its daemon in `directory`."""
    from gpuslice.mps.control import PIPE_ENV

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
    """Starts and stops the daemons under `root` (`<root>/<claim uid>/{pipe,log,shm}`); `ready_timeout_s`
    defaults to the node core's (gpuslice.mps.daemon.READY_TIMEOUT_S)."""

    def __init__(self, root: str | Path, control: MpsControl, ready_timeout_s: float | None = None) -> None:
        from gpuslice.mps.daemon import READY_TIMEOUT_S

        self.root = Path(root)
        self.control = control
        self.ready_timeout_s = READY_TIMEOUT_S if ready_timeout_s is None else ready_timeout_s

    def place(self, claim_uid: str, gpus: Sequence[Gpu] = ()) -> DaemonPlace:
        from gpuslice.mps.daemon import DaemonPlace

        directory = daemon_dir(self.root, claim_uid)
        return DaemonPlace(f"claim {claim_uid}", directory / "pipe", directory / "log", tuple(g.uuid for g in gpus))

    def start(self, claim_uid: str, gpus: Sequence[Gpu], config: MpsConfig) -> Path:
        """Start and configure the claim's daemon; on failure nothing is left running. Returns its directory."""
        from gpuslice.mps.daemon import MpsStartError, start_daemon

        check_limit_keys(gpus, config)
        place = self.place(claim_uid, gpus)
        try:
            start_daemon(self.control, place, limit_commands(gpus, config), self.ready_timeout_s,
                         (place.pipe_dir.parent / "shm",))  # fmt: skip
        except MpsStartError as exc:
            raise MpsClaimError(str(exc)) from exc
        return place.pipe_dir.parent

    def stop(self, claim_uid: str) -> None:
        """Quit the claim's daemon (if it still runs) and remove its directory, `<root>/<claim uid>`."""
        import shutil

        from gpuslice.mps.daemon import quit_daemon

        place = self.place(claim_uid)
        if place.pipe_dir.is_dir():
            quit_daemon(self.control, place, "unprepare")
        shutil.rmtree(place.pipe_dir.parent, ignore_errors=True)
