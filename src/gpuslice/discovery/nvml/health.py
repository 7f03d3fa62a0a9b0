"""NVML as a health source: the Xid event stream, and the probe that may return a GPU to Healthy."""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

from gpuslice.discovery.capabilities import NVML_PROBE_INTERVAL_S, NVML_QUIET_S
from gpuslice.discovery.nvml.library import NvmlSession, NvmlUnavailable
from gpuslice.discovery.xid import XidEvent


class NvmlHealthSource:
    """Every Xid the NVML event loop reports; the Xid policy (gpuslice.health) decides what is critical.

    The backend's own ignore list is emptied so that ignored Xids still reach the policy: they are
    counted in metrics and logged as ignored instead of vanishing inside discovery.
    """

    name = "nvml"

    def __init__(self, backend: NvmlSession) -> None:
        self.backend = backend

    def prime(self) -> None:
        """NVML delivers only events that happen after registration: nothing to skip."""

    def records(self, stop: threading.Event) -> Generator[XidEvent, None, None]:
        self.backend.ignored_xids = frozenset()
        yield from self.backend.watch(stop)


class NvmlProbe:
    """The recovery probe on NVML (docs/health.md): the GPU is found on the bus by UUID and answers the
    memory-info and PCI-info queries. It runs only after the quiet period without a critical Xid, which
    the recovery state machine enforces; a MIG device is probed through its parent GPU.
    """

    quiet_s = NVML_QUIET_S
    probe_interval_s = NVML_PROBE_INTERVAL_S

    def __init__(self, backend: NvmlSession) -> None:
        self.backend = backend

    def probe(self, gpu_uuid: str) -> tuple[bool, str]:
        """(passed, what was seen) for the GPU with this UUID; never raises for NVML errors."""
        library = self.backend.library
        try:
            self.backend.open()
            handle = self._handle(gpu_uuid)
            if handle is None:
                return False, "not found on the bus"
            memory = library.nvmlDeviceGetMemoryInfo(handle)
            library.nvmlDeviceGetPciInfo(handle)
        except NvmlUnavailable as exc:
            return False, str(exc)
        except library.NVMLError as exc:
            return False, f"NVML query failed: {exc}"
        total = getattr(memory, "total", 0)
        return True, f"answers NVML queries ({int(total) >> 20} MiB memory)"

    def _handle(self, gpu_uuid: str) -> Any:
        library = self.backend.library
        for index in range(library.nvmlDeviceGetCount()):
            handle = library.nvmlDeviceGetHandleByIndex(index)
            uuid = library.nvmlDeviceGetUUID(handle)
            if (uuid.decode() if isinstance(uuid, bytes) else str(uuid)) == gpu_uuid:
                return handle
        return None
