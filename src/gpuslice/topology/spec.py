"""The node spec's `topology:` section (preset, pcie default, links) -> Topology; errors name the key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import combinations
from typing import Any

from gpuslice.gpu import Gpu
from gpuslice.topology.model import PairLink, PcieLevel, Topology
from gpuslice.topology.presets import PRESET_NAMES, UnknownPreset, preset_topology


class TopologySpecError(ValueError):
    """A `topology:` section that cannot describe the node; the message starts with the offending key."""


# Every spelling the section accepts for a PCIe level: ours, NVML's and `nvidia-smi topo -m`'s.
PCIE_LEVEL_NAMES: dict[str, PcieLevel] = {
    "internal": PcieLevel.INTERNAL,
    "board": PcieLevel.INTERNAL,
    "single": PcieLevel.SINGLE,
    "pix": PcieLevel.SINGLE,
    "multiple": PcieLevel.MULTIPLE,
    "pxb": PcieLevel.MULTIPLE,
    "hostbridge": PcieLevel.HOSTBRIDGE,
    "phb": PcieLevel.HOSTBRIDGE,
    "node": PcieLevel.NODE,
    "system": PcieLevel.SYSTEM,
    "sys": PcieLevel.SYSTEM,
}
NVLINK_KINDS = ("nvlink", "nvswitch")
MAX_NVLINKS = 18  # NVLink 4 (H100) has the most links per GPU so far

_SECTION_KEYS = ("links", "pcie", "preset")
_LINK_KEYS = ("count", "gpus", "link")


def topology_from_spec(section: Mapping[str, Any] | None, gpus: Sequence[Gpu]) -> Topology:
    """Build the node's topology from its spec section; None or {} derives PCIe levels from NUMA nodes."""
    ordered = sorted(gpus, key=lambda g: g.index)
    indices = tuple(g.index for g in ordered)
    uuids = tuple(g.uuid for g in ordered)
    if len(set(indices)) != len(indices):
        raise TopologySpecError(f"topology: GPU indices must be distinct, got {list(indices)}")
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        raise TopologySpecError("topology: must be a mapping with preset, pcie and/or links")
    unknown = sorted(str(key) for key in section if key not in _SECTION_KEYS)
    if unknown:
        raise TopologySpecError(f"topology.{unknown[0]}: unknown key (allowed: {', '.join(_SECTION_KEYS)})")

    preset = section.get("preset")
    if preset is not None:
        if "pcie" in section:
            raise TopologySpecError("topology.pcie: cannot be combined with preset; refine the preset with links")
        if not isinstance(preset, str) or preset not in PRESET_NAMES:
            raise TopologySpecError(f"topology.preset: unknown preset {preset!r} (known: {', '.join(PRESET_NAMES)})")
        try:
            links = dict(preset_topology(preset, ordered).links)
        except UnknownPreset as exc:
            raise TopologySpecError(f"topology.preset: {exc}") from None
        source = f"spec (preset:{preset})"
    elif "pcie" in section:
        level = _pcie_level(section["pcie"], "topology.pcie")
        links = {pair: PairLink(level) for pair in combinations(indices, 2)}
        source = "spec"
    else:
        links = _links_from_numa(ordered)
        source = "spec" if section.get("links") else "numa"

    entries = section.get("links", [])
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise TopologySpecError("topology.links: must be a list of {gpus: [...], link: ..., count: ...} entries")
    known = set(indices)
    for position, entry in enumerate(entries):
        _apply_entry(links, entry, f"topology.links[{position}]", known)
    return Topology(indices, links, uuids, source=source)


def _links_from_numa(gpus: Sequence[Gpu]) -> dict[tuple[int, int], PairLink]:
    # Without a section all we know is each GPU's NUMA node: same node -> NODE, different -> SYSTEM.
    # An unknown NUMA node (None) only matches another unknown one.
    links = {}
    for a, b in combinations(gpus, 2):
        level = PcieLevel.NODE if a.numa_node == b.numa_node else PcieLevel.SYSTEM
        links[(a.index, b.index)] = PairLink(level)
    return links


def _pcie_level(value: Any, where: str) -> PcieLevel:
    if isinstance(value, str) and value.lower() in PCIE_LEVEL_NAMES:
        return PCIE_LEVEL_NAMES[value.lower()]
    raise TopologySpecError(f"{where}: unknown PCIe level {value!r} (one of: {', '.join(PCIE_LEVEL_NAMES)})")


def _apply_entry(links: dict[tuple[int, int], PairLink], entry: Any, where: str, known: set[int]) -> None:
    if not isinstance(entry, Mapping):
        raise TopologySpecError(f"{where}: must be a mapping such as {{gpus: [0, 1], link: nvlink, count: 2}}")
    unknown = sorted(str(key) for key in entry if key not in _LINK_KEYS)
    if unknown:
        raise TopologySpecError(f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(_LINK_KEYS)})")
    members = _entry_gpus(entry.get("gpus"), f"{where}.gpus", known)

    kind = entry.get("link")
    if kind is None:
        raise TopologySpecError(f"{where}.link: required, one of {', '.join((*NVLINK_KINDS, *PCIE_LEVEL_NAMES))}")
    kind_name = kind.lower() if isinstance(kind, str) else kind
    count = entry.get("count")
    if kind_name in NVLINK_KINDS:
        links_count = _nvlink_count(count, f"{where}.count", default=1 if kind_name == "nvlink" else 0)
        for pair in combinations(members, 2):
            links[pair] = replace(links[pair], nvlinks=links_count, nvswitch=kind_name == "nvswitch")
        return
    level = _pcie_level(kind, f"{where}.link")
    if count is not None:
        raise TopologySpecError(f"{where}.count: only nvlink and nvswitch links have a count")
    for pair in combinations(members, 2):
        links[pair] = replace(links[pair], pcie=level)


def _entry_gpus(value: Any, where: str, known: set[int]) -> list[int]:
    if not isinstance(value, list) or len(value) < 2:
        raise TopologySpecError(f"{where}: must be a list of at least two GPU indices, got {value!r}")
    seen: set[int] = set()
    for gpu in value:
        if not isinstance(gpu, int) or isinstance(gpu, bool):
            raise TopologySpecError(f"{where}: GPU indices must be integers, got {gpu!r}")
        if gpu not in known:
            raise TopologySpecError(f"{where}: GPU {gpu} does not exist (the node has {_describe(known)})")
        if gpu in seen:
            raise TopologySpecError(f"{where}: GPU {gpu} is listed twice")
        seen.add(gpu)
    return sorted(seen)


def _nvlink_count(value: Any, where: str, default: int) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_NVLINKS:
        raise TopologySpecError(f"{where}: must be an integer from 0 to {MAX_NVLINKS}, got {value!r}")
    return value


def _describe(known: set[int]) -> str:
    if not known:
        return "no GPUs"
    ordered = sorted(known)
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"GPUs {ordered[0]}-{ordered[-1]}"
    return "GPUs " + ", ".join(str(g) for g in ordered)
