"""The node-spec YAML format (a public contract) and the built-in presets of the fake backend."""

from __future__ import annotations

import uuid
from dataclasses import field
from pathlib import Path
from typing import Any

from gpuslice.discovery.mig_minors import STANDARD_MIG_MINORS
from gpuslice.fsutil.textread import InputFileError, read_bounded_text
from gpuslice.gpu import (
    PCI_CLASS_3D_CONTROLLER,
    ComputeCapability,
    FabricInfo,
    Gpu,
    InvalidMigLayout,
    MigInstance,
    Node,
    assign_placements,
    catalogue_for,
    name_uuid,
)
from gpuslice.records import record
from gpuslice.topology import TopologySpecError, topology_from_spec

# Namespace for deterministic fake UUIDs: the same spec always yields the same IDs.
_UUID_NAMESPACE = uuid.UUID("5b1c2c6e-8a51-4bd4-9a51-6770757c6963")


# Limits on a node spec (docs/security.md). Today's largest nodes carry 8 or 16 GPUs; 64 leaves room for any
# test rig. MIG: the largest geometry (A100/H100/H200/B200) holds 7 GPU instances; the cap is set above
# that so the MIG catalogue still explains a count just over what fits. A spec is a few KiB.
MAX_NODE_SPEC_BYTES = 1 << 20
MAX_GPUS_PER_NODE = 64
MAX_MIG_INSTANCES_PER_GPU = 16


class NodeSpecError(ValueError):
    """A node spec that cannot describe a node; the message names the key and the reason."""


@record
class NodeSpec:
    """A parsed node spec: the node plus the optional sections other packages read."""

    node: Node
    health_events: Path | None = None
    topology: dict[str, Any] | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


