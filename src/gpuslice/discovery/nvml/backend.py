"""NVML discovery (nvidia-ml-py): GPUs, MIG devices, pair topology, Xid events and dynamic MIG."""

from __future__ import annotations

import logging
import math
import socket
import threading
from collections.abc import Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypedDict

from gpuslice.discovery.backend import Backend
from gpuslice.discovery.capabilities import HealthSource, MigControl, Prober, TimeSliceControl
from gpuslice.discovery.hostpath import normalize_bus_id, read_dmi_machine_type, read_numa_node, read_pci_class
from gpuslice.discovery.mig_minors import MIG_MINORS_FILE, MigMinors, load_mig_minors
from gpuslice.discovery.nvml.fabric import fabric_info
from gpuslice.discovery.nvml.health import NvmlHealthSource, NvmlProbe
from gpuslice.discovery.nvml.library import (
    EVENT_XID_CRITICAL,
    HEALTH_EVENT_MASK,
    MIB,
    NVLINK_MAX_LINKS,
    NVLINK_REMOTE_GPU,
    NVLINK_REMOTE_SWITCH,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_TIMEOUT,
    TOPOLOGY_LEVELS,
    WAIT_MS,
    NvmlDiscoveryError,
    NvmlLibrary,
    NvmlUnavailable,
    default_library,
    error_code,
)
from gpuslice.discovery.nvml.mig import NvmlMigControl
from gpuslice.discovery.timeslice import NvidiaSmiTimeSlice
from gpuslice.discovery.xid import DEFAULT_IGNORED_XIDS, XidEvent, instance_id
from gpuslice.gpu import ComputeCapability, Gpu, MigCatalogue, MigInstance, Node, catalogue_for

log = logging.getLogger(__name__)


class PairFacts(TypedDict):
    """Topology facts of one GPU pair: NVML common-ancestor level, NVLink links, and whether through NVSwitch."""

    level: str
    nvlink: int
    nvswitch: bool


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def cuda_version_text(version: int) -> str:
    """NVML's integer CUDA driver version (12040) as '12.4'."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def mig_profile_name(gi_slices: int, ci_slices: int, memory_mib: int, total_memory_mib: int) -> str:
    """NVIDIA's profile name for unknown profile ids: memory rounded up to eighths of the GPU, in GB."""
    total_bytes = total_memory_mib * MIB
    gb = round(math.ceil(memory_mib * MIB / total_bytes * 8) / 8 * math.ceil(total_bytes / (1 << 30)))
    name = f"{gi_slices}g.{gb}gb"
    return name if ci_slices in (0, gi_slices) else f"{ci_slices}c.{name}"


