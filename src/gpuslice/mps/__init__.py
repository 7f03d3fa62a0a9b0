"""MPS: the control-daemon manager (one daemon per MPS-shared resource) behind a Protocol for the control program."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.allocation.mps_edits import DaemonSettings as DaemonSettings
    from gpuslice.allocation.mps_edits import MpsConfigError as MpsConfigError
    from gpuslice.allocation.mps_edits import daemon_settings as daemon_settings
    from gpuslice.allocation.mps_edits import max_clients as max_clients
    from gpuslice.mps.control import DEFAULT_CONTROL_COMMAND as DEFAULT_CONTROL_COMMAND
    from gpuslice.mps.control import CommandControl as CommandControl
    from gpuslice.mps.control import MpsControl as MpsControl
    from gpuslice.mps.control import MpsDaemonError as MpsDaemonError
    from gpuslice.mps.fake import FakeMpsControl as FakeMpsControl
    from gpuslice.mps.manager import MpsManager as MpsManager
    from gpuslice.mps.manager import MpsStartError as MpsStartError
    from gpuslice.mps.manager import RunningDaemon as RunningDaemon

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "gpuslice.allocation.mps_edits": ("DaemonSettings", "MpsConfigError", "daemon_settings", "max_clients"),
        "gpuslice.mps.control": ("DEFAULT_CONTROL_COMMAND", "CommandControl", "MpsControl", "MpsDaemonError"),
        "gpuslice.mps.fake": ("FakeMpsControl",),
        "gpuslice.mps.manager": ("MpsManager", "MpsStartError", "RunningDaemon"),
    },
)