_H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
_A100_40 = {"model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960, "compute_capability": "8.0"}

PRESETS: dict[str, dict[str, Any]] = {
    "h100x4": {
        "name": "gpuslice-h100x4",
        "gpus": [{**_H100, "count": 2, "numa_node": 0}, {**_H100, "count": 2, "numa_node": 1}],
    },
    "h100x4-mig": {
        "name": "gpuslice-h100x4-mig",
        "gpus": [{**_H100, "count": 4, "mig": ["1g.10gb"] * 7}],
    },
    "dgx-h100": {
        "name": "gpuslice-dgx-h100",
        "gpus": [{**_H100, "count": 4, "numa_node": 0}, {**_H100, "count": 4, "numa_node": 1}],
        "topology": {"preset": "dgx-h100"},
    },
    "a100x8": {
        "name": "gpuslice-a100x8",
        "gpus": [{**_A100_40, "count": 4, "numa_node": 0}, {**_A100_40, "count": 4, "numa_node": 1}],
        "topology": {"preset": "dgx-a100"},
    },
}

DEFAULT_PRESET = "h100x4"

_TOP_KEYS = {"name", "gpus", "driver_version", "cuda_version", "machine_type", "health_events", "topology"}
_GPU_KEYS = {
    "model",
    "count",
    "memory_mib",
    "compute_capability",
    "numa_node",
    "mig",
    "pci_bus_id",
    "pci_class",
    "fabric",
}


def load_node_spec(ref: str | None) -> NodeSpec:
    """Load `preset:NAME`, a bare preset name, or a YAML file path (None: the default preset)."""
    ref = ref or f"preset:{DEFAULT_PRESET}"
    name = ref.removeprefix("preset:")
    if ref.startswith("preset:") or (name in PRESETS and not Path(ref).exists()):
        if name not in PRESETS:
            raise NodeSpecError(f"unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}")
        return parse_node_spec(PRESETS[name], source=f"preset:{name}")
    path = Path(ref)
    try:
        text = read_bounded_text(path, "node spec", MAX_NODE_SPEC_BYTES)
    except OSError as exc:
        raise NodeSpecError(f"cannot read node spec {ref}: {exc.strerror or exc}") from exc
    except InputFileError as exc:
        raise NodeSpecError(str(exc)) from exc
    import yaml  # presets are Python data: only a spec file needs the parser

    from gpuslice.fsutil.safe_yaml import load_yaml

    try:
        data, _ = load_yaml(text)
    except yaml.YAMLError as exc:
        raise NodeSpecError(f"{ref}: not valid YAML: {exc}") from exc
    spec = parse_node_spec(data, source=str(path))
    if spec.health_events is not None and not spec.health_events.is_absolute():
        spec = NodeSpec(spec.node, path.parent / spec.health_events, spec.topology, spec.source, spec.raw)
    return spec


def parse_node_spec(data: Any, source: str = "<node spec>") -> NodeSpec:
    """Validate a node-spec mapping and build the Node; errors name the offending key."""
    if not isinstance(data, dict):
        raise NodeSpecError(f"{source}: a node spec must be a mapping with a 'gpus' list")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise NodeSpecError(f"{source}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(_TOP_KEYS))})")
    gpus_raw = data.get("gpus")
    if not isinstance(gpus_raw, list):
        raise NodeSpecError(f"{source}: gpus: must be a list of GPU entries")
    node_name = str(data.get("name", "gpuslice-node"))
    gpus: list[Gpu] = []
    for position, entry in enumerate(gpus_raw):
        where = f"{source}: gpus[{position}]"
        count = entry.get("count", 1) if isinstance(entry, dict) else 1
        if isinstance(count, int) and len(gpus) + count > MAX_GPUS_PER_NODE:  # before building any of them
            raise NodeSpecError(
                f"{where}.count: {len(gpus) + count} GPUs on the node, over the limit of {MAX_GPUS_PER_NODE}"
            )
        gpus.extend(_parse_gpu_entry(entry, where, node_name, len(gpus)))
    node = Node(
        name=node_name,
        gpus=tuple(gpus),
        driver_version=str(data.get("driver_version", "550.127.08")),
        cuda_driver_version=str(data.get("cuda_version", "12.4")),
        machine_type=str(data.get("machine_type", "unknown")),
    )
    health = data.get("health_events")
    if health is not None and not isinstance(health, str):
        raise NodeSpecError(f"{source}: health_events: must be a file path")
    topology = data.get("topology")
    if topology is not None and not isinstance(topology, dict):
        raise NodeSpecError(f"{source}: topology: must be a mapping")
    if topology is not None:
        try:  # validate now, so a bad section is refused with the rest of the spec
            topology_from_spec(topology, node.gpus)
        except TopologySpecError as exc:
            raise NodeSpecError(f"{source}: {exc}") from exc
    return NodeSpec(node, Path(health) if health else None, topology, source, dict(data))


def _parse_gpu_entry(entry: Any, where: str, node_name: str, first_index: int) -> list[Gpu]:
    if not isinstance(entry, dict):
        raise NodeSpecError(f"{where}: must be a mapping with at least 'model'")
    unknown = sorted(set(entry) - _GPU_KEYS)
    if unknown:
        raise NodeSpecError(f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(_GPU_KEYS))})")
    model = entry.get("model")
    if not isinstance(model, str) or not model.strip():
        raise NodeSpecError(f"{where}.model: required, the product name as NVML reports it")
    count = entry.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise NodeSpecError(f"{where}.count: must be a positive integer, got {count!r}")
    memory = entry.get("memory_mib")
    if not isinstance(memory, int) or isinstance(memory, bool) or memory <= 0:
        raise NodeSpecError(f"{where}.memory_mib: required, a positive integer, got {memory!r}")
    try:
        capability = ComputeCapability.parse(str(entry.get("compute_capability", "")))
    except ValueError as exc:
        raise NodeSpecError(f"{where}.compute_capability: {exc}") from exc
    numa = entry.get("numa_node")
    if numa is not None and (not isinstance(numa, int) or isinstance(numa, bool) or numa < 0):
        raise NodeSpecError(f"{where}.numa_node: must be a non-negative integer, got {numa!r}")
    pci_class = _pci_class(entry.get("pci_class", PCI_CLASS_3D_CONTROLLER), f"{where}.pci_class")
    fabric = _fabric(entry.get("fabric"), f"{where}.fabric")
    mig_raw = entry.get("mig")
    mig_profiles: list[str] | None = None
    if mig_raw is not None:
        if not isinstance(mig_raw, list) or not all(isinstance(p, str) for p in mig_raw):
            raise NodeSpecError(f"{where}.mig: must be a list of MIG profile names such as 1g.10gb")
        if len(mig_raw) > MAX_MIG_INSTANCES_PER_GPU:
            raise NodeSpecError(
                f"{where}.mig: {len(mig_raw)} instances, over the limit of {MAX_MIG_INSTANCES_PER_GPU} per GPU"
            )
        mig_profiles = list(mig_raw)
    gpus = []
    for offset in range(count):
        index = first_index + offset
        gpu_uuid = f"GPU-{name_uuid(_UUID_NAMESPACE, f'{node_name}/{index}/{model}')}"
        instances: tuple[MigInstance, ...] = ()
        if mig_profiles is not None:
            instances = _build_mig(where, model, memory, capability, gpu_uuid, index, mig_profiles)
        gpus.append(
            Gpu(
                index=index,
                uuid=gpu_uuid,
                product_name=model,
                memory_mib=memory,
                compute_capability=capability,
                numa_node=numa,
                pci_bus_id=str(entry.get("pci_bus_id", f"00000000:{0x18 + index * 0x10:02X}:00.0")),
                mig_enabled=mig_profiles is not None,
                mig_instances=instances,
                pci_class=pci_class,
                fabric=fabric,
            )
        )
    return gpus


