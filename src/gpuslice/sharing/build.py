"""From a Node and a Config to the advertised resources: MIG strategy first, then the sharing rules."""

from __future__ import annotations

from collections.abc import Sequence

from gpuslice.config import Config, SharingRule, effective_sharing
from gpuslice.config.limits import MAX_DEVICES_PER_RESOURCE
from gpuslice.config.validate import SHARED_SUFFIX, EffectiveSharing
from gpuslice.gpu import Gpu, MigInstance, Node
from gpuslice.sharing.bases import GPU_RESOURCE, BaseResource, base_resources, mig_resource_name
from gpuslice.sharing.ids import InvalidDeviceReference, parse_device_reference, replica_id, resolve_reference
from gpuslice.sharing.model import AdvertisedDevice, Resource, SharingError, SharingPlan

_Physical = tuple[Gpu, MigInstance | None]
_Claim = tuple[str, int]  # advertised name, replicas

__all__ = ["GPU_RESOURCE", "SHARED_SUFFIX", "build_static_plan", "mig_resource_name"]


def build_static_plan(node: Node, config: Config) -> SharingPlan:
    """What the node advertises under a static MIG strategy, in a stable order; SharingError if impossible.

    Sharing rules come from config.effective_sharing (NVIDIA's rules: every device of a named resource
    is replicated; with `gpuslice.honorDevices` also `devices`, `rename` and `model`). Devices no rule
    claims stay whole under their resource's own name. `migStrategy: dynamic` is not for this builder:
    sharing.strategy.build_resources sends it to the dynamic plan.
    """
    if config.flags.mig_strategy == "dynamic":
        raise SharingError("flags.migStrategy=dynamic: build the plan with sharing.build_resources")
    warnings: list[str] = []
    bases = [base for base in base_resources(node, config.flags.mig_strategy, warnings) if base.devices]
    sharing = effective_sharing(config)
    warnings.extend(sharing.warnings)
    section = "mps" if sharing.strategy == "mps" else "timeSlicing"
    if sharing.strategy == "mps" and config.flags.mig_strategy == "mixed":
        raise SharingError("sharing.mps: using --mig-strategy=mixed is not supported with MPS")
    known = {base.name for base in bases}
    for position, rule in enumerate(sharing.rules):
        if rule.resource not in known:
            warnings.append(
                f"sharing.{section}.resources[{position}].name: no device is advertised as {rule.resource}; "
                "nothing to share"
            )
    resources: list[Resource] = []
    for base in bases:
        resources.extend(_share(node, base, sharing, section, config, warnings))
    names = [resource.name for resource in resources]
    for name in names:
        if names.count(name) > 1:
            raise SharingError(f"sharing.{section}: two different resources would both be advertised as {name}")
    return SharingPlan(tuple(resources), tuple(warnings))


def _share(
    node: Node, base: BaseResource, sharing: EffectiveSharing, section: str, config: Config, warnings: list[str]
) -> list[Resource]:
    rules = [(position, rule) for position, rule in enumerate(sharing.rules) if rule.resource == base.name]
    if rules and sharing.strategy == "mps" and base.kind == "mig":
        raise SharingError(
            f"sharing.mps.resources[{rules[0][0]}].name: sharing using MPS is not supported for MIG devices"
        )
    claims: dict[_Physical, _Claim] = {}
    for position, rule in rules:
        key = f"sharing.{section}.resources[{position}]"
        free = [device for device in base.devices if device not in claims]
        candidates = [device for device in free if rule.applies_to_model(device[0].product_name)]
        chosen = _select(node, base, candidates, rule, key, warnings)
        if not chosen:
            warnings.append(f"{key}: no unshared device of {base.name} is left for it; ignored")
        for device in chosen:
            claims[device] = (rule.advertised_name, rule.replicas)
    order = list(dict.fromkeys([base.name, *(rule.advertised_name for _, rule in rules)]))
    groups: dict[str, list[tuple[_Physical, int | None]]] = {name: [] for name in order}
    for device in base.devices:
        name, replicas = claims.get(device, (base.name, None))
        groups[name].append((device, replicas))
    return [_resource(name, base, members, sharing, config) for name, members in groups.items() if members]


