"""MPS: the control-daemon manager (one daemon per MPS-shared resource) behind a Protocol for the control program."""

from gpuslice.allocation.mps_edits import (
    DaemonSettings,
    MpsConfigError,
    daemon_settings,
    max_clients,
)
from gpuslice.mps.control import (
    DEFAULT_CONTROL_COMMAND,
    CommandControl,
    MpsControl,
    MpsDaemonError,
)
from gpuslice.mps.fake import (
    FakeMpsControl,
)
from gpuslice.mps.manager import (
    MpsManager,
    MpsStartError,
    RunningDaemon,
)

__all__ = [
    "DEFAULT_CONTROL_COMMAND",
    "CommandControl",
    "DaemonSettings",
    "FakeMpsControl",
    "MpsConfigError",
    "MpsControl",
    "MpsDaemonError",
    "MpsManager",
    "MpsStartError",
    "RunningDaemon",
    "daemon_settings",
    "max_clients",
]
