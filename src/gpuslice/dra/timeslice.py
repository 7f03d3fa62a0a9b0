"""The time-slice interval of a GPU (`nvidia-smi compute-policy --set-timeslice`), behind a Protocol."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from typing import Protocol

DEFAULT_LEVEL = 0
NVIDIA_SMI_TIMEOUT_S = 10.0


class TimeSliceError(RuntimeError):
    """The interval could not be set; the message names the GPU."""


class TimeSliceControl(Protocol):
    def set_level(self, gpu_uuid: str, level: int) -> None:
        """Set the GPU's time-slice level (0 Default, 1 Short, 2 Medium, 3 Long)."""
        ...


class NvidiaSmiTimeSlice:
    """Runs nvidia-smi (or a stand-in with its command line)."""

    def __init__(self, command: Sequence[str] = ("nvidia-smi",)) -> None:
        self.command = tuple(command)

    def set_level(self, gpu_uuid: str, level: int) -> None:
        args = [*self.command, "compute-policy", "-i", gpu_uuid, "--set-timeslice", str(level)]
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TimeSliceError(f"GPU {gpu_uuid}: cannot run {self.command[0]}: {exc}") from exc
        if done.returncode != 0:
            raise TimeSliceError(f"GPU {gpu_uuid}: set time-slice {level}: {(done.stderr or done.stdout).strip()}")


class RecordingTimeSlice:
    """The fake backend's GPUs: remembers each GPU's level."""

    def __init__(self) -> None:
        self.levels: dict[str, int] = {}
        self._lock = threading.Lock()

    def set_level(self, gpu_uuid: str, level: int) -> None:
        with self._lock:
            self.levels[gpu_uuid] = level
