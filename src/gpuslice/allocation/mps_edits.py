"""MPS: NVIDIA's daemon limits (pinned memory, thread share, client cap) and the Allocate edits for a client."""

from __future__ import annotations

from collections.abc import Sequence

from gpuslice.allocation.answer import ContainerEdits, Mount
from gpuslice.gpu import ComputeCapability, Gpu
from gpuslice.records import record
from gpuslice.sharing import AdvertisedDevice, Resource

PIPE_DIRECTORY_ENV = "CUDA_MPS_PIPE_DIRECTORY"
PINNED_MEM_LIMIT_ENV = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
ACTIVE_THREAD_PERCENTAGE_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
CUDA_VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"
CONTAINER_MPS_ROOT = "/mps"  # where NVIDIA's containers see the MPS root
CONTAINER_SHM = "/dev/shm"

# The MPS server accepts 48 clients per device from compute capability 7.5 on, 16 before.
CLIENT_LIMIT = 48
LEGACY_CLIENT_LIMIT = 16
CLIENT_LIMIT_FROM = ComputeCapability(7, 5)
_MIB = 1024 * 1024


class MpsConfigError(ValueError):
    """An MPS setup the daemon would refuse; the text is NVIDIA's."""


def max_clients(capability: ComputeCapability) -> int:
    """The MPS client cap of one GPU (NVIDIA's check: 48 if CC >= 7.5, else 16)."""
    return CLIENT_LIMIT if capability >= CLIENT_LIMIT_FROM else LEGACY_CLIENT_LIMIT


def replicas_per_gpu(resource: Resource) -> dict[str, int]:
    """GPU UUID -> how many MPS replicas of the resource live on it (whole, unreplicated devices excluded)."""
    counts: dict[str, int] = {}
    for device in resource.devices:
        if device.replica is not None:
            counts[device.gpu.uuid] = counts.get(device.gpu.uuid, 0) + 1
    return counts


def mps_gpus(resource: Resource) -> tuple[Gpu, ...]:
    """The GPUs the resource's MPS daemon serves, in advertised order."""
    wanted = replicas_per_gpu(resource)
    return tuple(gpu for gpu in resource.physical_gpus if gpu.uuid in wanted)


def check_client_limit(resource: Resource) -> None:
    """Refuse more replicas on a GPU than its MPS server accepts (NVIDIA's error text)."""
    counts = replicas_per_gpu(resource)
    for gpu in mps_gpus(resource):
        limit = max_clients(gpu.compute_capability)
        if counts[gpu.uuid] > limit:
            raise MpsConfigError(
                "invalid MPS configuration: invalid device maximum allowed replicas exceeded: "
                f"{counts[gpu.uuid]} > {limit}"
            )


def pinned_memory_limit_mib(gpu: Gpu, replicas: int) -> int | None:
    """NVIDIA's per-replica pinned-memory limit: totalMemoryBytes / replicas / 1024 / 1024 (integer); None for 0 B."""
    total_bytes = gpu.memory_mib * _MIB
    if total_bytes <= 0 or replicas <= 0:
        return None
    return total_bytes // replicas // 1024 // 1024


def default_thread_percentage(resource: Resource) -> int:
    """NVIDIA's daemon-wide default: 100 / (replica devices / distinct GPUs), integer divisions."""
    counts = replicas_per_gpu(resource)
    if not counts:
        return 100
    per_gpu = sum(counts.values()) // len(counts)
    return 100 // max(per_gpu, 1)


@record
class DaemonSettings:
    """What one MPS control daemon is told: its GPUs, their pinned-memory limits and the thread share."""

    resource: str
    gpu_uuids: tuple[str, ...]
    pinned_limits: tuple[tuple[int, int], ...]  # (host GPU index, MiB); GPUs reporting 0 memory are skipped
    thread_percentage: int

    @property
    def commands(self) -> tuple[str, ...]:
        """The control commands, in the order NVIDIA's daemon sends them."""
        pinned = tuple(f"set_default_device_pinned_mem_limit {index} {mib}M" for index, mib in self.pinned_limits)
        return (*pinned, f"set_default_active_thread_percentage {self.thread_percentage}")


def daemon_settings(resource: Resource) -> DaemonSettings:
    """The settings of the daemon serving `resource`; MpsConfigError past a GPU's client cap."""
    check_client_limit(resource)
    counts = replicas_per_gpu(resource)
    limits = []
    for gpu in mps_gpus(resource):
        mib = pinned_memory_limit_mib(gpu, counts[gpu.uuid])
        if mib is not None:
            limits.append((gpu.index, mib))
    return DaemonSettings(
        resource=resource.name,
        gpu_uuids=tuple(gpu.uuid for gpu in mps_gpus(resource)),
        pinned_limits=tuple(limits),
        thread_percentage=default_thread_percentage(resource),
    )


def pipe_directory(resource_name: str, root: str = CONTAINER_MPS_ROOT) -> str:
    """`<root>/<resource>/pipe`, e.g. /mps/nvidia.com/gpu/pipe (the host side uses mpsRoot as root)."""
    return f"{root.rstrip('/')}/{resource_name}/pipe"


def log_directory(resource_name: str, root: str = CONTAINER_MPS_ROOT) -> str:
    return f"{root.rstrip('/')}/{resource_name}/log"


def client_edits(
    resource: Resource,
    devices: Sequence[AdvertisedDevice],
    mps_root: str,
    per_container_limits: bool = True,
    restrict_visibility: bool = True,
) -> ContainerEdits:
    """What an MPS client container gets (NVIDIA's second Allocate step, plus gpuslice's per-container caps).

    NVIDIA: CUDA_MPS_PIPE_DIRECTORY and two mounts (the pipe directory, and <mpsRoot>/shm on /dev/shm).
    gpuslice adds, unless switched off: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT as `<ordinal>=<N>M` per GPU,
    where the ordinal is the device's position inside the container and N the container's share
    (replicas held x per-replica limit); CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (the smallest share over its
    GPUs); and CUDA_VISIBLE_DEVICES naming only the allocated GPUs, so an MPS server that serves several
    GPUs cannot hand the client the others (NVIDIA #1299).
    """
    shared = [device for device in devices if device.replica is not None]
    if resource.sharing != "mps" or not shared:
        return ContainerEdits()
    container_pipe = pipe_directory(resource.name)
    envs = {PIPE_DIRECTORY_ENV: container_pipe}
    mounts = (
        Mount(container_pipe, pipe_directory(resource.name, mps_root)),
        Mount(CONTAINER_SHM, f"{mps_root.rstrip('/')}/shm"),
    )
    held: dict[str, int] = {}
    gpus: dict[str, Gpu] = {}
    for device in shared:
        held[device.gpu.uuid] = held.get(device.gpu.uuid, 0) + 1
        gpus.setdefault(device.gpu.uuid, device.gpu)
    if restrict_visibility:
        envs[CUDA_VISIBLE_DEVICES_ENV] = ",".join(gpus)
    if per_container_limits:
        counts = replicas_per_gpu(resource)
        pinned = []
        shares = []
        for ordinal, (uuid, gpu) in enumerate(gpus.items()):
            mib = pinned_memory_limit_mib(gpu, counts[uuid])
            if mib is not None:
                pinned.append(f"{ordinal}={mib * held[uuid]}M")
            shares.append(min(100, 100 * held[uuid] // counts[uuid]))
        if pinned:
            envs[PINNED_MEM_LIMIT_ENV] = ",".join(pinned)
        envs[ACTIVE_THREAD_PERCENTAGE_ENV] = str(min(shares))
    return ContainerEdits(envs=envs, mounts=mounts)
