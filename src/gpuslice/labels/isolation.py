"""gpuslice's own labels: each advertised resource's isolation, MPS limits, and every GPU model on the node."""

from __future__ import annotations

from collections import Counter

from gpuslice.config import Config
from gpuslice.gpu import Node
from gpuslice.labels.names import GPUSLICE_PREFIX, label_key_problem, sanitise, short_resource_name
from gpuslice.sharing import Isolation, Resource, SharingError, build_resources, isolation_label_key


def mps_limits(resource: Resource) -> tuple[int, int]:
    """The MPS daemon's per-client defaults: pinned memory = GPU memory / replicas (MiB), threads = 100 / replicas.

    A resource spanning GPUs of different sizes gets the smallest limit, so the label is a guarantee.
    """
    replicas = max(resource.replicas, 1)
    memory = min(
        (device.mig.memory_mib if device.mig is not None else device.gpu.memory_mib) for device in resource.devices
    )
    return memory // replicas, 100 // replicas


def gpuslice_labels(node: Node, config: Config) -> tuple[dict[str, str], list[str]]:
    """Our `gpuslice.io/` labels, from the same sharing plan the device plugin advertises, and warnings."""
    warnings: list[str] = []
    if not node.gpus:
        return {}, warnings
    labels: dict[str, str] = {}
    try:
        # Under dynamic MIG, instances the plugin created must not turn a dynamic GPU into a fixed layout
        # here: the labeller cannot tell them apart, so every MIG-enabled GPU counts as claimed.
        plan = build_resources(node, config, claimed={gpu.uuid for gpu in node.gpus})
        resources = plan.resources
    except SharingError as exc:
        warnings.append(f"no gpuslice.io isolation labels: the plugin cannot advertise this node: {exc}")
        resources = ()
    for resource in resources:
        short = short_resource_name(resource.name)
        _put(
            labels, isolation_label_key(resource.name).removeprefix(GPUSLICE_PREFIX), resource.isolation.value, warnings
        )
        if resource.isolation is Isolation.MPS and resource.devices:
            memory, threads = mps_limits(resource)
            _put(labels, f"{short}.mps.memory-limit", str(memory), warnings)
            _put(labels, f"{short}.mps.active-thread-percentage", str(threads), warnings)
    models = Counter(gpu.product_name for gpu in node.gpus)
    labels[GPUSLICE_PREFIX + "gpu.model-count"] = str(len(models))
    for model in sorted(models):
        _put(labels, f"gpu.product.{sanitise(model)}", str(models[model]), warnings)
    return labels, warnings


def _put(labels: dict[str, str], name: str, value: str, warnings: list[str]) -> None:
    """Add one of our labels, or skip it with a warning when Kubernetes would refuse its key."""
    key = GPUSLICE_PREFIX + name
    problem = label_key_problem(key)
    if problem is not None:
        warnings.append(f"{problem}; label skipped")
        return
    labels[key] = value
