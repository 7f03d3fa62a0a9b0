"""An honest in-memory NVML (the calls NvmlBackend makes, nothing more) and canned nodes for tests and demos."""

# ruff: noqa: N802  (the fake must use NVML's own (camelCase) function names)

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from gpuslice.discovery.nvml.library import MIB
from gpuslice.discovery.xid import NO_INSTANCE
from gpuslice.gpu import catalogue_for, free_placements, name_uuid
from gpuslice.records import record

_NAMESPACE = uuidlib.UUID("0c7b7f0e-2f59-4f0a-9c1e-6e766d6c6661")

# NVML return codes the fake raises (nvml.h).
UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND, TIMEOUT = 1, 2, 3, 6, 10
IN_USE, INSUFFICIENT_RESOURCES, UNKNOWN = 19, 23, 999
_NAMES = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 6: "Not Found", 9: "Driver Not Loaded",
          10: "Timeout", 12: "NVML Shared Library Not Found", 19: "In use by another client",
          23: "Insufficient Resources", 999: "Unknown Error"}  # fmt: skip
XID_EVENT, DOUBLE_BIT_ECC_EVENT = 0x8, 0x2
ALL_EVENTS = 0x8 | 0x2 | 0x1 | 0x4
SWITCH, GPU_END = 0x02, 0x00


class FakeNvmlError(Exception):
    """Carries an NVML return code in `.value`, like pynvml.NVMLError."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _NAMES.get(self.value, f"NVML Error with code {self.value}")


@dataclass
class FakeCi:
    slices: int
    uuid: str


@dataclass
class FakeGi:
    profile_id: int
    start: int
    size: int
    slices: int
    memory_mib: int
    cis: dict[int, FakeCi] = field(default_factory=dict)


@dataclass
class FakeGpu:
    """One GPU. numa_node/mig_mode/supported_events None: the call answers NOT_SUPPORTED."""

    uuid: str
    name: str
    memory_mib: int
    capability: tuple[int, int]
    bus_id: str
    minor: int
    numa_node: int | None = 0
    mig_mode: int | None = None
    gis: dict[int, FakeGi] = field(default_factory=dict)
    nvlinks: list[tuple[str, int]] = field(default_factory=list)  # (remote bus id, remote device type)
    supported_events: int | None = ALL_EVENTS
    max_mig_devices: int = 7
    # (cluster UUID bytes, clique ID, fabric state): None answers NOT_SUPPORTED, as on a GPU without a fabric.
    fabric: tuple[bytes, int, int] | None = None

    def mig_devices(self) -> list[tuple[int, int]]:
        return sorted((gi, ci) for gi, g in self.gis.items() for ci in g.cis)


@record
class FakeEvent:
    """One event the fake's event set delivers; an int in the stream is an NVML error code instead."""

    gpu: int
    event_type: int
    xid: int = 0
    gi: int = NO_INSTANCE
    ci: int = NO_INSTANCE


@record
class _Dev:
    gpu: int


@record
class _MigDev:
    gpu: int
    gi: int
    ci: int


@record
class _GiRef:
    gpu: int
    gi: int


@record
class _CiRef:
    gpu: int
    gi: int
    ci: int


