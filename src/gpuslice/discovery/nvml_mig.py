"""Dynamic MIG through NVML: create a GPU instance with one full compute instance at a placement; destroy it."""

from __future__ import annotations

import logging
import uuid as uuidlib
from typing import Any, Protocol

from gpuslice.discovery.nvml import (
    COMPUTE_INSTANCE_ENGINE_SHARED,
    COMPUTE_INSTANCE_PROFILE_BY_SLICES,
    MigControlError,
    NvmlBackend,
)
from gpuslice.gpu import InvalidMigLayout, MigCatalogue, MigInstance, Node, catalogue_for, free_placements

log = logging.getLogger(__name__)

_NAMESPACE = uuidlib.UUID("9d3f4a52-61c4-4f8e-8a0b-6d6967637472")  # deterministic UUIDs of recorded MIG devices


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


class NvmlMigControl:
    """MigControl over an NvmlBackend's library (needs root and MIG mode already enabled)."""

    def __init__(self, backend: NvmlBackend) -> None:
        self.backend = backend

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


class RecordingMigControl:
    """A MigControl for tests of dynamic MIG above discovery: validates placements, records calls."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.calls: list[tuple[str, int, Any, int]] = []
        self.instances: dict[int, dict[tuple[int, int], MigInstance]] = {
            g.index: {(m.gi, m.ci): m for m in g.mig_instances} for g in node.gpus
        }

    def _catalogue(self, gpu_index: int) -> MigCatalogue:
        gpu = self.node.gpus[gpu_index]
        catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
        if catalogue is None or not gpu.mig_enabled:
            raise MigControlError(f"GPU {gpu_index} ({gpu.product_name}): MIG mode is not enabled on this GPU")
        return catalogue

    def create(self, gpu_index: int, profile: str, start: int) -> MigInstance:
        self.calls.append(("create", gpu_index, profile, start))
        catalogue = self._catalogue(gpu_index)
        try:
            wanted = catalogue.profile(profile)
        except InvalidMigLayout as exc:
            raise MigControlError(f"GPU {gpu_index}: {exc}") from exc
        existing = self.instances[gpu_index]
        occupied = [(m.placement_start, m.placement_size) for m in existing.values()]
        if start not in free_placements(catalogue, wanted, occupied):
            raise MigControlError(f"GPU {gpu_index}: {profile} does not fit at slice {start}")
        gpu = self.node.gpus[gpu_index]
        gi = min(set(range(1, 15)) - {key[0] for key in existing})
        instance = MigInstance(
            profile=wanted.name,
            uuid=f"MIG-{uuidlib.uuid5(_NAMESPACE, f'{gpu.uuid}/{gi}/0')}",
            parent_uuid=gpu.uuid,
            parent_index=gpu_index,
            index=len(existing),
            gi=gi,
            ci=0,
            placement_start=start,
            placement_size=wanted.memory_slices,
            memory_mib=gpu.memory_mib * wanted.memory_slices // catalogue.memory_slices,
            gi_cap_minor=3 + gpu.device_minor * 135 + gi * 9,
            ci_cap_minor=4 + gpu.device_minor * 135 + gi * 9,
        )
        existing[(gi, 0)] = instance
        return instance

    def destroy(self, gpu_index: int, gi: int, ci: int) -> None:
        self.calls.append(("destroy", gpu_index, gi, ci))
        if self.instances.get(gpu_index, {}).pop((gi, ci), None) is None:
            raise MigControlError(f"GPU {gpu_index}: no MIG device GI {gi}/CI {ci}")
