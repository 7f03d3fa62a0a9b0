"""From a Node and a Config to the advertised resources, following NVIDIA's naming and MIG strategies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gpuslice.config import RESOURCE_PREFIX, Config, ReplicatedResource, ReplicatedResources
from gpuslice.gpu import Gpu, MigInstance, Node
from gpuslice.sharing.ids import replica_id
from gpuslice.sharing.model import AdvertisedDevice, DeviceKind, Resource, SharingError, SharingPlan

GPU_RESOURCE = f"{RESOURCE_PREFIX}gpu"
SHARED_SUFFIX = ".shared"


def mig_resource_name(profile: str) -> str:
    """NVIDIA's mixed-strategy name: nvidia.com/mig-<profile with every '+' replaced by '.'>."""
    return f"{RESOURCE_PREFIX}mig-{profile.replace('+', '.')}"


@dataclass(frozen=True)
class _Base:
    """A resource before sharing: its name and its physical devices."""

    name: str
    devices: tuple[tuple[Gpu, MigInstance | None], ...]
    profile: str | None = None

    @property
    def kind(self) -> DeviceKind:
        return "mig" if any(mig is not None for _, mig in self.devices) else "gpu"


def build_resources(node: Node, config: Config) -> SharingPlan:
    """Every resource the node advertises under `config`, in a stable order; SharingError if impossible."""
    warnings: list[str] = []
    bases = _bases(node, config.flags.mig_strategy, warnings)
    replicated = config.sharing.replicated
    section = "mps" if config.sharing.strategy == "mps" else "timeSlicing"
    shared: dict[str, tuple[int, ReplicatedResource]] = {}
    if replicated is not None:
        shared = _replicated_by_name(replicated, section, {b.name for b in bases}, warnings)
    if config.sharing.strategy == "mps":
        _check_mps(config, bases, shared)
    resources = []
    for base in bases:
        if not base.devices:
            continue
        entry = shared.get(base.name)
        if entry is None or replicated is None:
            resources.append(_unshared(base))
        else:
            resources.append(_shared(base, entry[1], replicated, config))
    return SharingPlan(tuple(resources), tuple(warnings))


def _bases(node: Node, strategy: str, warnings: list[str]) -> list[_Base]:
    whole = [gpu for gpu in node.gpus if strategy == "none" or not gpu.mig_enabled]
    if strategy == "none":
        return [_Base(GPU_RESOURCE, tuple((gpu, None) for gpu in whole))]
    mig_gpus = [gpu for gpu in node.gpus if gpu.mig_enabled]
    if strategy == "single":
        if not mig_gpus:
            return [_Base(GPU_RESOURCE, tuple((gpu, None) for gpu in whole))]
        if whole:
            raise SharingError(
                "flags.migStrategy=single: all devices on the node must be configured with the same migEnabled "
                f"value (GPU {whole[0].index} has MIG disabled, GPU {mig_gpus[0].index} has it enabled)"
            )
        for gpu in mig_gpus:
            if not gpu.mig_instances:
                raise SharingError(f"flags.migStrategy=single: device {gpu.index} has no MIG devices configured")
        profiles = sorted({mig.profile for gpu in mig_gpus for mig in gpu.mig_instances})
        if len(profiles) > 1:
            raise SharingError(
                f"flags.migStrategy=single: more than one MIG device type present on node ({', '.join(profiles)})"
            )
        devices = tuple((gpu, mig) for gpu in mig_gpus for mig in gpu.mig_instances)
        return [_Base(GPU_RESOURCE, devices, profiles[0])]
    if strategy != "mixed":
        raise SharingError(f"flags.migStrategy: unknown MIG strategy: {strategy}")
    bases = [_Base(GPU_RESOURCE, tuple((gpu, None) for gpu in whole))]
    by_profile: dict[str, list[tuple[Gpu, MigInstance | None]]] = {}
    for gpu in mig_gpus:
        if not gpu.mig_instances:
            warnings.append(f"GPU {gpu.index} ({gpu.uuid}) has MIG enabled but no MIG devices; it advertises nothing")
        for mig in gpu.mig_instances:
            by_profile.setdefault(mig.profile, []).append((gpu, mig))
    for profile in sorted(by_profile):
        bases.append(_Base(mig_resource_name(profile), tuple(by_profile[profile]), profile))
    return bases


