"""The time-slice controls: `nvidia-smi compute-policy --set-timeslice` on a node, a recording one for the fake."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence

from gpuslice.discovery.capabilities import TimeSliceError

DEFAULT_TIMESLICE_LEVEL = 0  # what a GPU is set back to when its claim ends
NVIDIA_SMI_TIMEOUT_S = 10.0


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
