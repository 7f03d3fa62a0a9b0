"""gpu-feature-discovery's label catalogue (the `nvidia.com/` labels), computed from a Node and the config."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from gpuslice.config import Config, EffectiveSharing, SharingRule
from gpuslice.gpu import (
    PCI_CLASS_3D_CONTROLLER,
    PCI_CLASS_VGA_CONTROLLER,
    Gpu,
    MigInstance,
    MigProfile,
    Node,
    catalogue_for,
)
from gpuslice.labels.names import sanitise
from gpuslice.sharing import GPU_RESOURCE, mig_resource_name


class LabelError(ValueError):
    """The node cannot be labelled (gpu-feature-discovery fails the same way); the message says why."""


def choose_model(counts: Counter[str]) -> str:
    """Our deterministic rule for nodes with several models: the most devices, ties by name (smallest first).

    gpu-feature-discovery merges per-model label sets and the last (random) one wins.
    """
    return min(counts, key=lambda model: (-counts[model], model))


def rule_for(sharing: EffectiveSharing, resource: str, model: str) -> SharingRule | None:
    """The sharing rule NVIDIA would use for a resource: the first entry naming it (and matching the model)."""
    for rule in sharing.rules_for(resource):
        if rule.applies_to_model(model):
            return rule
    return None


def nvidia_labels(
    node: Node, config: Config, sharing: EffectiveSharing, machine_type: str
) -> tuple[dict[str, str], list[str]]:
    """Every `nvidia.com/` label except the timestamp, and the warnings met; raises LabelError."""
    if not node.gpus:
        return {}, []  # gpu-feature-discovery labels a GPU-less node with the timestamp only
    warnings: list[str] = []
    labels = {"nvidia.com/gpu.machine": sanitise(machine_type) or "unknown"}
    labels.update(version_labels(node.driver_version, node.cuda_driver_version))
    labels["nvidia.com/mig.capable"] = _bool(any(_mig_capable(gpu) for gpu in node.gpus))
    labels["nvidia.com/mps.capable"] = _bool(_mps_capable(node, sharing))
    labels["nvidia.com/gpu.mode"] = gpu_mode(node.gpus)
    labels.update(clique_labels(node.gpus, warnings))
    labels.update(full_gpu_labels(node.gpus, sharing, warnings))
    strategy = config.flags.mig_strategy
    if strategy != "none":
        labels["nvidia.com/mig.strategy"] = strategy
    if strategy == "single":
        labels.update(mig_single_labels(node.gpus, sharing, warnings))
    elif strategy == "mixed":
        labels.update(mig_mixed_labels(node.gpus, sharing))
    # dynamic: no nvidia.com/mig-<profile>.* labels, since instances come and go with pods; what the GPUs
    # can be carved into is in gpuslice.io (labels.dynamic_profiles). nvidia.com/gpu.* are as under mixed.
    return labels, warnings


def version_labels(driver_version: str, cuda_version: str) -> dict[str, str]:
    """Driver and CUDA driver-API version labels, under the current and the deprecated names."""
    parts = driver_version.split(".")
    if not 2 <= len(parts) <= 3 or not all(parts):
        raise LabelError(f'error getting driver version: Version "{driver_version}" does not match format "X.Y[.Z]"')
    major, minor = parts[0], parts[1]
    revision = parts[2] if len(parts) == 3 else ""
    cuda = cuda_version.split(".")
    if len(cuda) != 2 or not all(part.isdigit() for part in cuda):
        raise LabelError(f'error getting cuda driver version: Version "{cuda_version}" does not match format "X.Y"')
    cuda_major, cuda_minor = str(int(cuda[0])), str(int(cuda[1]))
    return {
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": revision,
        "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": revision,
        "nvidia.com/cuda.driver-version.full": driver_version,
        "nvidia.com/cuda.runtime-version.major": cuda_major,
        "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.full": f"{cuda_major}.{cuda_minor}",
    }


def full_gpu_labels(gpus: Sequence[Gpu], sharing: EffectiveSharing, warnings: list[str]) -> dict[str, str]:
    """`nvidia.com/gpu.*` for physical GPUs (MIG-enabled ones included), for one model chosen deterministically."""
    counts = Counter(gpu.product_name for gpu in gpus)
    model = choose_model(counts)
    if len(counts) > 1:
        listed = ", ".join(f"{name} x{counts[name]}" for name in sorted(counts))
        warnings.append(
            f"Multiple device types detected: {listed}; nvidia.com/gpu.* labels describe {model} "
            "(most GPUs, ties by name); see gpuslice.io/gpu.product.* for every model"
        )
    of_model = [gpu for gpu in gpus if gpu.product_name == model]
    first = of_model[0]
    # NVIDIA labels a model whose GPUs all have MIG enabled "without sharing" (replicas 0).
    shared = any(not gpu.mig_enabled for gpu in of_model)
    rule = rule_for(sharing, GPU_RESOURCE, model) if shared else None
    labels = resource_labels(GPU_RESOURCE, sharing.strategy, rule, shared, len(of_model), [model])
    if first.memory_mib:
        labels["nvidia.com/gpu.memory"] = str(first.memory_mib)
    capability = first.compute_capability
    if capability.major:
        labels["nvidia.com/gpu.family"] = capability.family
        labels["nvidia.com/gpu.compute.major"] = str(capability.major)
        labels["nvidia.com/gpu.compute.minor"] = str(capability.minor)
    return labels


def mig_single_labels(gpus: Sequence[Gpu], sharing: EffectiveSharing, warnings: list[str]) -> dict[str, str]:
    """MIG `single`: `nvidia.com/gpu.*` describe the MIG devices, or say `<MODEL>-MIG-INVALID`."""
    enabled = [gpu for gpu in gpus if gpu.mig_enabled]
    if not enabled:
        return {}  # no MIG-enabled GPU: the same labels as strategy none
    reason = None
    if any(not gpu.mig_instances for gpu in enabled):
        reason = "at least one MIG device is enabled but empty"
    elif len(enabled) != len(gpus):
        reason = "devices with MIG enabled and disabled detected"
    elif len({instance.profile for gpu in enabled for instance in gpu.mig_instances}) != 1:
        reason = "more than one MIG device type present on node"
    if reason is not None:
        warnings.append(f"Invalid configuration detected for mig-strategy=single: {reason}")
        model = choose_model(Counter(gpu.product_name for gpu in enabled))
        return {
            "nvidia.com/gpu.product": f"{sanitise(model)}-MIG-INVALID",
            "nvidia.com/gpu.count": "0",
            "nvidia.com/gpu.replicas": "0",
            "nvidia.com/gpu.sharing-strategy": "",
            "nvidia.com/gpu.memory": "0",
        }
    return mig_resource_labels(GPU_RESOURCE, _mig_devices(gpus), sharing)


def mig_mixed_labels(gpus: Sequence[Gpu], sharing: EffectiveSharing) -> dict[str, str]:
    """MIG `mixed`: one `nvidia.com/mig-<profile>.*` set per profile present (empty MIG GPUs are ignored)."""
    by_profile: dict[str, list[tuple[Gpu, MigInstance]]] = {}
    for gpu, instance in _mig_devices(gpus):
        by_profile.setdefault(instance.profile, []).append((gpu, instance))
    labels: dict[str, str] = {}
    for profile in sorted(by_profile):
        labels.update(mig_resource_labels(mig_resource_name(profile), by_profile[profile], sharing))
    return labels


def mig_resource_labels(
    resource: str, devices: Sequence[tuple[Gpu, MigInstance]], sharing: EffectiveSharing
) -> dict[str, str]:
    """Product, count, sharing and MIG attribute labels for one MIG resource (all devices share one profile)."""
    model = choose_model(Counter(gpu.product_name for gpu, _ in devices))
    parent, instance = next((gpu, mig) for gpu, mig in devices if gpu.product_name == model)
    rule = rule_for(sharing, resource, model)
    suffix = instance.profile.replace("+", ".")
    labels = resource_labels(resource, sharing.strategy, rule, True, len(devices), [model, "MIG", suffix])
    key = resource + "."
    labels[key + "memory"] = str(instance.memory_mib)
    profile = _profile_of(parent, instance)
    if profile is not None:
        labels[key + "multiprocessors"] = str(profile.multiprocessors)
        labels[key + "slices.gi"] = str(profile.sm_slices)
        labels[key + "slices.ci"] = str(profile.sm_slices)  # one full-size compute instance per GPU instance
        labels[key + "engines.copy"] = str(profile.copy_engines)
        labels[key + "engines.decoder"] = str(profile.decoders)
        labels[key + "engines.encoder"] = str(profile.encoders)
        labels[key + "engines.jpeg"] = str(profile.jpeg)
        labels[key + "engines.ofa"] = str(profile.ofa)
    return labels


def resource_labels(
    resource: str, strategy: str, rule: SharingRule | None, sharing_enabled: bool, count: int, parts: Iterable[str]
) -> dict[str, str]:
    """product (with the -SHARED rule), count, replicas and sharing-strategy for one resource."""
    replicas = (rule.replicas if rule is not None else 1) if sharing_enabled else 0
    shared = rule is not None and replicas > 1
    renamed = rule is not None and rule.advertised_name != rule.resource
    product = "-".join(sanitise(part) for part in parts if part)
    if shared and not renamed:
        product += "-SHARED"
    key = resource + "."
    return {
        key + "product": product,
        key + "count": str(count),
        key + "replicas": str(replicas),
        key + "sharing-strategy": strategy if shared else "none",
    }


def _mig_devices(gpus: Sequence[Gpu]) -> list[tuple[Gpu, MigInstance]]:
    return [(gpu, instance) for gpu in gpus if gpu.mig_enabled for instance in gpu.mig_instances]


def _profile_of(gpu: Gpu, instance: MigInstance) -> MigProfile | None:
    catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
    if catalogue is None or instance.profile not in catalogue.names:
        return None
    return catalogue.profile(instance.profile)


def gpu_mode(gpus: Sequence[Gpu]) -> str:
    """`compute` (3D controller), `graphics` (VGA controller), or `unknown` (another or unread class, or a mix)."""
    modes = {_MODES.get(gpu.pci_class or -1, "unknown") for gpu in gpus}
    return modes.pop() if len(modes) == 1 else "unknown"


_MODES = {PCI_CLASS_3D_CONTROLLER: "compute", PCI_CLASS_VGA_CONTROLLER: "graphics"}


def clique_labels(gpus: Sequence[Gpu], warnings: list[str]) -> dict[str, str]:
    """`nvidia.com/gpu.clique` when every fabric-attached GPU is in one clique; none without a fabric."""
    cliques = sorted({gpu.fabric.clique for gpu in gpus if gpu.fabric is not None})
    if len(cliques) == 1:
        return {"nvidia.com/gpu.clique": cliques[0]}
    if cliques:
        warnings.append(f"GPUs are in {len(cliques)} fabric cliques ({', '.join(cliques)}); gpu.clique not set")
    return {}


def _mig_capable(gpu: Gpu) -> bool:
    return gpu.mig_enabled or (
        gpu.compute_capability.mig_capable and catalogue_for(gpu.product_name, gpu.memory_mib) is not None
    )


def _mps_capable(node: Node, sharing: EffectiveSharing) -> bool:
    if sharing.strategy != "mps":
        return False
    if any(gpu.mig_enabled for gpu in node.gpus):
        raise LabelError("failed to check MPS-capable: MPS sharing is not supported for mig devices")
    return True


def _bool(value: bool) -> str:
    return "true" if value else "false"
