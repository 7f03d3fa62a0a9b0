"""Dynamic MIG through NVML: create a GPU instance with one full compute instance at a placement; destroy it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from gpuslice.discovery.capabilities import MigControlError
from gpuslice.discovery.nvml.library import (
    COMPUTE_INSTANCE_ENGINE_SHARED,
    COMPUTE_INSTANCE_PROFILE_BY_SLICES,
    NvmlSession,
)
from gpuslice.gpu import InvalidMigLayout, MigInstance, catalogue_for

log = logging.getLogger(__name__)


class NvmlMigControl:
    """MigControl over an NvmlBackend's library (needs root and MIG mode already enabled)."""

    def __init__(self, backend: NvmlSession) -> None:
        self.backend = backend

    def live_instances(self, gpu_indices: Sequence[int]) -> list[MigInstance]:
        """NVML's MIG devices on these GPUs, read afresh."""
        return [m for index in gpu_indices for m in self.backend.read_gpu(index).mig_instances]

    def create(self, gpu_index: int, profile: str, start: int) -> MigInstance:
        backend = self.backend
        gpu = backend.read_gpu(gpu_index)
        where = f"GPU {gpu_index} ({gpu.uuid}): {profile} at slice {start}"
        if not gpu.mig_enabled:
            raise MigControlError(f"{where}: MIG mode is not enabled on this GPU")
        catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
        if catalogue is None:
            raise MigControlError(f"{where}: {gpu.product_name} has no MIG profiles")
        try:
            wanted = catalogue.profile(profile)
        except InvalidMigLayout as exc:
            raise MigControlError(f"{where}: {exc}") from exc
        if start not in wanted.starts:
            raise MigControlError(f"{where}: allowed starts are {list(wanted.starts)}")
        lib = backend.library
        handle = lib.nvmlDeviceGetHandleByIndex(gpu_index)
        # The C call takes a pointer to the placement; pynvml passes its argument through unchanged.
        placement = lib.byref(lib.c_nvmlGpuInstancePlacement_t(start, wanted.memory_slices))
        gpu_instance = self._call(where, "create GPU instance", "nvmlDeviceCreateGpuInstanceWithPlacement",
                                  handle, wanted.profile_id, placement)  # fmt: skip
        try:
            info = self._call(where, "read GPU instance", "nvmlGpuInstanceGetInfo", gpu_instance)
            ci_profile = self._call(
                where,
                "find the full compute-instance profile",
                "nvmlGpuInstanceGetComputeInstanceProfileInfo",
                gpu_instance,
                COMPUTE_INSTANCE_PROFILE_BY_SLICES[wanted.sm_slices],
                COMPUTE_INSTANCE_ENGINE_SHARED,
            )
            compute = self._call(where, "create compute instance", "nvmlGpuInstanceCreateComputeInstance",
                                 gpu_instance, ci_profile.id)  # fmt: skip
            ci = int(self._call(where, "read compute instance", "nvmlComputeInstanceGetInfo", compute).id)
        except MigControlError:
            # Leave no half-built instance behind: a GI without a CI is invisible to workloads but holds slices.
            self._try_destroy_gi(where, gpu_instance)
            raise
        gi = int(info.id)
        for mig in backend.read_gpu(gpu_index).mig_instances:
            if (mig.gi, mig.ci) == (gi, ci):
                log.info("created MIG device %s (%s, GI %d, CI %d) on GPU %d", mig.uuid, profile, gi, ci, gpu_index)
                return mig
        raise MigControlError(f"{where}: created GI {gi}/CI {ci} but NVML does not list it as a MIG device")

    def destroy(self, gpu_index: int, gi: int, ci: int) -> None:
        lib = self.backend.library
        self.backend.open()
        where = f"GPU {gpu_index}: GI {gi}/CI {ci}"
        handle = lib.nvmlDeviceGetHandleByIndex(gpu_index)
        gpu_instance = self._call(where, "find GPU instance", "nvmlDeviceGetGpuInstanceById", handle, gi)
        compute = self._call(where, "find compute instance", "nvmlGpuInstanceGetComputeInstanceById", gpu_instance, ci)
        self._call(where, "destroy compute instance", "nvmlComputeInstanceDestroy", compute)
        self._call(where, "destroy GPU instance", "nvmlGpuInstanceDestroy", gpu_instance)
        log.info("destroyed MIG device GI %d/CI %d on GPU %d", gi, ci, gpu_index)

    def _call(self, where: str, what: str, call: str, *args: Any) -> Any:
        lib = self.backend.library
        try:
            return getattr(lib, call)(*args)
        except lib.NVMLError as exc:
            raise MigControlError(f"{where}: cannot {what}: {exc}") from exc

    def _try_destroy_gi(self, where: str, gpu_instance: Any) -> None:
        try:
            self.backend.library.nvmlGpuInstanceDestroy(gpu_instance)
        except self.backend.library.NVMLError as exc:
            log.error("%s: could not roll back the GPU instance: %s", where, exc)
