"""MIG devices for dynamic placements: the device plugin's MIG control, plus reading which instances exist."""

from __future__ import annotations

from typing import Protocol, cast

from gpuslice.discovery import Backend
from gpuslice.discovery.nvml import NvmlBackend
from gpuslice.discovery.nvml_mig import MigControl, NvmlMigControl, RecordingMigControl
from gpuslice.gpu import MigInstance, Node


class MigDevices(MigControl, Protocol):
    """Create and destroy MIG devices (MigControl) and list the ones a GPU has now."""

    def live(self, gpu_index: int) -> list[MigInstance]:
        """The MIG devices that exist on GPU `gpu_index` now."""
        ...


class NvmlMigDevices(NvmlMigControl):
    """NVML: instances survive a plugin restart, so `live` reads them back from the driver."""

    def live(self, gpu_index: int) -> list[MigInstance]:
        return list(self.backend.read_gpu(gpu_index).mig_instances)


class RecordingMigDevices(RecordingMigControl):
    """The fake backend's control: instances live in this process only, so a restart re-creates them."""

    def live(self, gpu_index: int) -> list[MigInstance]:
        return list(self.instances.get(gpu_index, {}).values())


def mig_devices_for(backend: Backend, node: Node) -> MigDevices | None:
    """The MIG control of this backend, or None when it cannot create MIG devices (host paths, idle).

    Chosen by the backend's name: the Backend protocol has no MIG-control capability to ask yet.
    """
    if backend.name == "nvml":
        return NvmlMigDevices(cast(NvmlBackend, backend))
    if backend.name == "fake":
        return RecordingMigDevices(node)
    return None
