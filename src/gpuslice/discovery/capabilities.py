"""What a backend can do beyond discovery: health events, recovery probes, MIG and time-slice control, as protocols."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Protocol

from gpuslice.discovery.health_file import HealthRecord
from gpuslice.gpu import MigInstance

# NVML's recovery timing (its Prober's): a probe counts only after a minute without a critical Xid, and a
# device that stays unhealthy is probed every half minute. Here rather than in discovery.nvml so that the
# recovery policy's default does not load the NVML package at every start.
NVML_QUIET_S = 60.0
NVML_PROBE_INTERVAL_S = 30.0


class HealthSource(Protocol):
    """Where health records come from: NVML Xid events, or the fake backend's events file."""

    name: str

    def prime(self) -> None:
        """Start observing now (called before registration, so no event after it is missed)."""
        ...

    def records(self, stop: threading.Event) -> Iterator[HealthRecord]:
        """Records until `stop` is set; runs on the health loop's own thread."""
        ...


class Prober(Protocol):
    """An active health probe of one GPU, for recovery on real hardware.

    `quiet_s`: a probe counts only this long after the device's last critical event; `probe_interval_s`:
    how often a device that stays unhealthy is probed again.
    """

    quiet_s: float
    probe_interval_s: float

    def probe(self, gpu_uuid: str) -> tuple[bool, str]:
        """(passed, what was seen) for the GPU with this UUID; never raises."""
        ...


class MigControlError(RuntimeError):
    """Creating or destroying a MIG instance failed; the message names GPU, profile/ids and the reason."""


class MigControl(Protocol):
    """Creates and destroys MIG devices on one node (NVML on hardware, a recording fake in tests)."""

    def create(self, gpu_index: int, profile: str, start: int) -> MigInstance:
        """Create GI `profile` at memory slice `start` plus a full-size CI; return the new MIG device.

        Raises MigControlError naming the GPU, profile and placement when that is not possible.
        """
        ...

    def destroy(self, gpu_index: int, gi: int, ci: int) -> None:
        """Destroy compute instance `ci` and then GPU instance `gi`."""
        ...

    def live_instances(self, gpu_indices: Sequence[int]) -> list[MigInstance] | None:
        """The MIG devices that exist now on these GPUs; None when this control cannot tell.

        Raises MigControlError (or RuntimeError) when the device cannot be read right now.
        """
        ...


class TimeSliceError(RuntimeError):
    """The time-slice interval could not be set; the message names the GPU."""


class TimeSliceControl(Protocol):
    """Sets how long each process on a GPU runs before the next (nvidia-smi on hardware, a recording fake)."""

    def set_level(self, gpu_uuid: str, level: int) -> None:
        """Set the GPU's time-slice level (0 Default, 1 Short, 2 Medium, 3 Long); TimeSliceError on failure."""
        ...