def _replicated_by_name(
    replicated: ReplicatedResources, section: str, known: set[str], warnings: list[str]
) -> dict[str, tuple[int, ReplicatedResource]]:
    found: dict[str, tuple[int, ReplicatedResource]] = {}
    for position, entry in enumerate(replicated.resources):
        key = f"sharing.{section}.resources[{position}]"
        if entry.name in found:
            first = found[entry.name][0]
            raise SharingError(f"{key}.name: {entry.name} is already shared by sharing.{section}.resources[{first}]")
        if entry.rename is not None:
            # NVIDIA drops `rename` (only renameByDefault counts); honouring it is a planned extension.
            warnings.append(f"{key}.rename: not supported yet; ignored (use renameByDefault)")
        if entry.devices != "all":
            warnings.append(f"{key}.devices: only 'all' is supported yet; every device of {entry.name} is shared")
        if entry.name not in known:
            warnings.append(f"{key}.name: no device is advertised as {entry.name}; nothing to share")
            continue
        found[entry.name] = (position, entry)
    return found


def _check_mps(config: Config, bases: Sequence[_Base], shared: dict[str, tuple[int, ReplicatedResource]]) -> None:
    if config.flags.mig_strategy == "mixed":
        raise SharingError("sharing.mps: using --mig-strategy=mixed is not supported with MPS")
    for base in bases:
        if base.name in shared and base.kind == "mig":
            position = shared[base.name][0]
            raise SharingError(
                f"sharing.mps.resources[{position}].name: sharing using MPS is not supported for MIG devices"
            )


def _advertised(base: _Base) -> tuple[AdvertisedDevice, ...]:
    return tuple(
        AdvertisedDevice(id=mig.uuid if mig else gpu.uuid, physical_id=mig.uuid if mig else gpu.uuid, gpu=gpu, mig=mig)
        for gpu, mig in base.devices
    )


def _unshared(base: _Base) -> Resource:
    devices = _advertised(base)
    return Resource(
        name=base.name,
        kind=base.kind,
        devices=devices,
        mig_profile=base.profile,
        base_name=base.name,
        derivation=_derivation(devices, 1, base.profile),
    )


def _shared(base: _Base, entry: ReplicatedResource, replicated: ReplicatedResources, config: Config) -> Resource:
    physical = _advertised(base)
    devices = tuple(
        replace(device, id=replica_id(device.physical_id, n), replica=n)
        for device in physical
        for n in range(entry.replicas)
    )
    strategy = config.sharing.strategy
    fail_greater = replicated.fail_requests_greater_than_one
    if fail_greater is None:
        fail_greater = strategy == "mps"  # NVIDIA's defaults since v0.20.0
    return Resource(
        name=base.name + SHARED_SUFFIX if replicated.rename_by_default else base.name,
        kind=base.kind,
        devices=devices,
        sharing=strategy,
        replicas=entry.replicas,
        mig_profile=base.profile,
        fail_requests_greater_than_one=fail_greater,
        allocation_policy=config.flags.plugin.shared_devices_allocation_policy,
        base_name=base.name,
        derivation=_derivation(physical, entry.replicas, base.profile),
    )


def _derivation(physical: Sequence[AdvertisedDevice], replicas: int, profile: str | None) -> str:
    """How the advertised count follows from the hardware, e.g. '4 GPUs x 4 replicas = 16'."""
    per_gpu: dict[str, int] = {}
    for device in physical:
        per_gpu[device.gpu.uuid] = per_gpu.get(device.gpu.uuid, 0) + 1
    gpus = f"{len(per_gpu)} GPU{'s' if len(per_gpu) != 1 else ''}"
    counts = list(per_gpu.values())
    if profile is None:
        text = gpus if replicas > 1 else f"{gpus}, one device each"
    elif len(set(counts)) == 1:
        text = f"{gpus} x {counts[0]} x {profile}"
    else:
        text = f"({'+'.join(str(count) for count in counts)}) x {profile} on {gpus}"
    if replicas > 1:
        text += f" x {replicas} replicas"
    return f"{text} = {len(physical) * replicas}"
