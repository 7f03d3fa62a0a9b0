"""`flags.migStrategy: dynamic`: what a node advertises when some GPUs carve MIG instances on demand."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import replace

from gpuslice.config import Config
from gpuslice.gpu import Gpu, MigCatalogue, MigInstance, MigProfile, Node, catalogue_for
from gpuslice.sharing.bases import mig_resource_name
from gpuslice.sharing.build import build_static_plan
from gpuslice.sharing.model import AdvertisedDevice, Resource, SharingError, SharingPlan


def slot_id(gpu_uuid: str, profile: MigProfile, start: int) -> str:
    """The advertised ID of `profile` placed at memory slice `start` on GPU `gpu_uuid`."""
    return f"{gpu_uuid}/{profile.resource_suffix}@{start}"


DYNAMIC = "dynamic"


def dynamic_gpus(node: Node, claimed: Collection[str] = ()) -> tuple[Gpu, ...]:
    """MIG-enabled GPUs whose model has MIG profiles and that have no fixed layout.

    That is: no MIG instances (node spec `mig: []`), or a UUID in `claimed`, the GPUs our checkpoint
    records (after a restart on hardware, the instances we created are still there).
    """
    return tuple(
        gpu
        for gpu in node.gpus
        if gpu.mig_enabled
        and (not gpu.mig_instances or gpu.uuid in claimed)
        and catalogue_for(gpu.product_name, gpu.memory_mib) is not None
    )


def slot_devices(gpus: Iterable[Gpu]) -> dict[str, tuple[str, list[AdvertisedDevice]]]:
    """Resource name -> (profile, one device per placement), GPU by GPU, start by start."""
    by_resource: dict[str, tuple[str, list[AdvertisedDevice]]] = {}
    for gpu in gpus:
        catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
        if catalogue is None:
            continue
        for profile in catalogue.profiles:
            entry = by_resource.setdefault(mig_resource_name(profile.name), (profile.name, []))
            for start in profile.starts:
                planned = planned_instance(gpu, catalogue, profile, start)
                entry[1].append(
                    AdvertisedDevice(id=planned.uuid, physical_id=planned.uuid, gpu=gpu, mig=planned, dynamic=True)
                )
    return by_resource


def planned_instance(gpu: Gpu, catalogue: MigCatalogue, profile: MigProfile, start: int) -> MigInstance:
    """The MIG device a placement would become, before it exists: its UUID is the slot ID, its ids are -1.

    Carrying it makes the placement a MIG device everywhere (kind, isolation); Allocate swaps in the real one.
    """
    device_id = slot_id(gpu.uuid, profile, start)
    memory = gpu.memory_mib * profile.memory_slices // catalogue.memory_slices
    return MigInstance(profile.name, device_id, gpu.uuid, gpu.index, -1, -1, -1, start, profile.memory_slices,
                       memory, -1, -1)  # fmt: skip


def dynamic_resources(node: Node, claimed: Collection[str] = ()) -> tuple[Resource, ...]:
    """One resource per profile the node's dynamic GPUs offer, every placement a device, sorted by name."""
    resources = []
    for name, (profile, devices) in sorted(slot_devices(dynamic_gpus(node, claimed)).items()):
        resources.append(
            Resource(
                name=name,
                kind="mig",
                devices=tuple(devices),
                mig_profile=profile,
                base_name=name,
                derivation=_derivation(profile, devices),
            )
        )
    return tuple(resources)


def build_dynamic_plan(node: Node, config: Config, claimed: Collection[str] = ()) -> SharingPlan:
    """Whole GPUs and fixed MIG layouts as under `mixed`, plus every placement of the dynamic GPUs.

    A fixed-layout MIG device and the placements of a dynamic GPU with the same profile share one
    resource. Dynamic placements cannot be replicated: sharing one, or MPS at all, is refused. `claimed`:
    see dynamic_gpus.
    """
    slots = dynamic_resources(node, claimed)
    names = {resource.name for resource in slots}
    if config.sharing.strategy == "mps":
        raise SharingError("flags.migStrategy=dynamic: sharing with MPS is not supported together with dynamic MIG")
    replicated = config.sharing.replicated
    if replicated is not None:
        for position, entry in enumerate(replicated.resources):
            if entry.name in names:
                raise SharingError(
                    f"sharing.timeSlicing.resources[{position}].name: {entry.name} is a dynamic MIG resource; "
                    "its placements cannot be shared"
                )
    dynamic = {gpu.uuid for gpu in dynamic_gpus(node, claimed)}
    static_node = replace(node, gpus=tuple(gpu for gpu in node.gpus if gpu.uuid not in dynamic))
    as_mixed = replace(config, flags=replace(config.flags, mig_strategy="mixed"))
    base = build_static_plan(static_node, as_mixed) if static_node.gpus else SharingPlan(())
    by_name = {resource.name: resource for resource in slots}
    merged = []
    for resource in base.resources:
        extra = by_name.pop(resource.name, None)
        if extra is None:
            merged.append(resource)
            continue
        merged.append(
            replace(
                resource,
                devices=resource.devices + extra.devices,
                derivation=f"{resource.derivation}; {extra.derivation}",
            )
        )
    merged.extend(by_name.values())
    return SharingPlan(tuple(sorted(merged, key=_order)), base.warnings)


def has_placements(plan: SharingPlan) -> bool:
    """Whether the plan advertises dynamic MIG placements (then the plugin runs the dynamic-MIG runtime)."""
    return any(device.dynamic for resource in plan.resources for device in resource.devices)


def placement_gpus(plan: SharingPlan) -> frozenset[str]:
    """UUIDs of the GPUs whose placements the plan advertises: the GPUs the dynamic-MIG geometry carves."""
    return frozenset(d.gpu.uuid for r in plan.resources for d in r.devices if d.dynamic)


def _order(resource: Resource) -> tuple[int, str]:
    return (0 if resource.kind == "gpu" else 1, resource.name)


def _derivation(profile: str, devices: list[AdvertisedDevice]) -> str:
    per_gpu: dict[str, int] = {}
    for device in devices:
        per_gpu[device.gpu.uuid] = per_gpu.get(device.gpu.uuid, 0) + 1
    gpus = f"{len(per_gpu)} GPU{'s' if len(per_gpu) != 1 else ''}"
    counts = sorted(set(per_gpu.values()))
    each = str(counts[0]) if len(counts) == 1 else "/".join(str(c) for c in counts)
    return f"{gpus} x {each} placements of {profile} = {len(devices)}"