class NvmlBackend(Backend):
    """Discovers the node through NVML; `library` defaults to nvidia-ml-py, tests pass a fake.

    Capabilities: NVML's Xid event stream as health source, the NVML recovery probe, MIG control,
    nvidia-smi's time-slice control; `close()` shuts NVML down (any later call opens it again).
    """

    name = "nvml"

    def health_source(self, poll_interval_s: float = 0.0) -> HealthSource | None:
        return NvmlHealthSource(self)

    def prober(self) -> Prober | None:
        return NvmlProbe(self)

    def mig_control(self, node: Node) -> MigControl | None:
        return NvmlMigControl(self)

    def timeslice_control(self) -> TimeSliceControl | None:
        return NvidiaSmiTimeSlice()

    def __init__(
        self,
        library: NvmlLibrary | None = None,
        driver_root: str | Path = "/",
        node_name: str | None = None,
        ignored_xids: frozenset[int] = DEFAULT_IGNORED_XIDS,
    ) -> None:
        self.library = library if library is not None else default_library()
        self.driver_root = Path(driver_root)
        self.node_name = node_name or socket.gethostname()
        self.ignored_xids = ignored_xids
        self.warnings: list[str] = []
        self._open = False
        self._lock = threading.Lock()

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        log.warning("nvml: %s", message)

    def open(self) -> None:
        """nvmlInit once; raises NvmlUnavailable with NVML's reason."""
        with self._lock:
            if self._open:
                return
            try:
                self.library.nvmlInit()
            except (self.library.NVMLError, OSError) as exc:
                raise NvmlUnavailable(f"NVML could not be initialised: {exc}") from exc
            self._open = True

    def close(self) -> None:
        """nvmlShutdown, once per nvmlInit."""
        with self._lock:
            if self._open:
                self._open = False
                self.library.nvmlShutdown()

    def discover(self) -> Node:
        self.open()
        self.warnings = []
        minors = load_mig_minors(self.driver_root)
        gpus = tuple(self._gpu(index, minors) for index in range(self._system("nvmlDeviceGetCount")))
        if any(g.mig_instances for g in gpus) and not minors.from_file:
            self._warn(f"{MIG_MINORS_FILE} not found under the driver root; assumed standard minors")
        return Node(
            name=self.node_name,
            gpus=gpus,
            driver_version=_text(self._system("nvmlSystemGetDriverVersion")),
            cuda_driver_version=cuda_version_text(self._system("nvmlSystemGetCudaDriverVersion")),
            machine_type=read_dmi_machine_type(self.driver_root),
            extra={"backend": self.name},
        )

    def read_gpu(self, index: int) -> Gpu:
        """One GPU as NVML reports it now (re-read after a dynamic MIG change)."""
        self.open()
        return self._gpu(index, load_mig_minors(self.driver_root))

    def _system(self, call: str) -> Any:
        try:
            return getattr(self.library, call)()
        except self.library.NVMLError as exc:
            raise NvmlDiscoveryError(f"{call} failed: {exc}") from exc

    def _required(self, index: int, call: str, *args: Any) -> Any:
        try:
            return getattr(self.library, call)(*args)
        except self.library.NVMLError as exc:
            raise NvmlDiscoveryError(f"GPU {index}: {call} failed: {exc}") from exc

    def _optional(self, index: int, call: str, *args: Any) -> Any:
        try:
            return getattr(self.library, call)(*args)
        except self.library.NVMLError as exc:
            if error_code(exc) != NVML_ERROR_NOT_SUPPORTED:
                self._warn(f"GPU {index}: {call} failed: {exc}")
            return None

    def _gpu(self, index: int, minors: MigMinors) -> Gpu:
        handle = self._required(index, "nvmlDeviceGetHandleByIndex", index)
        uuid = _text(self._required(index, "nvmlDeviceGetUUID", handle))
        product = _text(self._required(index, "nvmlDeviceGetName", handle))
        memory_mib = int(self._required(index, "nvmlDeviceGetMemoryInfo", handle).total) // MIB
        major, minor = self._required(index, "nvmlDeviceGetCudaComputeCapability", handle)
        bus_id = normalize_bus_id(_text(self._required(index, "nvmlDeviceGetPciInfo", handle).busId))
        numa = self._optional(index, "nvmlDeviceGetNumaNodeId", handle)
        if numa is None or numa < 0:  # older drivers: sysfs knows the same fact
            numa = read_numa_node(self.driver_root, bus_id)
        device_minor = self._optional(index, "nvmlDeviceGetMinorNumber", handle)
        modes = self._optional(index, "nvmlDeviceGetMigMode", handle)
        mig_enabled = bool(modes and modes[0] == 1)
        info = self.library.c_nvmlGpuFabricInfo_t()
        supported = self._optional(index, "nvmlDeviceGetGpuFabricInfo", handle, self.library.byref(info))
        fabric = fabric_info(info) if supported is not None else None
        gpu = Gpu(
            index=index,
            uuid=uuid,
            product_name=product,
            memory_mib=memory_mib,
            compute_capability=ComputeCapability(int(major), int(minor)),
            numa_node=numa,
            pci_bus_id=bus_id,
            minor=device_minor,
            mig_enabled=mig_enabled,
            pci_class=read_pci_class(self.driver_root, bus_id),  # NVML has no call for it; sysfs does
            fabric=fabric,
        )
        if not mig_enabled:
            return gpu
        instances = tuple(self._mig_devices(gpu, handle, minors))
        if not instances:
            self._warn(f"GPU {index} ({uuid}) has MIG enabled but no MIG devices")
        return replace(gpu, mig_instances=instances)

    def _mig_devices(self, gpu: Gpu, handle: Any, minors: MigMinors) -> Iterator[MigInstance]:
        lib = self.library
        catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
        for slot in range(self._required(gpu.index, "nvmlDeviceGetMaxMigDeviceCount", handle)):
            try:
                mig = lib.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except lib.NVMLError as exc:
                if error_code(exc) == NVML_ERROR_NOT_FOUND:
                    continue  # an empty slot
                raise NvmlDiscoveryError(f"GPU {gpu.index}: MIG device {slot}: {exc}") from exc
            where = f"GPU {gpu.index} MIG device {slot}"
            gi = self._required(gpu.index, "nvmlDeviceGetGpuInstanceId", mig)
            ci = self._required(gpu.index, "nvmlDeviceGetComputeInstanceId", mig)
            gpu_instance = self._required(gpu.index, "nvmlDeviceGetGpuInstanceById", handle, gi)
            info = self._required(gpu.index, "nvmlGpuInstanceGetInfo", gpu_instance)
            attributes = self._required(gpu.index, "nvmlDeviceGetAttributes", mig)
            profile = self._profile_name(catalogue, int(info.profileId), attributes, gpu.memory_mib, where)
            yield MigInstance(
                profile=profile,
                uuid=_text(self._required(gpu.index, "nvmlDeviceGetUUID", mig)),
                parent_uuid=gpu.uuid,
                parent_index=gpu.index,
                index=slot,
                gi=gi,
                ci=ci,
                placement_start=int(info.placement.start),
                placement_size=int(info.placement.size),
                memory_mib=int(attributes.memorySizeMB),
                gi_cap_minor=minors.gi_minor(gpu.device_minor, gi),
                ci_cap_minor=minors.ci_minor(gpu.device_minor, gi, ci),
            )

    def _profile_name(
        self, catalogue: MigCatalogue | None, profile_id: int, attributes: Any, total_mib: int, where: str
    ) -> str:
        gi_slices = int(attributes.gpuInstanceSliceCount)
        ci_slices = int(attributes.computeInstanceSliceCount)
        known = [p for p in catalogue.profiles if p.profile_id == profile_id] if catalogue else []
        if not known:
            name = mig_profile_name(gi_slices, ci_slices, int(attributes.memorySizeMB), total_mib)
            self._warn(f"{where}: GI profile id {profile_id} is not in the MIG catalogue; named {name}")
            return name
        name = known[0].name
        return name if ci_slices in (0, gi_slices) else f"{ci_slices}c.{name}"

    def topology(self) -> dict[tuple[int, int], PairFacts]:
        """{(i, j): {"level", "nvlink", "nvswitch"}} for every GPU pair i < j, keyed by GPU index.

        level: the common PCIe ancestor ('system' when NVML cannot tell). nvlink: direct GPU-GPU links or,
        when both GPUs reach NVSwitches (nvswitch True), the smaller of their switch-link counts (what
        `nvidia-smi topo -m` prints as NV<k> on NVSwitch systems).
        """
        self.open()
        lib = self.library
        handles = [
            self._required(i, "nvmlDeviceGetHandleByIndex", i) for i in range(self._system("nvmlDeviceGetCount"))
        ]
        bus_ids = [
            normalize_bus_id(_text(self._required(i, "nvmlDeviceGetPciInfo", h).busId)) for i, h in enumerate(handles)
        ]
        index_of_bus = {bus: i for i, bus in enumerate(bus_ids)}
        direct: dict[tuple[int, int], int] = {}
        switch_links = [0] * len(handles)
        for i, handle in enumerate(handles):
            for remote in self._active_links(i, handle):
                if remote == "switch":
                    switch_links[i] += 1
                elif remote in index_of_bus and index_of_bus[remote] != i:
                    pair = (min(i, index_of_bus[remote]), max(i, index_of_bus[remote]))
                    direct[pair] = direct.get(pair, 0) + 1
        pairs: dict[tuple[int, int], PairFacts] = {}
        for i in range(len(handles)):
            for j in range(i + 1, len(handles)):
                try:
                    level = TOPOLOGY_LEVELS.get(lib.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j]), "")
                except lib.NVMLError as exc:
                    self._warn(f"GPUs {i}-{j}: common ancestor unknown ({exc}); assumed system")
                    level = ""
                through_switch = min(switch_links[i], switch_links[j])
                # Both ends count a direct link, so halve the sum.
                links = direct.get((i, j), 0) // 2 or through_switch
                pairs[(i, j)] = {
                    "level": level or "system",
                    "nvlink": links,
                    "nvswitch": not direct.get((i, j)) and through_switch > 0,
                }
        return pairs

    def _active_links(self, index: int, handle: Any) -> Iterator[str]:
        """For each active NVLink: 'switch' or the remote end's bus id."""
        lib = self.library
        for link in range(NVLINK_MAX_LINKS):
            try:
                if not lib.nvmlDeviceGetNvLinkState(handle, link):
                    continue
                remote_bus = normalize_bus_id(_text(lib.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
            except lib.NVMLError as exc:
                if error_code(exc) == NVML_ERROR_NOT_SUPPORTED:
                    return  # no NVLink on this GPU
                continue  # past the GPU's last link (INVALID_ARGUMENT) or a link in error
            try:
                kind = lib.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link)
            except lib.NVMLError:
                kind = NVLINK_REMOTE_GPU  # old drivers: the bus id tells whether the far end is a GPU
            if kind == NVLINK_REMOTE_SWITCH:
                yield "switch"
            elif kind == NVLINK_REMOTE_GPU:
                yield remote_bus

    def watch(self, stop: threading.Event, wait_ms: int = WAIT_MS) -> Generator[XidEvent, None, None]:
        """Critical Xid events until `stop` is set; each wait lasts at most `wait_ms`.

        Run it in its own thread: it blocks in nvmlEventSetWait. Non-Xid events (ECC) and ignored Xids are
        skipped; a device whose events cannot be registered, and every device after a failed wait, is
        reported unhealthy (xid 0), as NVIDIA's device plugin does.
        """
        self.open()
        lib = self.library
        try:
            count = lib.nvmlDeviceGetCount()
            event_set = lib.nvmlEventSetCreate()
        except lib.NVMLError as exc:
            yield XidEvent(None, 0, reason=f"cannot set up health events: {exc}")
            return
        try:
            for index in range(count):
                failure = self._register(index, event_set)
                if failure is not None:
                    yield failure
            while not stop.is_set():
                try:
                    data = lib.nvmlEventSetWait(event_set, wait_ms)
                except lib.NVMLError as exc:
                    if error_code(exc) == NVML_ERROR_TIMEOUT:
                        continue
                    yield XidEvent(None, 0, reason=f"nvmlEventSetWait failed: {exc}")
                    stop.wait(wait_ms / 1000)  # no busy loop while the error persists
                    continue
                event = self._event(data)
                if event is not None:
                    yield event
        finally:
            lib.nvmlEventSetFree(event_set)

    def _register(self, index: int, event_set: Any) -> XidEvent | None:
        lib = self.library
        uuid = None
        try:
            handle = lib.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(lib.nvmlDeviceGetUUID(handle))
            supported = lib.nvmlDeviceGetSupportedEventTypes(handle)
            lib.nvmlDeviceRegisterEvents(handle, HEALTH_EVENT_MASK & supported, event_set)
        except lib.NVMLError as exc:
            if error_code(exc) == NVML_ERROR_NOT_SUPPORTED:
                log.warning("Device %s is too old to support healthchecking.", uuid or index)
                return None
            return XidEvent(uuid, 0, reason=f"cannot register health events: {exc}")
        return None

    def _event(self, data: Any) -> XidEvent | None:
        if data.eventType != EVENT_XID_CRITICAL:
            log.debug("Skipping non-nvmlEventTypeXidCriticalError event %#x", data.eventType)
            return None
        xid = int(data.eventData)
        if xid in self.ignored_xids:
            log.info("Skipping ignored Xid %d", xid)
            return None
        gi, ci = instance_id(int(data.gpuInstanceId)), instance_id(int(data.computeInstanceId))
        try:
            uuid = _text(self.library.nvmlDeviceGetUUID(data.device))
        except self.library.NVMLError as exc:
            return XidEvent(None, xid, gi, ci, reason=f"event device unknown: {exc}")
        return XidEvent(uuid, xid, gi, ci)