def _select(
    node: Node, base: BaseResource, candidates: list[_Physical], rule: SharingRule, key: str, warnings: list[str]
) -> list[_Physical]:
    """The devices a rule's `devices` value picks from `candidates` (all, the first N, or a list of references)."""
    if rule.devices == "all":
        return candidates
    if isinstance(rule.devices, int):
        if len(candidates) < rule.devices:
            warnings.append(f"{key}.devices: asks for {rule.devices} devices, only {len(candidates)} are available")
        return candidates[: rule.devices]
    chosen: list[_Physical] = []
    for position, item in enumerate(rule.devices):
        where = f"{key}.devices[{position}]"
        try:
            gpu, mig = resolve_reference(node, parse_device_reference(item))
        except InvalidDeviceReference as exc:
            raise SharingError(f"{where}: {exc}") from exc
        # A GPU reference on a MIG resource means every MIG device of that GPU.
        named = [d for d in base.devices if d[0].uuid == gpu.uuid and (mig is None or d[1] == mig)]
        if not named:
            raise SharingError(f"{where}: {item!r} is not a device of {base.name}")
        picked = [d for d in named if d in candidates and d not in chosen]
        if not picked:
            warnings.append(f"{where}: {item!r} is already shared by an earlier entry or another model; skipped")
        chosen.extend(picked)
    return chosen


def _resource(
    name: str,
    base: BaseResource,
    members: Sequence[tuple[_Physical, int | None]],
    sharing: EffectiveSharing,
    config: Config,
) -> Resource:
    total = sum(replicas or 1 for _, replicas in members)
    if total > MAX_DEVICES_PER_RESOURCE:  # checked before building them: the count alone could fill memory
        raise SharingError(
            f"{name}: {_derivation(members, base.profile)} devices is over the limit of {MAX_DEVICES_PER_RESOURCE} "
            "devices per resource (what the kubelet's 4 MiB ListAndWatch message holds with margin)"
        )
    devices: list[AdvertisedDevice] = []
    for (gpu, mig), replicas in members:
        physical = mig.uuid if mig is not None else gpu.uuid
        if replicas is None:
            devices.append(AdvertisedDevice(id=physical, physical_id=physical, gpu=gpu, mig=mig))
            continue
        devices.extend(
            AdvertisedDevice(
                id=replica_id(physical, n), physical_id=physical, gpu=gpu, mig=mig, replica=n, sharing=sharing.strategy
            )
            for n in range(replicas)
        )
    counts = [replicas for _, replicas in members if replicas is not None]
    shared = bool(counts)
    return Resource(
        name=name,
        kind=base.kind,
        devices=tuple(devices),
        sharing=sharing.strategy if shared else "none",
        replicas=max(counts, default=1),
        mig_profile=base.profile,
        fail_requests_greater_than_one=sharing.fail_requests_greater_than_one if shared else False,
        allocation_policy=config.flags.plugin.shared_devices_allocation_policy,
        base_name=base.name,
        derivation=_derivation(members, base.profile),
    )


def _derivation(members: Sequence[tuple[_Physical, int | None]], profile: str | None) -> str:
    """How the advertised count follows from the hardware, e.g. '4 GPUs x 4 replicas = 16'."""
    by_replicas: dict[int | None, list[_Physical]] = {}
    for device, replicas in members:
        by_replicas.setdefault(replicas, []).append(device)
    parts = [_part(devices, replicas, profile) for replicas, devices in by_replicas.items()]
    total = sum(replicas or 1 for _, replicas in members)
    return f"{' + '.join(parts)} = {total}"


def _part(devices: Sequence[_Physical], replicas: int | None, profile: str | None) -> str:
    per_gpu: dict[str, int] = {}
    for gpu, _ in devices:
        per_gpu[gpu.uuid] = per_gpu.get(gpu.uuid, 0) + 1
    gpus = f"{len(per_gpu)} GPU{'s' if len(per_gpu) != 1 else ''}"
    counts = list(per_gpu.values())
    if profile is None:
        text = gpus if replicas is not None else f"{gpus}, one device each"
    elif len(set(counts)) == 1:
        text = f"{gpus} x {counts[0]} x {profile}"
    else:
        text = f"({'+'.join(str(count) for count in counts)}) x {profile} on {gpus}"
    if replicas is not None:
        text += f" x {replicas} replica{'s' if replicas != 1 else ''}"
    return text