def _pci_class(value: Any, where: str) -> int:
    """A 24-bit PCI class code, as an integer or a hex string ("0x030200")."""
    try:
        code = int(value, 16) if isinstance(value, str) else value
    except ValueError:
        code = None
    if not isinstance(code, int) or isinstance(code, bool) or not 0 <= code <= 0xFFFFFF:
        raise NodeSpecError(f"{where}: must be a 24-bit PCI class code such as 0x030200, got {value!r}")
    return code


def _fabric(value: Any, where: str) -> FabricInfo | None:
    """`{cluster_uuid, clique_id}`: the GPUs' NVLink fabric (as NVML's fabric info reports it once registered)."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"cluster_uuid", "clique_id"}:
        raise NodeSpecError(f"{where}: must be a mapping with exactly cluster_uuid and clique_id")
    try:
        cluster = str(uuid.UUID(str(value["cluster_uuid"])))
    except ValueError as exc:
        raise NodeSpecError(f"{where}.cluster_uuid: not a UUID: {value['cluster_uuid']!r}") from exc
    clique = value["clique_id"]
    if not isinstance(clique, int) or isinstance(clique, bool) or not 0 <= clique < 2**32:
        raise NodeSpecError(f"{where}.clique_id: must be an integer from 0 to 4294967295, got {clique!r}")
    return FabricInfo(cluster, clique)


def _build_mig(
    where: str,
    model: str,
    memory_mib: int,
    capability: ComputeCapability,
    gpu_uuid: str,
    index: int,
    profiles: list[str],
) -> tuple[MigInstance, ...]:
    catalogue = catalogue_for(model, memory_mib)
    if catalogue is None or not capability.mig_capable:
        raise NodeSpecError(f"{where}.mig: {model} does not support MIG")
    try:
        starts = assign_placements(catalogue, profiles)
    except InvalidMigLayout as exc:
        raise NodeSpecError(f"{where}.mig: {exc}") from exc
    instances = []
    for mig_index, (name, start) in enumerate(zip(profiles, starts, strict=True)):
        profile = catalogue.profile(name)
        gi = mig_index + 1
        instances.append(
            MigInstance(
                profile=profile.name,
                uuid=f"MIG-{name_uuid(_UUID_NAMESPACE, f'{gpu_uuid}/{gi}/0')}",
                parent_uuid=gpu_uuid,
                parent_index=index,
                index=mig_index,
                gi=gi,
                ci=0,
                placement_start=start,
                placement_size=profile.memory_slices,
                memory_mib=memory_mib * profile.memory_slices // catalogue.memory_slices,
                gi_cap_minor=STANDARD_MIG_MINORS.gi_minor(index, gi),
                ci_cap_minor=STANDARD_MIG_MINORS.ci_minor(index, gi, 0),
            )
        )
    return tuple(instances)