class FakeNvml:
    """In-memory NVML. `calls` records every call by name and arguments, in order."""

    NVMLError = FakeNvmlError

    def __init__(
        self,
        gpus: Sequence[FakeGpu],
        *,
        driver_version: str = "550.127.08",
        cuda_version: int = 12040,
        level: Callable[[int, int], int] = lambda i, j: 50,
        events: Sequence[FakeEvent | int] = (),
        init_error: int | None = None,
    ) -> None:
        self.gpus = list(gpus)
        self.driver_version = driver_version
        self.cuda_version = cuda_version
        self.level = level
        self.events = list(events)
        self.init_error = init_error
        self.initialised = 0
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.registered: dict[int, int] = {}
        self.event_sets_open = 0

    def _enter(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))
        if not self.initialised and name != "nvmlInit":
            raise FakeNvmlError(UNINITIALIZED)

    def _gpu(self, handle: Any) -> FakeGpu:
        if not isinstance(handle, _Dev) or not 0 <= handle.gpu < len(self.gpus):
            raise FakeNvmlError(INVALID_ARGUMENT)
        return self.gpus[handle.gpu]

    def _gi(self, ref: Any) -> FakeGi:
        if not isinstance(ref, _GiRef) or ref.gi not in self.gpus[ref.gpu].gis:
            raise FakeNvmlError(INVALID_ARGUMENT)
        return self.gpus[ref.gpu].gis[ref.gi]

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        if self.init_error is not None:
            raise FakeNvmlError(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._enter("nvmlDeviceGetHandleByIndex", index)
        if not 0 <= index < len(self.gpus):
            raise FakeNvmlError(INVALID_ARGUMENT)
        return _Dev(index)

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        self._enter("nvmlDeviceGetUUID", handle)
        if isinstance(handle, _MigDev):
            return self.gpus[handle.gpu].gis[handle.gi].cis[handle.ci].uuid
        return self._gpu(handle).uuid

    def nvmlDeviceGetName(self, handle: Any) -> str:
        self._enter("nvmlDeviceGetName", handle)
        return self._gpu(handle).name

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        self._enter("nvmlDeviceGetMemoryInfo", handle)
        return SimpleNamespace(total=self._gpu(handle).memory_mib * MIB)

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        self._enter("nvmlDeviceGetCudaComputeCapability", handle)
        return self._gpu(handle).capability

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        self._enter("nvmlDeviceGetPciInfo", handle)
        return SimpleNamespace(busId=self._gpu(handle).bus_id)

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetNumaNodeId", handle)
        numa = self._gpu(handle).numa_node
        if numa is None:
            raise FakeNvmlError(NOT_SUPPORTED)
        return numa

    def nvmlDeviceGetGpuFabricInfo(self, handle: Any, info: Any) -> int:
        self._enter("nvmlDeviceGetGpuFabricInfo", handle)
        fabric = self._gpu(handle).fabric
        if fabric is None:
            raise FakeNvmlError(NOT_SUPPORTED)
        info.clusterUuid, info.cliqueId, info.state = fabric
        info.status = 0
        return 0

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetMinorNumber", handle)
        return self._gpu(handle).minor

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        self._enter("nvmlDeviceGetMigMode", handle)
        mode = self._gpu(handle).mig_mode
        if mode is None:
            raise FakeNvmlError(NOT_SUPPORTED)
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount", handle)
        return self._gpu(handle).max_mig_devices

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> Any:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex", handle, index)
        devices = self._gpu(handle).mig_devices()
        if index >= len(devices):
            raise FakeNvmlError(NOT_FOUND)
        return _MigDev(handle.gpu, *devices[index])

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetGpuInstanceId", handle)
        if not isinstance(handle, _MigDev):
            raise FakeNvmlError(INVALID_ARGUMENT)
        return handle.gi

    def nvmlDeviceGetComputeInstanceId(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetComputeInstanceId", handle)
        if not isinstance(handle, _MigDev):
            raise FakeNvmlError(INVALID_ARGUMENT)
        return handle.ci

    def nvmlDeviceGetAttributes(self, handle: Any) -> Any:
        self._enter("nvmlDeviceGetAttributes", handle)
        if not isinstance(handle, _MigDev):
            raise FakeNvmlError(NOT_SUPPORTED)
        gi = self.gpus[handle.gpu].gis[handle.gi]
        return SimpleNamespace(
            gpuInstanceSliceCount=gi.slices,
            computeInstanceSliceCount=gi.cis[handle.ci].slices,
            memorySizeMB=gi.memory_mib,
        )

    def nvmlDeviceGetGpuInstanceById(self, handle: Any, gi: int) -> Any:
        self._enter("nvmlDeviceGetGpuInstanceById", handle, gi)
        if gi not in self._gpu(handle).gis:
            raise FakeNvmlError(NOT_FOUND)
        return _GiRef(handle.gpu, gi)

    def nvmlGpuInstanceGetInfo(self, gpu_instance: Any) -> Any:
        self._enter("nvmlGpuInstanceGetInfo", gpu_instance)
        gi = self._gi(gpu_instance)
        placement = SimpleNamespace(start=gi.start, size=gi.size)
        return SimpleNamespace(id=gpu_instance.gi, profileId=gi.profile_id, placement=placement)

    def nvmlDeviceGetTopologyCommonAncestor(self, first: Any, second: Any) -> int:
        self._enter("nvmlDeviceGetTopologyCommonAncestor", first, second)
        self._gpu(first), self._gpu(second)
        return self.level(first.gpu, second.gpu)

    def _link(self, handle: Any, link: int) -> tuple[str, int]:
        links = self._gpu(handle).nvlinks
        if not links:
            raise FakeNvmlError(NOT_SUPPORTED)
        if not 0 <= link < len(links):
            raise FakeNvmlError(INVALID_ARGUMENT)
        return links[link]

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkState", handle, link)
        self._link(handle, link)
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> Any:
        self._enter("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        return SimpleNamespace(busId=self._link(handle, link)[0])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        return self._link(handle, link)[1]

    def nvmlEventSetCreate(self) -> Any:
        self._enter("nvmlEventSetCreate")
        self.event_sets_open += 1
        return SimpleNamespace(kind="event set")

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetSupportedEventTypes", handle)
        supported = self._gpu(handle).supported_events
        if supported is None:
            raise FakeNvmlError(NOT_SUPPORTED)
        return supported

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None:
        self._enter("nvmlDeviceRegisterEvents", handle, event_types, event_set)
        self._gpu(handle)
        self.registered[handle.gpu] = event_types

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any:
        """Delivers the canned stream in order; once it is empty every wait times out at once."""
        self._enter("nvmlEventSetWait", event_set, timeout_ms)
        if not self.events:
            raise FakeNvmlError(TIMEOUT)
        item = self.events.pop(0)
        if isinstance(item, int):
            raise FakeNvmlError(item)
        return SimpleNamespace(
            device=_Dev(item.gpu),
            eventType=item.event_type,
            eventData=item.xid,
            gpuInstanceId=item.gi,
            computeInstanceId=item.ci,
        )

    def nvmlEventSetFree(self, event_set: Any) -> None:
        self._enter("nvmlEventSetFree", event_set)
        self.event_sets_open -= 1

    def c_nvmlGpuInstancePlacement_t(self, start: int, size: int) -> Any:
        return SimpleNamespace(start=start, size=size)

    def c_nvmlGpuFabricInfo_t(self) -> Any:
        return SimpleNamespace(clusterUuid=bytes(16), status=0, cliqueId=0, state=0)

    def byref(self, value: Any) -> Any:
        """ctypes.byref: the fake passes the placement itself."""
        return value

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle: Any, profile_id: int, placement: Any) -> Any:
        self._enter("nvmlDeviceCreateGpuInstanceWithPlacement", handle, profile_id, (placement.start, placement.size))
        gpu = self._gpu(handle)
        catalogue = catalogue_for(gpu.name, gpu.memory_mib)
        if gpu.mig_mode != 1 or catalogue is None:
            raise FakeNvmlError(NOT_SUPPORTED)
        profiles = [p for p in catalogue.profiles if p.profile_id == profile_id]
        if not profiles or placement.size != profiles[0].memory_slices or placement.start not in profiles[0].starts:
            raise FakeNvmlError(INVALID_ARGUMENT)
        profile = profiles[0]
        occupied = [(g.start, g.size) for g in gpu.gis.values()]
        if placement.start not in free_placements(catalogue, profile, occupied):
            raise FakeNvmlError(INSUFFICIENT_RESOURCES)
        gi = min(set(range(1, 15)) - set(gpu.gis))
        memory = gpu.memory_mib * profile.memory_slices // catalogue.memory_slices
        gpu.gis[gi] = FakeGi(profile_id, placement.start, profile.memory_slices, profile.sm_slices, memory)
        return _GiRef(handle.gpu, gi)

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gpu_instance: Any, profile: int, engine: int) -> Any:
        self._enter("nvmlGpuInstanceGetComputeInstanceProfileInfo", gpu_instance, profile, engine)
        slices = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6}.get(profile)
        if slices is None or slices > self._gi(gpu_instance).slices:
            raise FakeNvmlError(NOT_SUPPORTED)
        return SimpleNamespace(id=profile, sliceCount=slices)

    def nvmlGpuInstanceCreateComputeInstance(self, gpu_instance: Any, profile_id: int) -> Any:
        self._enter("nvmlGpuInstanceCreateComputeInstance", gpu_instance, profile_id)
        gi = self._gi(gpu_instance)
        slices = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6}[profile_id]
        if sum(c.slices for c in gi.cis.values()) + slices > gi.slices:
            raise FakeNvmlError(INSUFFICIENT_RESOURCES)
        ci = min(set(range(8)) - set(gi.cis))
        parent = self.gpus[gpu_instance.gpu].uuid
        gi.cis[ci] = FakeCi(slices, f"MIG-{name_uuid(_NAMESPACE, f'{parent}/{gpu_instance.gi}/{ci}')}")
        return _CiRef(gpu_instance.gpu, gpu_instance.gi, ci)

    def nvmlComputeInstanceGetInfo(self, compute_instance: Any) -> Any:
        self._enter("nvmlComputeInstanceGetInfo", compute_instance)
        return SimpleNamespace(id=compute_instance.ci)

    def nvmlGpuInstanceGetComputeInstanceById(self, gpu_instance: Any, ci: int) -> Any:
        self._enter("nvmlGpuInstanceGetComputeInstanceById", gpu_instance, ci)
        if ci not in self._gi(gpu_instance).cis:
            raise FakeNvmlError(NOT_FOUND)
        return _CiRef(gpu_instance.gpu, gpu_instance.gi, ci)

    def nvmlComputeInstanceDestroy(self, compute_instance: Any) -> None:
        self._enter("nvmlComputeInstanceDestroy", compute_instance)
        del self.gpus[compute_instance.gpu].gis[compute_instance.gi].cis[compute_instance.ci]

    def nvmlGpuInstanceDestroy(self, gpu_instance: Any) -> None:
        self._enter("nvmlGpuInstanceDestroy", gpu_instance)
        if self._gi(gpu_instance).cis:
            raise FakeNvmlError(IN_USE)
        del self.gpus[gpu_instance.gpu].gis[gpu_instance.gi]
